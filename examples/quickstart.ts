/**
 * A whole flow against a running Nexus with @nexus-gateway/client: a workspace, a quota strategy and a plan,
 * a user provisioned with an inference key, that user's quota and key seen from both sides, the lists of the
 * usage area, and an error handled by its class.
 *
 *   NEXUS_BASE_URL=http://127.0.0.1:8080 NEXUS_MANAGEMENT_KEY=nx-mgmt-... npx tsx examples/quickstart.ts
 *
 * It prints one line per step. The client package's test (test/spine/client-package.test.ts) installs the
 * packed client into a scratch project, compiles this file there under --strict --exactOptionalPropertyTypes
 * and runs it against a Nexus it starts.
 */
import { Nexus, NotFoundError } from '@nexus-gateway/client';

const baseUrl = process.env.NEXUS_BASE_URL;
if (!baseUrl) throw new Error('Set NEXUS_BASE_URL (and NEXUS_MANAGEMENT_KEY) to the Nexus to run against');
const nexus = new Nexus({ baseUrl, apiKey: process.env.NEXUS_MANAGEMENT_KEY });
const run = Date.now().toString(36);

// System: is Nexus up?
const health = await nexus.system.getHealth();
console.log(`system: health ${health.status}`);

// Workspaces: a tenant of Nexus.
const workspace = await nexus.workspaces.create({ name: `Quickstart ${run}` });
console.log(`workspaces: created ${workspace.id}`);

// Plans: a quota strategy (a million units a month), published, bound to a plan, and the plan published.
const strategy = await nexus.plans.createQuotaStrategy(workspace.id, {
  key: `starter-quota-${run}`,
  resetInterval: 'MONTH',
  quotaUnits: '1000000',
  inputMultiplierPpm: '1000000',
  outputMultiplierPpm: '2000000',
  cachedInputMultiplierPpm: '500000',
  maxOutputTokens: 1024,
});
await nexus.plans.publishStrategy(strategy.id);
const draft = await nexus.plans.create(workspace.id, { key: `starter-${run}`, name: 'Starter', billingInterval: 'MONTH' });
await nexus.plans.bindStrategy(draft.id, { strategyId: strategy.id, effectiveFrom: '2020-01-01T00:00:00Z' });
const plan = await nexus.plans.publish(draft.id);
console.log(`plans: ${plan.key} is ${plan.status}`);

// Workspace accesses: a user on the plan, with an inference key; suspended and activated again.
const { data: provisioned, response } = await nexus.workspaceAccesses
  .provisionWorkspaceUser(workspace.id, { externalUserId: 'user-1', email: 'ada@example.com', planId: plan.id, issueInferenceKey: true })
  .withResponse();
console.log(`workspaceAccesses: provisioned ${provisioned.access.id} (HTTP ${response.status})`);
await nexus.workspaceAccesses.suspend(provisioned.access.id);
const active = await nexus.workspaceAccesses.activate(provisioned.access.id);
const quota = await nexus.workspaceAccesses.getQuota(provisioned.access.id);
console.log(`workspaceAccesses: ${active.status}, ${quota.availableUnits} units available`);

// Gateway: the user's own view, with the user's inference key.
const asUser = new Nexus({ baseUrl, apiKey: provisioned.apiKey });
const me = await asUser.gateway.getMe();
console.log(`gateway: the key ${me.key.prefix}... is on the plan ${me.plan.key}`);

// Provider connections and billing: lists, every page iterated.
let connections = 0;
for await (const connection of nexus.providerConnections.list(workspace.id)) connections += connection.id ? 1 : 0;
let billingConnections = 0;
for await (const connection of nexus.billing.listConnections(workspace.id)) billingConnections += connection.id ? 1 : 0;
console.log(`providerConnections: ${connections}, billing: ${billingConnections} connections`);

// Usage: the audit log of what this flow did, and the invocations (none yet).
let audited = 0;
for await (const entry of nexus.usage.listAuditLogs(workspace.id, { limit: 5 })) audited += entry.id ? 1 : 0;
const invocations = await nexus.usage.listInvocations(workspace.id);
console.log(`usage: ${audited} audit entries, ${invocations.data.length} invocations`);

// Errors: each status has its class; `code` is one of the contract's codes.
try {
  await nexus.workspaces.get('01a20000-0000-7000-8000-000000000000');
} catch (err) {
  if (!(err instanceof NotFoundError)) throw err;
  console.log(`errors: ${err.constructor.name} ${err.status} ${err.code} (request ${err.requestId})`);
}
console.log('done');

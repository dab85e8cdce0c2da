/**
 * One security sweep over every operation of the contract (after Unkey's
 * runCommonRouteTests): each operationId in generated/openapi.json has a row below
 * (a new operation without one fails the sweep), and each is called three ways:
 *
 *   no key                                   401 missing_credentials
 *   a wrong key                              401 invalid_management_key / invalid_inference_key
 *   a key of workspace B, on workspace A's   404, the not-found of the resource addressed
 *
 * Every path parameter is a real resource of workspace A (made through the API below),
 * so the 404 is the workspace check, never a missing row; the sweep changes nothing of A
 * (its audit log is the same before and after).
 *
 * Operations that no resource of a workspace addresses:
 *   listWorkspaces        B's scoped key lists B's workspace only (200).
 *   getCaller             B's scoped key reads its own credential and workspaces (200).
 *   createWorkspace       root-only: B's scoped key is refused 403 root_key_required.
 *   listManagementKeys, createManagementKey, updateManagementKey, revokeManagementKey
 *                         root-only, whatever key they address: 403 root_key_required.
 *   listSessions, revokeSession   the installation's sessions, owners only: 403 root_key_required.
 *   listOwners, addOwner, removeOwner   the installation's owners, owners only: 403 root_key_required.
 *   getHealth, getReadiness   public probes: 200 without a key.
 *   receiveBillingWebhook authenticated by the provider's signature, not a key: no signature,
 *                         a wrong one, or one made with B's connection's secret: 400 invalid_signature.
 * Gateway operations (proxyProvider*) take an inference key: the "key of B" is B's inference key
 * (404 provider_connection_not_found on A's connection), and a Management Key is no inference key (401).
 * getMe (/v1/me) addresses no resource but the key's own access: B's key reads B's access, never A's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createBillingConnection,
  createRoute,
  createModelPrice,
  createBillingProductMapping,
  configureBillingWebhookSecret,
  createWebhookEndpoint,
  listAuditLogs,
  listBillingWebhookEvents,
  listInvocations,
  listPlanStrategyBindings,
  listWorkspaces,
  sendTestWebhookEvent,
} from '../../generated/client/sdk.gen.js';
import { systemActor } from '../../src/domain/actor.js';
import { loadContract } from '../../src/app.js';
import { FakeStripe } from '../billing/fake-stripe.js';
import { createTenant, type Tenant } from '../gateway/gateway-support.js';
import { SECRET_MARKER } from './secret-marker.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/** The resources of one workspace, one per path parameter of the contract. */
interface Fixtures {
  workspaceId: string;
  providerConnectionId: string;
  planId: string;
  strategyId: string;
  bindingId: string;
  accessId: string;
  keyId: string;
  connectionId: string;
  mappingId: string;
  eventId: string;
  invocationId: string;
  webhookEndpointId: string;
  messageId: string;
  routeId: string;
  priceId: string;
  managementKeyId: string;
  sessionId: string;
  memberId: string;
  invitationId: string;
  apiKey: string;
  webhookSecret: string;
}

type Param = keyof Omit<Fixtures, 'apiKey' | 'webhookSecret'>;

/** What each path parameter's resource answers when it is not the caller's to see. */
const NOT_FOUND: Record<Param, string> = {
  workspaceId: 'workspace_not_found',
  providerConnectionId: 'provider_connection_not_found',
  planId: 'plan_not_found',
  strategyId: 'strategy_not_found',
  bindingId: 'binding_not_found',
  accessId: 'access_not_found',
  keyId: 'inference_key_not_found',
  connectionId: 'billing_connection_not_found',
  mappingId: 'product_mapping_not_found',
  eventId: 'webhook_event_not_found',
  invocationId: 'invocation_not_found',
  webhookEndpointId: 'webhook_endpoint_not_found',
  messageId: 'webhook_message_not_found',
  routeId: 'gateway_route_not_found',
  priceId: 'price_not_found',
  managementKeyId: 'management_key_not_found',
  sessionId: 'session_not_found',
  memberId: 'member_not_found',
  invitationId: 'invitation_not_found',
};

const PERIOD = { periodStart: '2031-01-01T00:00:00Z', periodEnd: '2031-02-01T00:00:00Z' };

/** A valid body for each operation that takes one (so the request reaches the workspace check). */
function bodyOf(operationId: string, a: Fixtures): unknown {
  const bodies: Record<string, unknown> = {
    createWorkspace: { name: 'sweep' },
    addMember: { email: 'sweep@example.com', role: 'viewer' },
    addOwner: { email: 'sweep@example.com' },
    createInvitation: { email: 'sweep@example.com', role: 'viewer' },
    updateWorkspace: { name: 'hijacked' },
    updateRetentionPolicy: { detailDays: 30, rollupDays: 365 },
    createProviderConnection: { name: 'sweep', protocolProfile: 'openai', baseUrl: 'http://127.0.0.1:9', apiKey: testProviderKey('sweep') },
    testProviderConnection: { protocolProfile: 'openai', baseUrl: 'http://127.0.0.1:9', apiKey: testProviderKey('sweep') },
    updateProviderConnection: { name: 'hijacked' },
    createRoute: { name: 'sweep', targets: [{ providerConnectionId: '01a20000-0000-7000-8000-000000000000' }] },
    updateRoute: { name: 'hijacked' },
    rotateProviderSecret: { apiKey: testProviderKey('sweep') },
    createPlan: { key: 'sweep', name: 'Sweep', billingInterval: 'MONTH' },
    updatePlan: { name: 'hijacked' },
    setPlanRateLimits: { requestsPerMinute: 1 },
    setPlanPassthroughClasses: { passthroughClasses: ['files'] },
    setPlanRequestLog: { requestLog: { mode: 'all' } },
    createQuotaStrategy: {
      key: 'sweep',
      resetInterval: 'MONTH',
      quotaUnits: '1000',
      inputMultiplierPpm: '1000000',
      outputMultiplierPpm: '1000000',
      cachedInputMultiplierPpm: '1000000',
      maxOutputTokens: 100,
    },
    bindPlanStrategy: { strategyId: a.strategyId, effectiveFrom: PERIOD.periodStart },
    provisionWorkspaceUser: { externalUserId: 'sweep', email: 'sweep@example.com', planId: a.planId },
    renewWorkspaceAccess: { planId: a.planId, ...PERIOD },
    changeAccessPlan: { planId: a.planId },
    grantAccessUnits: { units: '1' },
    issueInferenceKey: { name: 'sweep' },
    createBillingConnection: { name: 'sweep', provider: 'STRIPE', kind: 'HOSTED', mode: 'TEST' },
    configureBillingProviderCredential: { credential: `sk_test_${SECRET_MARKER}-sweep` },
    configureBillingWebhookSecret: { webhookSecret: `whsec_${SECRET_MARKER}-sweep` },
    createBillingProductMapping: { externalProductId: 'prod_sweep', planId: a.planId },
    createCheckout: { billingConnectionId: a.connectionId, productMappingId: a.mappingId, successUrl: 'https://app.example.com/done' },
    createWebhookEndpoint: { url: 'http://127.0.0.1:9/hooks' },
    updateWebhookEndpoint: { description: 'hijacked' },
    replayFailedWebhookMessages: { since: PERIOD.periodStart },
    createModelPrice: { modelPattern: 'sweep-*', inputPerMillion: '1', outputPerMillion: '1', effectiveFrom: PERIOD.periodStart },
    importModelPrices: { prices: { 'sweep-model': { input_cost_per_token: 0.000001, output_cost_per_token: 0.000002 } } },
    setWorkspaceBudget: { period: 'DAY', hardLimitMicros: '1' },
    createManagementKey: { name: 'sweep', workspaceIds: [a.workspaceId] },
    updateManagementKey: { name: 'hijacked' },
    syncWorkspaceAccessBillingPeriod: {
      billingConnectionId: a.connectionId,
      externalPeriodId: 'sweep',
      planId: a.planId,
      ...PERIOD,
      status: 'active',
      sourceUpdatedAt: PERIOD.periodStart,
    },
  };
  return bodies[operationId];
}

interface Operation {
  operationId: string;
  method: string;
  path: string;
  security: 'managementKey' | 'inferenceKey' | 'none';
}

function operations(): Operation[] {
  const contract = loadContract() as {
    paths: Record<string, Record<string, { operationId?: string; security?: object[] }>>;
    security?: object[];
  };
  const found: Operation[] = [];
  for (const [path, item] of Object.entries(contract.paths)) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
      const op = item[method];
      if (!op?.operationId) continue;
      const security = (op.security ?? contract.security ?? []) as Record<string, unknown>[];
      const scheme = security.length === 0 ? 'none' : Object.keys(security[0]!)[0] === 'inferenceKey' ? 'inferenceKey' : 'managementKey';
      found.push({ operationId: op.operationId, method: method.toUpperCase(), path, security: scheme });
    }
  }
  return found;
}

const ALL = operations();
/** Admin operations not addressed by a resource of a workspace: what a scoped key of another workspace gets. */
const UNADDRESSED: Record<string, { status: number; code?: string }> = {
  listWorkspaces: { status: 200 },
  // The caller itself: B's key reads what B's key may do.
  getCaller: { status: 200 },
  createWorkspace: { status: 403, code: 'root_key_required' },
  listManagementKeys: { status: 403, code: 'root_key_required' },
  createManagementKey: { status: 403, code: 'root_key_required' },
  updateManagementKey: { status: 403, code: 'root_key_required' },
  revokeManagementKey: { status: 403, code: 'root_key_required' },
  // The installation's sessions: owners only.
  listSessions: { status: 403, code: 'root_key_required' },
  revokeSession: { status: 403, code: 'root_key_required' },
  // The installation's owners: owners only.
  listOwners: { status: 403, code: 'root_key_required' },
  addOwner: { status: 403, code: 'root_key_required' },
  removeOwner: { status: 403, code: 'root_key_required' },
};
const PUBLIC = new Set(['getHealth', 'getReadiness', 'receiveBillingWebhook']);

let t: TestApp;
let upstream: FakeUpstream;
let a: Fixtures;
let b: Fixtures;
let scopedToB: string;
const PROVIDER_KEY = testProviderKey('sweep-upstream');

/** A workspace with one of every resource the contract addresses, made through the API. */
async function fixtures(name: string): Promise<Fixtures> {
  const tenant: Tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: PROVIDER_KEY });
  const { workspaceId, planId } = tenant;
  const bindings = await listPlanStrategyBindings({ client: t.client, path: { planId } });
  const billing = await createBillingConnection({
    client: t.client,
    path: { workspaceId },
    body: { name: `${name} billing`, provider: 'STRIPE', kind: 'HOSTED', mode: 'TEST' },
  });
  expect(billing.response.status).toBe(201);
  const connectionId = billing.data.id;
  const webhookSecret = `whsec_${SECRET_MARKER}-${name}`;
  expect((await configureBillingWebhookSecret({ client: t.client, path: { connectionId }, body: { webhookSecret } })).response.status).toBe(
    200,
  );
  const mapping = await createBillingProductMapping({
    client: t.client,
    path: { connectionId },
    body: { externalProductId: `prod_${name}`, externalPriceId: `price_${name}`, planId, checkoutEnabled: true },
  });
  expect(mapping.response.status).toBe(201);
  const event = JSON.stringify({
    id: `evt_${name}`,
    type: 'customer.created',
    created: Math.floor(Date.now() / 1000),
    data: { object: {} },
  });
  const delivered = await fetch(`${t.url}/webhooks/billing/${connectionId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': FakeStripe.sign(event, webhookSecret) },
    body: event,
  });
  expect(delivered.status).toBe(200);
  const events = await listBillingWebhookEvents({ client: t.client, path: { connectionId } });
  const call = await fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }),
  });
  expect(call.status).toBe(200);
  await call.text();
  await t.nexus.gateway.drain();
  const invocations = await listInvocations({ client: t.client, path: { workspaceId } });
  const endpoint = await createWebhookEndpoint({ client: t.client, path: { workspaceId }, body: { url: 'http://127.0.0.1:9/hooks' } });
  expect(endpoint.response.status).toBe(201);
  const message = await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.data.id } });
  expect(message.response.status).toBe(200);
  const route = await createRoute({
    client: t.client,
    path: { workspaceId },
    body: { name: 'sweep', targets: [{ providerConnectionId: tenant.connectionId }] },
  });
  expect(route.response.status).toBe(201);
  const price = await createModelPrice({
    client: t.client,
    path: { workspaceId },
    body: { modelPattern: 'gpt-*', inputPerMillion: '2.5', outputPerMillion: '10', effectiveFrom: PERIOD.periodStart },
  });
  expect(price.response.status).toBe(201);
  const managementKey = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
    name: `${name} key`,
    workspaceIds: [workspaceId],
  });
  // A person's session (an owner signed in by a login link).
  const link = await t.nexus.services.people.signIn.createLoginLink();
  const session = await t.nexus.services.people.signIn.redeemLoginLink(link.token);
  const member = await t.client.post({
    url: '/admin/v1/workspaces/{workspaceId}/members',
    path: { workspaceId },
    body: { email: `${name}@example.com`, role: 'viewer' },
  });
  expect(member.response.status).toBe(201);
  const invitation = await t.client.post({
    url: '/admin/v1/workspaces/{workspaceId}/invitations',
    path: { workspaceId },
    body: { email: `${name}.invited@example.com`, role: 'viewer' },
  });
  expect(invitation.response.status).toBe(201);
  const fixture: Fixtures = {
    invitationId: (invitation.data as { id: string }).id,
    sessionId: session.sessionId,
    memberId: (member.data as { id: string }).id,
    priceId: price.data.id,
    managementKeyId: managementKey.id,
    routeId: route.data.id,
    workspaceId,
    providerConnectionId: tenant.connectionId,
    planId,
    strategyId: tenant.strategyId,
    bindingId: bindings.data[0]!.id,
    accessId: tenant.accessId,
    keyId: tenant.apiKeyId,
    connectionId,
    mappingId: mapping.data.id,
    eventId: events.data[0]!.id,
    invocationId: invocations.data[0]!.id,
    webhookEndpointId: endpoint.data.id,
    messageId: message.data.id,
    apiKey: tenant.apiKey,
    webhookSecret,
  };
  for (const [param, value] of Object.entries(fixture)) expect(value, param).toBeTruthy();
  return fixture;
}

/** The query an operation requires (so the request reaches the workspace check). */
const QUERIES: Record<string, string> = {
  exportInvocations: `?since=${PERIOD.periodStart}&until=${PERIOD.periodEnd}`,
  exportUsageSummary: `?since=${PERIOD.periodStart}&until=${PERIOD.periodEnd}`,
};

/** The request path with A's resources in it. */
function pathFor(op: Operation, f: Fixtures): string {
  const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    if (name === 'providerPath') return 'v1/chat/completions';
    const value = f[name as Param];
    if (!value) throw new Error(`${op.operationId}: no fixture for path parameter ${name}`);
    return value;
  });
  return path + (QUERIES[op.operationId] ?? '');
}

const firstParam = (op: Operation) => /\{(\w+)\}/.exec(op.path)?.[1] as Param | undefined;

async function call(op: Operation, token: string | undefined, headers: Record<string, string> = {}) {
  const body = bodyOf(op.operationId, a);
  const res = await t.fetch(`${t.url}${pathFor(op, a)}`, {
    method: op.method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined || op.security === 'inferenceKey' ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(body !== undefined
      ? { body: JSON.stringify(body) }
      : op.security === 'inferenceKey' && op.method !== 'GET' && op.method !== 'DELETE'
        ? { body: '{}' }
        : {}),
  });
  const text = await res.text();
  return {
    status: res.status,
    error: (text ? (JSON.parse(text) as { error?: { code?: string } }) : {}).error,
    headers: answerHeaders(res.headers),
  };
}

/** What every Admin API answer carries, a refusal too: kept by no cache, never read as another type. */
const ADMIN_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };
const answerHeaders = (headers: Headers) => ({
  'cache-control': headers.get('cache-control'),
  'x-content-type-options': headers.get('x-content-type-options'),
});

async function auditOf(workspaceId: string): Promise<string[]> {
  const res = await listAuditLogs({ client: t.client, path: { workspaceId }, query: { limit: 100 } });
  return res.data.map((e) => e.id);
}

let auditBefore: string[];

beforeAll(async () => {
  upstream = await startOpenAiUpstream({ apiKey: PROVIDER_KEY });
  t = await startTestApp();
  a = await fixtures('a');
  b = await fixtures('b');
  scopedToB = (await t.nexus.services.managementKeys.createScoped(systemActor('test'), { name: 'sweep-b', workspaceIds: [b.workspaceId] }))
    .key;
  auditBefore = await auditOf(a.workspaceId);
}, 120_000);

afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

describe('every operation of the contract is in the sweep', () => {
  it('has a fixture for every path parameter and a body for every operation that takes one', () => {
    const body = (loadContract() as any).paths as Record<string, Record<string, { requestBody?: { required?: boolean } }>>;
    for (const op of ALL) {
      if (op.security === 'managementKey') expect(() => pathFor(op, a), op.operationId).not.toThrow();
      const required = body[op.path]![op.method.toLowerCase()]!.requestBody?.required;
      if (required && op.security === 'managementKey') expect(bodyOf(op.operationId, a), op.operationId).toBeDefined();
    }
    expect(
      ALL.filter((op) => op.security === 'none')
        .map((op) => op.operationId)
        .sort(),
    ).toEqual([...PUBLIC].sort());
  });
});

describe.each(ALL.filter((op) => op.security === 'managementKey'))('$operationId ($method $path)', (op) => {
  it('no key: 401', async () => {
    expect(await call(op, undefined)).toMatchObject({ status: 401, error: { code: 'missing_credentials' }, headers: ADMIN_HEADERS });
  });

  it('a wrong key: 401', async () => {
    expect(await call(op, 'nx-mgmt-not-a-key-0123456789abcdefghijklmnop')).toMatchObject({
      status: 401,
      error: { code: 'invalid_management_key' },
      headers: ADMIN_HEADERS,
    });
  });

  it("another workspace's scoped key: 404 on workspace A's resource", async () => {
    const expected = UNADDRESSED[op.operationId];
    if (expected) {
      const res = await call(op, scopedToB);
      expect(res.status).toBe(expected.status);
      if (expected.code) expect(res.error?.code).toBe(expected.code);
      expect(res.headers).toEqual(ADMIN_HEADERS);
      return;
    }
    const param = firstParam(op);
    expect(param, `${op.operationId} is addressed by no resource: give it a row in UNADDRESSED`).toBeDefined();
    expect(await call(op, scopedToB)).toMatchObject({ status: 404, error: { code: NOT_FOUND[param!] }, headers: ADMIN_HEADERS });
  });
});

describe('the Admin API answers that hold a secret shown once', () => {
  // On workspace B, with the root key: the sweep leaves A as it found it.
  const root = () => t.config.managementKey!;
  const post = async (path: string, body?: unknown, token = root()) => {
    const res = await t.fetch(`${t.url}/admin/v1${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown>, headers: answerHeaders(res.headers) };
  };

  it('are kept by no cache: a webhook secret (create, rotate), an inference key (issue, provision), a provider key', async () => {
    const endpoint = await post(`/workspaces/${b.workspaceId}/webhook-endpoints`, { url: 'http://127.0.0.1:9/hooks' });
    expect(endpoint).toMatchObject({ status: 201, body: { secret: expect.stringMatching(/^whsec_/) }, headers: ADMIN_HEADERS });
    const rotated = await post(`/webhook-endpoints/${String(endpoint.body.id)}/rotate-secret`);
    expect(rotated).toMatchObject({ status: 200, body: { secret: expect.stringMatching(/^whsec_/) }, headers: ADMIN_HEADERS });
    const key = await post(`/workspace-accesses/${b.accessId}/api-keys`, { name: 'no-store' });
    expect(key).toMatchObject({ status: 201, body: { apiKey: expect.any(String) }, headers: ADMIN_HEADERS });
    const user = await post(`/workspaces/${b.workspaceId}/users`, {
      externalUserId: 'no-store',
      email: 'no-store@example.com',
      planId: b.planId,
      issueInferenceKey: true,
    });
    expect(user).toMatchObject({ status: 201, body: { apiKey: expect.any(String) }, headers: ADMIN_HEADERS });
    const provider = await post(`/provider-connections/${b.providerConnectionId}/rotate-secret`, { apiKey: PROVIDER_KEY });
    expect(provider).toMatchObject({ status: 200, headers: ADMIN_HEADERS });
  });

  it('and so are the refusals of the body parser and the router', async () => {
    const malformed = await t.fetch(`${t.url}/admin/v1/workspaces/${b.workspaceId}/webhook-endpoints`, {
      method: 'POST',
      headers: { authorization: `Bearer ${root()}`, 'content-type': 'application/json' },
      body: '{"url":',
    });
    expect(malformed.status).toBe(400);
    expect(answerHeaders(malformed.headers)).toEqual(ADMIN_HEADERS);
    // Not in the contract: asked without its check.
    const unknown = await fetch(`${t.url}/admin/v1/nothing-here`, { headers: { authorization: `Bearer ${root()}` } });
    expect(unknown.status).toBe(404);
    expect(answerHeaders(unknown.headers)).toEqual(ADMIN_HEADERS);
  });
});

describe.each(ALL.filter((op) => op.security === 'inferenceKey'))('$operationId ($method $path)', (op) => {
  it('no key: 401', async () => {
    expect(await call(op, undefined)).toMatchObject({ status: 401, error: { code: 'missing_credentials' } });
  });

  it('a wrong key, or a Management Key: 401', async () => {
    expect(await call(op, 'nx-test-not-a-key-0123456789abcdefghijklmnopqrstu')).toMatchObject({
      status: 401,
      error: { code: 'invalid_inference_key' },
    });
    expect(await call(op, scopedToB)).toMatchObject({ status: 401, error: { code: 'invalid_inference_key' } });
  });

  it("another workspace's inference key: 404 on workspace A's connection (getMe: its own access)", async () => {
    if (op.operationId === 'getMe') {
      const res = await fetch(`${t.url}${pathFor(op, a)}`, { headers: { authorization: `Bearer ${b.apiKey}` } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { workspaceId: string }).workspaceId).toBe(b.workspaceId);
      return;
    }
    expect(await call(op, b.apiKey)).toMatchObject({ status: 404, error: { code: 'provider_connection_not_found' } });
  });
});

describe('operations that take no key', () => {
  it('getHealth and getReadiness answer without one', async () => {
    for (const op of ALL.filter((o) => o.operationId === 'getHealth' || o.operationId === 'getReadiness')) {
      expect((await call(op, undefined)).status).toBe(200);
    }
  });

  it("receiveBillingWebhook takes the provider's signature: none, a wrong one, or B's connection's: 400", async () => {
    const op = ALL.find((o) => o.operationId === 'receiveBillingWebhook')!;
    const event = JSON.stringify({
      id: 'evt_sweep_forged',
      type: 'customer.created',
      created: Math.floor(Date.now() / 1000),
      data: { object: {} },
    });
    const deliver = async (signature: string | undefined) => {
      const res = await fetch(`${t.url}${pathFor(op, a)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(signature ? { 'stripe-signature': signature } : {}) },
        body: event,
      });
      return { status: res.status, error: ((await res.json()) as { error?: { code?: string } }).error };
    };
    const refused = { status: 400, error: { code: 'invalid_signature' } };
    expect(await deliver(undefined)).toMatchObject(refused);
    expect(await deliver(FakeStripe.sign(event, `whsec_${SECRET_MARKER}-wrong`))).toMatchObject(refused);
    expect(await deliver(FakeStripe.sign(event, b.webhookSecret))).toMatchObject(refused);
  });
});

describe('what the sweep leaves behind', () => {
  it("changes nothing of workspace A: its audit log is as it was; B's key lists B's workspace only", async () => {
    expect(await auditOf(a.workspaceId)).toEqual(auditBefore);
    const listed = await listWorkspaces({ client: t.clientWith(scopedToB), query: { limit: 100 } });
    expect(listed.data.map((w) => w.id)).toEqual([b.workspaceId]);
  });
});

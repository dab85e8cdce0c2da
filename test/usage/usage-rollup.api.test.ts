/**
 * The usage rollup is exact whoever writes the calls (src/domain/recording/rollup-sql.ts): after calls of each
 * kind (answered, failed, an upstream error, refused, charged by the sweeper's reclaim of a dead process's lease,
 * written again and for the first time by a spool's replay), getUsageSummary's sums, by every grouping, are the sums
 * over usage_events and invocations.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordElement } from '../../src/db/row-record.js';
import { INVOCATION_COLUMNS } from '../../src/domain/recording/record-sql.js';
import { createCallRepo } from '../../src/records/call-repo.js';
import { newId } from '../../src/ids.js';
import { changeAccessPlan, createModelPrice, getUsageSummary, listInvocations } from '../support/sdk.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { activePlan } from '../support/tenant.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { createTenant, gatewayFetch, reclaimLease, until, type Tenant } from '../gateway/gateway-support.js';

let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;
const KEY = `${SECRET_MARKER}-rollup-openai-0123456789`;

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_QUOTA_LEASE_IDLE_MS: '100', NEXUS_LEASE_TTL_MS: '1000' } });
  up = await startOpenAiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, users: 2, quotaUnits: 10_000_000n, allowedModels: ['gpt-*'] });
  const price = await createModelPrice({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: {
      modelPattern: 'gpt-4o*',
      inputPerMillion: '2.50',
      outputPerMillion: '10',
      effectiveFrom: new Date(Date.now() - 3_600_000).toISOString(),
    },
  });
  expect(price.response.status).toBe(201);
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

function call(apiKey: string, model: string, headers: Record<string, string> = {}, stream = false) {
  return gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0', ...headers },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'rollup' }], max_tokens: 10, ...(stream ? { stream: true } : {}) }),
  });
}

type Groupings = 'model' | 'access' | 'connection' | 'key' | 'plan';
interface Sums {
  units: string;
  inputTokens: string;
  cachedInputTokens: string;
  outputTokens: string;
  events: number;
  costMicros: string;
  unpricedEvents: number;
  calls: number;
  failedCalls: number;
  refusedCalls: number;
}

/** The summary's sums per series over the last day, its buckets added up. */
async function summarized(groupBy: Groupings, granularity: 'hour' | 'day'): Promise<Record<string, Sums>> {
  const res = await getUsageSummary({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { groupBy, granularity } });
  expect(res.response.status).toBe(200);
  const out: Record<string, Sums> = {};
  for (const b of res.data!.buckets) {
    const s = (out[b.key] ??= {
      units: '0',
      inputTokens: '0',
      cachedInputTokens: '0',
      outputTokens: '0',
      events: 0,
      costMicros: '0',
      unpricedEvents: 0,
      calls: 0,
      failedCalls: 0,
      refusedCalls: 0,
    });
    for (const f of ['units', 'inputTokens', 'cachedInputTokens', 'outputTokens', 'costMicros'] as const)
      s[f] = String(BigInt(s[f]) + BigInt(b[f]));
    for (const f of ['events', 'unpricedEvents', 'calls', 'failedCalls', 'refusedCalls'] as const) s[f] += b[f];
  }
  return out;
}

/** The series of a grouping, as SQL over an invocation `c` and a usage event `e`. */
const CALL_KEY: Record<Groupings, string> = {
  model: `case when e.id is null then coalesce(nullif(c.attempt_upstream_model, ''), c.requested_model) else coalesce(e.model, '') end`,
  access: 'c.workspace_access_id::text',
  connection: 'c.provider_connection_id::text',
  key: 'c.inference_key_id::text',
  plan: `coalesce(c.plan_id::text, '')`,
};
const EVENT_KEY: Record<Groupings, string> = { ...CALL_KEY, model: `coalesce(e.model, '')`, access: 'e.workspace_access_id::text' };

/** The same sums, straight from usage_events and invocations. */
async function counted(groupBy: Groupings): Promise<Record<string, Sums>> {
  const db = t.database.db;
  const events = await db.raw(
    `select ${EVENT_KEY[groupBy]} as key, sum(e.units)::text as units, sum(e.input_tokens)::text as input,
            sum(e.cached_input_tokens)::text as cached, sum(e.output_tokens)::text as output, count(*)::int as events,
            coalesce(sum(e.cost_micros), 0)::text as cost, (count(*) filter (where e.kind = 'USAGE' and e.price_id is null))::int as unpriced
       from usage_events e left join invocations c on c.id = e.invocation_id
      where e.workspace_id = ? group by 1`,
    [tenant.workspaceId],
  );
  const calls = await db.raw(
    `select ${CALL_KEY[groupBy]} as key, count(*)::int as calls,
            (count(*) filter (where c.status in ('FAILED', 'UPSTREAM_ERROR')))::int as failed,
            (count(*) filter (where c.status = 'REJECTED'))::int as refused
       from invocations c left join usage_events e on e.invocation_id = c.id and e.kind = 'USAGE'
      where c.workspace_id = ? group by 1`,
    [tenant.workspaceId],
  );
  const out: Record<string, Sums> = {};
  const empty = (): Sums => ({
    units: '0',
    inputTokens: '0',
    cachedInputTokens: '0',
    outputTokens: '0',
    events: 0,
    costMicros: '0',
    unpricedEvents: 0,
    calls: 0,
    failedCalls: 0,
    refusedCalls: 0,
  });
  for (const r of events.rows as {
    key: string;
    units: string;
    input: string;
    cached: string;
    output: string;
    events: number;
    cost: string;
    unpriced: number;
  }[]) {
    out[r.key] = {
      ...empty(),
      units: r.units,
      inputTokens: r.input,
      cachedInputTokens: r.cached,
      outputTokens: r.output,
      events: r.events,
      costMicros: r.cost,
      unpricedEvents: r.unpriced,
    };
  }
  for (const r of calls.rows as { key: string; calls: number; failed: number; refused: number }[]) {
    out[r.key] = { ...(out[r.key] ?? empty()), calls: r.calls, failedCalls: r.failed, refusedCalls: r.refused };
  }
  return out;
}

async function expectExact() {
  for (const groupBy of ['model', 'access', 'connection', 'key', 'plan'] as const) {
    const expected = await counted(groupBy);
    expect(await summarized(groupBy, 'hour'), groupBy).toEqual(expected);
    expect(await summarized(groupBy, 'day'), groupBy).toEqual(expected);
  }
}

describe('the usage rollup', () => {
  it('counts answered, failed, upstream-error and refused calls by model, access, connection, key and plan', async () => {
    const [first, second] = tenant.users;
    for (let i = 0; i < 3; i++) expect((await call(first!.apiKey, 'gpt-4o')).status).toBe(200);
    expect((await call(second!.apiKey, 'gpt-4o-mini', { 'x-fake-usage': '7,3,2' })).status).toBe(200);
    expect((await call(second!.apiKey, 'gpt-unpriced')).status).toBe(200);
    expect((await call(first!.apiKey, 'gpt-4o', { 'x-fake-fault': 'status-500' })).status).toBe(500);
    expect((await call(first!.apiKey, 'gpt-4o', { 'x-fake-fault': 'reset' })).status).toBe(502);
    // Not on the allow-list: refused before the provider is called, recorded REJECTED.
    expect((await call(second!.apiKey, 'claude-3')).status).toBe(403);
    await t.nexus.gateway.drain();

    const byKey = await summarized('key', 'day');
    expect(byKey[first!.apiKeyId]).toMatchObject({ calls: 5, failedCalls: 2, refusedCalls: 0, events: 3 });
    expect(byKey[second!.apiKeyId]).toMatchObject({ calls: 3, failedCalls: 0, refusedCalls: 1, events: 2, unpricedEvents: 1 });
    const byPlan = await summarized('plan', 'hour');
    expect(Object.keys(byPlan)).toEqual([tenant.planId]);
    expect(byPlan[tenant.planId]).toMatchObject({ calls: 8, failedCalls: 2, refusedCalls: 1 });
    // 10 input and 5 output tokens at 2.50 and 10 per million: 25 + 50 micro-dollars a gpt-4o call. A call charged
    // under the model the provider said answered; one that got no answer, under the one requested.
    const byModel = await summarized('model', 'day');
    expect(byModel['gpt-4o-2026-01-01']).toMatchObject({ costMicros: '225', calls: 3, failedCalls: 0, events: 3 });
    expect(byModel['gpt-4o']).toMatchObject({ costMicros: '0', calls: 2, failedCalls: 2, events: 0 });
    expect(byModel['claude-3']).toMatchObject({ calls: 1, refusedCalls: 1, events: 0 });
    await expectExact();
  });

  it("stays exact when the sweeper charges a dead process's call, and when a spool is replayed", async () => {
    const [first] = tenant.users;
    // As if its process had died mid-stream: the lease is reclaimed and the call charged from its last heartbeat.
    const slow = await call(first!.apiKey, 'gpt-4o', { 'x-fake-fault': 'slow', 'x-fake-delay-ms': '250' }, true);
    expect(slow.status).toBe(200);
    await until(
      async () => (await t.database.db('quota_leases').where({ workspace_access_id: first!.accessId, status: 'HELD' })).length >= 1,
      10_000,
    );
    await reclaimLease(t, first!.accessId);
    await slow.text();
    await t.nexus.gateway.drain();
    await expectExact();

    // A spool's replay writes the records through the same statement: one already written is not counted again, a
    // new one is.
    const repo = createCallRepo(t.database.db, false);
    const [written] = (
      await t.database.db.raw(`select row_to_json(i)::text as json, id from invocations i where workspace_id = ? limit 1`, [
        tenant.workspaceId,
      ])
    ).rows as { json: string; id: string }[];
    const before = await summarized('access', 'day');
    const row = JSON.parse(written!.json) as Record<string, unknown>;
    await repo.record([{ id: written!.id, invocation: recordElement(INVOCATION_COLUMNS, row), leaseCall: null }]);
    expect(await summarized('access', 'day')).toEqual(before);
    const id = newId();
    const spooled = {
      ...row,
      id,
      request_id: `replayed-${id}`,
      status: 'REJECTED',
      attempts: null,
    };
    await repo.record([{ id, invocation: recordElement(INVOCATION_COLUMNS, spooled), leaseCall: null }]);
    await expectExact();
  }, 30_000);

  it('counts a call under the plan its access was on when it was made: a change of plan moves the next calls only', async () => {
    const [, second] = tenant.users;
    const before = await summarized('plan', 'day');
    const { plan } = await activePlan(t.client, tenant.workspaceId, {
      key: 'rollup-next',
      quotaUnits: '10000000',
      allowedModels: ['gpt-*'],
    });
    const changed = await changeAccessPlan({ client: t.client, path: { accessId: second!.accessId }, body: { planId: plan.id } });
    expect(changed.response.status).toBe(200);
    // The gateway learns of the change from the change feed: call until a call is recorded on the new plan.
    await until(async () => {
      expect((await call(second!.apiKey, 'gpt-4o')).status).toBe(200);
      await t.nexus.gateway.drain();
      return (await summarized('plan', 'day'))[plan.id] !== undefined;
    });
    const after = await summarized('plan', 'day');
    // The invocation names the plan it was made on.
    const latest = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 1 } });
    expect(latest.data![0]!.planId).toBe(plan.id);
    // The calls made before the change stay under the plan they were made on.
    expect(after[tenant.planId]!.calls).toBeGreaterThanOrEqual(before[tenant.planId]!.calls);
    expect(after[plan.id]!.calls).toBeGreaterThanOrEqual(1);
    expect(after[tenant.planId]!.calls + after[plan.id]!.calls).toBe(
      Number((await t.database.db('invocations').where({ workspace_id: tenant.workspaceId }).count<{ n: string }[]>('* as n'))[0]!.n),
    );
    await expectExact();
  });
});

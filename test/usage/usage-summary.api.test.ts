import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { rebuildWorkspaceRollupsSql } from '../../src/domain/recording/rollup-sql.js';
import { systemActor } from '../../src/domain/actor.js';
import { createWorkspace, getUsageSummary, listUsageEvents, provisionWorkspaceUser } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, type Tenant } from '../gateway/gateway-support.js';

let t: TestApp;
let upstream: FakeUpstream;
let tenant: Tenant;
let secondAccessId: string;

/** Usage events written as the gateway writes them, at chosen times (the gateway stamps its own clock's). */
async function seedEvent(
  at: string,
  fields: { accessId: string; model: string | null; units: number; input: number; output: number; invocationId?: string },
) {
  await t.database.db('usage_events').insert({
    id: newId(),
    workspace_id: tenant.workspaceId,
    workspace_access_id: fields.accessId,
    quota_period_id: newId(),
    invocation_id: fields.invocationId ?? null,
    kind: 'USAGE',
    units: fields.units,
    input_tokens: fields.input,
    cached_input_tokens: 0,
    output_tokens: fields.output,
    model: fields.model,
    created_at: new Date(at),
  });
}

/** The rollup of the events written by hand (the gateway adds its calls' in the statement that writes them). */
async function rollUp() {
  for (const table of ['usage_rollups', 'usage_key_rollups', 'usage_day_rollups'])
    await t.database.db(table).where({ workspace_id: tenant.workspaceId }).delete();
  await t.database.db.raw(rebuildWorkspaceRollupsSql(':workspaceId'), { workspaceId: tenant.workspaceId });
}

beforeAll(async () => {
  t = await startTestApp();
  const key = testProviderKey('summary');
  upstream = await startOpenAiUpstream({ apiKey: key });
  tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: key });
  const second = await provisionWorkspaceUser({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: { externalUserId: 'second', email: 'second@example.com', planId: tenant.planId },
  });
  expect(second.response.status).toBe(201);
  secondAccessId = second.data!.access.id;
  await seedEvent('2026-03-01T10:05:00Z', { accessId: tenant.accessId, model: 'gpt-a', units: 10, input: 4, output: 3 });
  await seedEvent('2026-03-01T10:55:00Z', { accessId: secondAccessId, model: 'gpt-a', units: 5, input: 2, output: 1 });
  await seedEvent('2026-03-01T10:30:00Z', { accessId: tenant.accessId, model: 'gpt-b', units: 2, input: 1, output: 1 });
  await seedEvent('2026-03-01T11:00:00Z', { accessId: tenant.accessId, model: 'gpt-b', units: 7, input: 1, output: 3 });
  await seedEvent('2026-03-02T09:00:00Z', { accessId: tenant.accessId, model: null, units: 1, input: 1, output: 0 });
  // Outside every range asked below.
  await seedEvent('2026-02-28T23:59:59.999Z', { accessId: tenant.accessId, model: 'gpt-a', units: 1000, input: 1, output: 1 });
  await rollUp();
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const RANGE = { since: '2026-03-01T00:00:00Z', until: '2026-03-03T00:00:00Z' };

describe('getUsageSummary', () => {
  it('sums units and tokens per UTC hour and model, oldest first, buckets without events absent', async () => {
    const res = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { ...RANGE, granularity: 'hour', groupBy: 'model' },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({
      workspaceId: tenant.workspaceId,
      since: '2026-03-01T00:00:00.000Z',
      until: '2026-03-03T00:00:00.000Z',
      granularity: 'hour',
      groupBy: 'model',
    });
    expect(res.data!.buckets).toEqual([
      {
        start: '2026-03-01T10:00:00.000Z',
        key: 'gpt-a',
        units: '15',
        inputTokens: '6',
        cachedInputTokens: '0',
        outputTokens: '4',
        events: 2,
        costMicros: '0',
        unpricedEvents: 2,
        calls: 0,
        failedCalls: 0,
        refusedCalls: 0,
      },
      {
        start: '2026-03-01T10:00:00.000Z',
        key: 'gpt-b',
        units: '2',
        inputTokens: '1',
        cachedInputTokens: '0',
        outputTokens: '1',
        events: 1,
        costMicros: '0',
        unpricedEvents: 1,
        calls: 0,
        failedCalls: 0,
        refusedCalls: 0,
      },
      {
        start: '2026-03-01T11:00:00.000Z',
        key: 'gpt-b',
        units: '7',
        inputTokens: '1',
        cachedInputTokens: '0',
        outputTokens: '3',
        events: 1,
        costMicros: '0',
        unpricedEvents: 1,
        calls: 0,
        failedCalls: 0,
        refusedCalls: 0,
      },
      {
        start: '2026-03-02T09:00:00.000Z',
        key: '',
        units: '1',
        inputTokens: '1',
        cachedInputTokens: '0',
        outputTokens: '0',
        events: 1,
        costMicros: '0',
        unpricedEvents: 1,
        calls: 0,
        failedCalls: 0,
        refusedCalls: 0,
      },
    ]);
  });

  it('by day and access', async () => {
    const res = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { ...RANGE, granularity: 'day', groupBy: 'access' },
    });
    expect(res.response.status).toBe(200);
    const rows = res.data!.buckets.map((b) => [b.start, b.key, b.units, b.events]);
    expect(rows).toEqual(
      [
        ['2026-03-01T00:00:00.000Z', tenant.accessId, '19', 3],
        ['2026-03-01T00:00:00.000Z', secondAccessId, '5', 1],
        ['2026-03-02T00:00:00.000Z', tenant.accessId, '1', 1],
      ].sort((a, b) => `${a[0]}${a[1]}`.localeCompare(`${b[0]}${b[1]}`)),
    );
  });

  it('by hour and access: the models of an access in the same hour are one bucket', async () => {
    const res = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { ...RANGE, granularity: 'hour', groupBy: 'access' },
    });
    expect(res.response.status).toBe(200);
    const rows = res.data!.buckets.map((b) => [b.start, b.key, b.units, b.inputTokens, b.outputTokens, b.events]);
    expect(rows).toEqual(
      [
        ['2026-03-01T10:00:00.000Z', tenant.accessId, '12', '5', '4', 2],
        ['2026-03-01T10:00:00.000Z', secondAccessId, '5', '2', '1', 1],
        ['2026-03-01T11:00:00.000Z', tenant.accessId, '7', '1', '3', 1],
        ['2026-03-02T09:00:00.000Z', tenant.accessId, '1', '1', '0', 1],
      ].sort((a, b) => `${a[0]}${a[1]}`.localeCompare(`${b[0]}${b[1]}`)),
    );
  });

  it('by hour and key: events without their call (no key) are one bucket an hour, whatever their access', async () => {
    const res = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { ...RANGE, granularity: 'hour', groupBy: 'key' },
    });
    expect(res.response.status).toBe(200);
    const rows = res.data!.buckets.map((b) => [b.start, b.key, b.units, b.inputTokens, b.outputTokens, b.events, b.unpricedEvents]);
    expect(rows).toEqual([
      ['2026-03-01T10:00:00.000Z', '', '17', '7', '5', 3, 3],
      ['2026-03-01T11:00:00.000Z', '', '7', '1', '3', 1, 1],
      ['2026-03-02T09:00:00.000Z', '', '1', '1', '0', 1, 1],
    ]);
  });

  it('by hour over a month, summed a slice at a time: every bucket once, oldest first, then by key', async () => {
    // Two keys whose order is not their accesses' (the rollup is read by access, then key), each with a call on
    // either side of the month's slices' edges (every 240 hours: the 11th and the 21st at midnight).
    const [first, second] = [tenant.accessId, secondAccessId].sort();
    const keys = [
      { accessId: first!, keyId: 'f0000000-0000-4000-8000-000000000000', units: 3 },
      { accessId: second!, keyId: '10000000-0000-4000-8000-000000000000', units: 4 },
    ];
    const hours = ['2026-04-01T00', '2026-04-10T23', '2026-04-11T00', '2026-04-20T23', '2026-04-21T00', '2026-04-30T23'];
    for (const hour of hours) {
      for (const key of keys) {
        const invocationId = newId();
        await t.database.db('invocations').insert({
          id: invocationId,
          workspace_id: tenant.workspaceId,
          workspace_access_id: key.accessId,
          provider_connection_id: tenant.connectionId,
          inference_key_id: key.keyId,
          request_id: `req_${invocationId}`,
          method: 'POST',
          endpoint: '/v1/chat/completions',
          requested_model: 'gpt-a',
          status: 'SUCCEEDED',
          metering_status: 'metered',
          quota_units: key.units,
          started_at: new Date(`${hour}:30:00Z`),
          completed_at: new Date(`${hour}:30:00Z`),
        });
        await seedEvent(`${hour}:30:00Z`, { accessId: key.accessId, model: 'gpt-a', units: key.units, input: 1, output: 1, invocationId });
      }
    }
    await rollUp();
    const month = { since: '2026-04-01T00:00:00Z', until: '2026-05-01T00:00:00Z', granularity: 'hour' as const };
    const byKey = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { ...month, groupBy: 'key' },
    });
    expect(byKey.response.status).toBe(200);
    expect(byKey.data!.buckets.map((b) => [b.start, b.key, b.units, b.calls])).toEqual(
      hours.flatMap((hour) => [keys[1]!, keys[0]!].map((k) => [`${hour}:00:00.000Z`, k.keyId, String(k.units), 1])),
    );
    const byAccess = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { ...month, groupBy: 'access' },
    });
    expect(byAccess.data!.buckets.map((b) => [b.start, b.key, b.units])).toEqual(
      hours.flatMap((hour) => keys.map((k) => [`${hour}:00:00.000Z`, k.accessId, String(k.units)])),
    );
    const byModel = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { ...month, groupBy: 'model' },
    });
    expect(byModel.data!.buckets.map((b) => [b.start, b.key, b.units, b.calls])).toEqual(
      hours.map((hour) => [`${hour}:00:00.000Z`, 'gpt-a', '7', 2]),
    );
  });

  it('by connection: the gateway calls just made, in the default range (the last 24 hours by hour)', async () => {
    const openai = new OpenAI({ baseURL: tenant.gatewayBaseUrl + '/v1', apiKey: tenant.apiKey, fetch: gatewayFetch(), maxRetries: 0 });
    for (let i = 0; i < 3; i++) await openai.chat.completions.create({ model: 'gpt-live', messages: [{ role: 'user', content: 'hi' }] });
    await t.nexus.gateway.drain();
    const res = await getUsageSummary({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { groupBy: 'connection' } });
    expect(res.response.status).toBe(200);
    const { buckets } = res.data!;
    expect(buckets.map((b) => b.key)).toEqual(buckets.map(() => tenant.connectionId));
    expect(buckets.reduce((n, b) => n + b.events, 0)).toBe(3);
    expect(buckets.reduce((n, b) => n + b.calls, 0)).toBe(3);
    // The fake upstream reports 10 input and 5 output tokens a call; the strategy charges 1 and 2 units a token.
    expect(buckets.reduce((n, b) => n + BigInt(b.inputTokens), 0n)).toBe(30n);
    expect(buckets.reduce((n, b) => n + BigInt(b.units), 0n)).toBe(60n);
    // The last 24 hours in whole hours: since down to its hour, until (now) up to the end of its hour.
    const range = Date.parse(res.data!.until) - Date.parse(res.data!.since);
    expect(range === 24 * 3_600_000 || range === 25 * 3_600_000).toBe(true);
    expect(Date.parse(res.data!.until) % 3_600_000).toBe(0);
    // By model: the usage events' model (the one the provider said answered, else the one requested).
    const events = await listUsageEvents({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 3 } });
    const models = new Set(events.data!.map((e) => e.model));
    expect(models.size).toBe(1);
    const byModel = await getUsageSummary({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { groupBy: 'model' } });
    expect(byModel.data!.buckets.map((b) => b.key)).toEqual(byModel.data!.buckets.map(() => [...models][0]));
  });

  it('rounds the range out to whole hours', async () => {
    await t.database.db.raw(
      `with u as (insert into usage_events (id, workspace_id, workspace_access_id, quota_period_id, kind, units, model, created_at)
                  values (?, ?, ?, ?, 'USAGE', 3, 'gpt-c', '2026-03-05T08:10:00Z') returning id),
            a as (insert into usage_events (id, workspace_id, workspace_access_id, quota_period_id, kind, units, model, reason, created_at)
                  values (?, ?, ?, ?, 'ADJUSTMENT', 2, 'gpt-c', 'consumed_beyond_reservation', '2026-03-05T08:20:00Z') returning id)
       select (select count(*) from u) + (select count(*) from a) as n`,
      [newId(), tenant.workspaceId, tenant.accessId, newId(), newId(), tenant.workspaceId, tenant.accessId, newId()],
    );
    await rollUp();
    const res = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { since: '2026-03-05T08:30:00Z', until: '2026-03-05T08:31:00+00:00', groupBy: 'model' },
    });
    expect(res.data).toMatchObject({ since: '2026-03-05T08:00:00.000Z', until: '2026-03-05T09:00:00.000Z' });
    expect(res.data!.buckets).toEqual([
      {
        start: '2026-03-05T08:00:00.000Z',
        key: 'gpt-c',
        units: '5',
        inputTokens: '0',
        cachedInputTokens: '0',
        outputTokens: '0',
        events: 2,
        // The ADJUSTMENT carries units only: one call, unpriced.
        costMicros: '0',
        unpricedEvents: 1,
        calls: 0,
        failedCalls: 0,
        refusedCalls: 0,
      },
    ]);
  });

  it('refuses bad input with a 400 that names the field', async () => {
    const get = async (query: string) => {
      const res = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary?${query}`, {
        headers: { authorization: `Bearer ${TEST_ROOT_KEY}` },
      });
      return { status: res.status, error: ((await res.json()) as { error: { message: string; param: string; code: string } }).error };
    };
    expect(await get('granularity=minute')).toMatchObject({ status: 400, error: { param: 'granularity', code: 'invalid_parameter' } });
    expect(await get('groupBy=user')).toMatchObject({ status: 400, error: { param: 'groupBy' } });
    expect(await get('since=yesterday')).toMatchObject({ status: 400, error: { param: 'since' } });
    expect(await get(`since=${RANGE.until}&until=${RANGE.since}`)).toMatchObject({
      status: 400,
      error: { message: 'since must be before until', param: 'since' },
    });
    const tooWide = await get('since=2026-01-01T00:00:00Z&until=2026-03-01T00:00:00Z&granularity=hour');
    expect(tooWide).toMatchObject({ status: 400, error: { param: 'since' } });
    expect(tooWide.error.message).toContain('1416 hours');
    expect(await get('since=2026-01-01T00:00:00Z&until=2026-03-01T00:00:00Z&granularity=day')).toMatchObject({ status: 200 });
  });

  it('a scoped key sees only its workspaces: another workspace answers 404', async () => {
    const other = await createWorkspace({ client: t.client, body: { name: 'other' } });
    const { key } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
      name: 'scoped-usage',
      workspaceIds: [tenant.workspaceId],
    });
    const scoped = t.clientWith(key);
    const mine = await getUsageSummary({ client: scoped, path: { workspaceId: tenant.workspaceId }, query: RANGE });
    expect(mine.response.status).toBe(200);
    const theirs = await getUsageSummary({ client: scoped, path: { workspaceId: other.data!.id }, query: RANGE });
    expect(theirs.response.status).toBe(404);
  });
});

/**
 * A workspace's retention policy (docs/operations.md, "Retention"), set through the Admin API and applied by the
 * history job's round (services.history.applyRetention, run here at chosen times):
 * - detail older than the policy is gone (list invocations answers none), the totals remain (the usage summary reads
 *   the rollups), and the usage events of a period not yet ended stay until it ends;
 * - with a billing connection, a period's events stay past its end until a reconciliation has succeeded since;
 * - a month past every workspace's policy leaves whole (its partition dropped), usage events' only once settled and
 *   reconciled; the audit log's months stay;
 * - the policy is read and set through HTTP, refused when it makes no sense, and its change is audited;
 * - rollups past the rollup policy leave: the hourly ones by hour, the day rollups once their whole day is past it.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import {
  getRetentionPolicy,
  getUsageSummary,
  listAuditLogs,
  listInvocations,
  listUsageEvents,
  updateRetentionPolicy,
} from '../support/sdk.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { createTenant, gatewayFetch, type Tenant } from '../gateway/gateway-support.js';

let t: TestApp;
let up: FakeUpstream;
/** `plain` has no billing connection; `billed` has one. */
let plain: Tenant;
let billed: Tenant;
const KEY = `${SECRET_MARKER}-retention-openai-0123456789`;
const DAY = 86_400_000;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
  plain = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n, allowedModels: ['gpt-*'] });
  billed = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n, allowedModels: ['gpt-*'] });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

async function call(tenant: Tenant): Promise<void> {
  const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0' },
    body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'keep me' }], max_tokens: 10 }),
  });
  expect(res.status).toBe(200);
  await res.text();
}

const RANGE = () => ({ since: new Date(Date.now() - DAY).toISOString(), until: new Date(Date.now() + DAY).toISOString() });

async function invocationsOf(tenant: Tenant): Promise<number> {
  const res = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId } });
  expect(res.response.status).toBe(200);
  return res.data!.length;
}

async function eventsOf(tenant: Tenant): Promise<number> {
  const res = await listUsageEvents({ client: t.client, path: { workspaceId: tenant.workspaceId } });
  expect(res.response.status).toBe(200);
  return res.data!.length;
}

async function totalOf(tenant: Tenant): Promise<{ units: string; events: number }> {
  const res = await getUsageSummary({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    query: { ...RANGE(), granularity: 'day' },
  });
  expect(res.response.status).toBe(200);
  const b = res.data!.buckets;
  return { units: String(b.reduce((s, x) => s + BigInt(x.units), 0n)), events: b.reduce((s, x) => s + x.events, 0) };
}

async function periodEndOf(tenant: Tenant): Promise<Date> {
  const row = await t.database.db('quota_periods').where({ workspace_access_id: tenant.accessId }).orderBy('period_end', 'desc').first();
  return row.period_end as Date;
}

const partitionExists = async (name: string) =>
  (await t.database.db.raw<{ rows: { r: string | null }[] }>('select to_regclass(?) as r', [name])).rows[0]!.r !== null;

it('reads the default policy, refuses one that makes no sense and audits a change', async () => {
  const got = await getRetentionPolicy({ client: t.client, path: { workspaceId: plain.workspaceId } });
  expect(got.response.status).toBe(200);
  expect(got.data).toEqual({ workspaceId: plain.workspaceId, detailDays: 90, rollupDays: 730 });

  for (const body of [{ detailDays: 0 }, { detailDays: 800 }, { rollupDays: 3651 }, {}]) {
    const bad = await updateRetentionPolicy({ client: t.client, path: { workspaceId: plain.workspaceId }, body });
    expect(bad.response.status, JSON.stringify(body)).toBe(400);
  }
  const missing = await getRetentionPolicy({ client: t.client, path: { workspaceId: newId() } });
  expect(missing.response.status).toBe(404);
  expect((await getRetentionPolicy({ client: t.client, path: { workspaceId: plain.workspaceId } })).data!.detailDays).toBe(90);

  for (const tenant of [plain, billed]) {
    const set = await updateRetentionPolicy({ client: t.client, path: { workspaceId: tenant.workspaceId }, body: { detailDays: 1 } });
    expect(set.response.status).toBe(200);
    expect(set.data).toEqual({ workspaceId: tenant.workspaceId, detailDays: 1, rollupDays: 730 });
  }
  const audit = await listAuditLogs({
    client: t.client,
    path: { workspaceId: plain.workspaceId },
    query: { action: 'workspace.retention_updated' },
  });
  expect(audit.data).toHaveLength(1);
  expect(audit.data![0]!.changes).toEqual({ before: { detailDays: 90, rollupDays: 730 }, after: { detailDays: 1, rollupDays: 730 } });
});

it('removes detail past the policy, keeps the totals, and keeps an unsettled period’s usage events', async () => {
  for (const tenant of [plain, plain, billed]) await call(tenant);
  await t.nexus.gateway.drain();
  const totals = await totalOf(plain);
  expect(totals.events).toBe(2);
  expect(await invocationsOf(plain)).toBe(2);

  // The billed workspace's billing connection (seeded: connecting one calls a provider).
  const db = t.database.db;
  const connectionId = newId();
  const now = new Date();
  await db('billing_connections').insert({
    id: connectionId,
    workspace_id: billed.workspaceId,
    name: 'stripe',
    provider: 'STRIPE',
    kind: 'HOSTED',
    mode: 'TEST',
    status: 'ACTIVE',
    created_at: now,
    updated_at: now,
  });

  // Two days on: past the 1-day policy, inside both periods.
  const history = t.nexus.services.history;
  const round = await history.applyRetention(new Date(Date.now() + 2 * DAY));
  expect(round.removed).toBeGreaterThanOrEqual(3);
  expect(await invocationsOf(plain)).toBe(0);
  expect(await invocationsOf(billed)).toBe(0);
  expect(await eventsOf(plain)).toBe(2);
  expect(await eventsOf(billed)).toBe(1);
  expect(await totalOf(plain)).toEqual(totals);

  // Past the periods' end, and past this month's end by more than every policy: the month of invocations and webhook
  // attempts leaves whole; the month of usage events stays while the billed workspace's period is not reconciled, so
  // the plain workspace's events leave in a batch, the billed one's stay.
  const month = new Date();
  const name = (table: string) => `${table}_p${month.toISOString().slice(0, 7).replace('-', '')}`;
  expect(await partitionExists(name('invocations'))).toBe(true);
  const monthEnd = Date.UTC(month.getUTCFullYear(), month.getUTCMonth() + 1, 1);
  const afterEnd = new Date(Math.max((await periodEndOf(plain)).getTime(), (await periodEndOf(billed)).getTime(), monthEnd) + 2 * DAY);
  const later = await history.applyRetention(afterEnd);
  expect(later.dropped).toEqual([name('invocations'), name('webhook_attempts')]);
  expect(later.keptForBilling).toEqual([name('usage_events')]);
  expect(await partitionExists(name('invocations'))).toBe(false);
  // The audit log is no detail: it stays.
  expect(await partitionExists(name('audit_logs'))).toBe(true);
  expect(await eventsOf(plain)).toBe(0);
  expect(await eventsOf(billed)).toBe(1);
  expect(await totalOf(plain)).toEqual(totals);

  await db('reconciliation_runs').insert({
    id: newId(),
    workspace_id: billed.workspaceId,
    billing_connection_id: connectionId,
    status: 'SUCCEEDED',
    started_at: afterEnd,
    finished_at: afterEnd,
  });
  const reconciled = await history.applyRetention(afterEnd);
  expect(reconciled.dropped).toEqual([name('usage_events')]);
  expect(await eventsOf(billed)).toBe(0);
  expect((await totalOf(billed)).events).toBe(1);

  // Calls go on: this month's rows land in the default partition until the history job makes the month again.
  await call(plain);
  await t.nexus.gateway.drain();
  expect(await invocationsOf(plain)).toBe(1);
});

it('removes the rollups past their policy, the hourly ones by hour and the day rollups by whole days only', async () => {
  const short = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n, allowedModels: ['gpt-*'] });
  await call(short);
  await t.nexus.gateway.drain();
  const rows = (table: string) => t.database.db(table).where({ workspace_id: short.workspaceId }).count({ n: '*' }).first();
  const counts = async () =>
    Promise.all(
      ['usage_rollups', 'usage_key_rollups', 'usage_day_rollups', 'usage_day_key_rollups'].map(async (table) =>
        Number((await rows(table))!.n),
      ),
    );
  expect(await counts()).toEqual([1, 1, 1, 1]);
  const set = await updateRetentionPolicy({
    client: t.client,
    path: { workspaceId: short.workspaceId },
    body: { detailDays: 1, rollupDays: 1 },
  });
  expect(set.response.status).toBe(200);
  const history = t.nexus.services.history;
  // Past the policy by less than a day: the hour has gone, its day (which may end later) stays.
  const hourGone = new Date(Math.ceil(Date.now() / 3_600_000) * 3_600_000 + DAY + 1000);
  const dayStart = Math.floor(Date.now() / DAY) * DAY;
  await history.applyRetention(hourGone);
  const [hourly, byKey, days, keyDays] = await counts();
  expect([hourly, byKey]).toEqual([0, 0]);
  // The day leaves once the whole of it, 25 hours at the most from its start, is past the cutoff.
  expect([days, keyDays]).toEqual(Array(2).fill(dayStart <= hourGone.getTime() - DAY - 25 * 3_600_000 ? 0 : 1));
  await history.applyRetention(new Date(dayStart + 2 * DAY + 25 * 3_600_000));
  expect(await counts()).toEqual([0, 0, 0, 0]);
});

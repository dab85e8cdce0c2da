/**
 * The finished days a process keeps of its usage summaries by day (src/domain/invocations/usage-days.ts), through
 * HTTP: a process that keeps them answers every summary, top summary and export as a process that keeps none (the
 * statements' answers), the first time and from the days kept, in the workspace's zone and in others; a day kept is
 * not read again until a late record, a zone change or retention raises the workspace's usage revision; today's hours
 * are read at each summary.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordElement } from '../../src/db/row-record.js';
import { deleteRollupBatch } from '../../src/domain/history/history-repo.js';
import { INVOCATION_COLUMNS } from '../../src/domain/recording/record-sql.js';
import { newId } from '../../src/ids.js';
import { createCallRepo } from '../../src/records/call-repo.js';
import { updateWorkspace } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, type Tenant } from '../gateway/gateway-support.js';
import { askSummary, rebuildRollups, seededUsageEvent, type SummaryAsk } from '../support/usage-rollups.js';

let kept: TestApp;
let plain: TestApp;
let upstream: FakeUpstream;
let tenant: Tenant;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const FROM = Date.parse('2026-03-01T00:00:00Z');
const TO = Date.parse('2026-03-11T00:00:00Z');
const HUGE_FROM = Date.parse('2026-01-01T00:00:00Z');
const ACCESSES = Array.from({ length: 10 }, () => newId());
// Three users who spend alike, to the micro and the unit: the most, and tied at every edge of the top summaries below.
const TIED = ACCESSES.slice(0, 3);
const MODELS = ['m-a', 'm-b', 'm-c', 'm-d'];

beforeAll(async () => {
  kept = await startTestApp();
  plain = await startTestApp({ database: kept.database, env: { NEXUS_USAGE_DAY_CACHE_MB: '0' } });
  const key = testProviderKey('usage-days');
  upstream = await startOpenAiUpstream({ apiKey: key });
  tenant = await createTenant(kept, { baseUrl: upstream.url, providerKey: key });
  const event = (access: string, n: number, at: number) => seededUsageEvent(tenant.workspaceId, access, MODELS, n, at);
  const events = Array.from({ length: 900 }, (_, n) =>
    event(ACCESSES[3 + (n % 7)]!, n, FROM + Math.floor(((n * 7919) % 900) * ((TO - FROM) / 900))),
  );
  for (let n = 0; n < 40; n++) {
    for (const access of TIED) events.push({ ...event(access, n, FROM + n * 6 * HOUR + 17 * 60_000), cost_micros: 9_000 });
  }
  // A month of sums past 2^53 (their magnitudes added), which numbers do not add exactly: the statement sums them.
  for (let n = 0; n < 30; n++) {
    events.push({ ...event(ACCESSES[n % 5]!, n, HUGE_FROM + n * 20 * HOUR), units: 2 ** 55 + n, cost_micros: 2 ** 58 + n * 1_000_003 });
  }
  await kept.database.db.batchInsert('usage_events', events, 500);
  await rebuildRollups(kept.database.db, tenant.workspaceId);
});
afterAll(async () => {
  await plain?.close();
  await kept?.close();
  await upstream?.close();
});

type Ask = Omit<SummaryAsk, 'granularity'>;

/** The summary by day `t` answers. */
const summary = (t: TestApp, ask: Ask) => askSummary(t, tenant.workspaceId, { ...ask, granularity: 'day' });

async function exported(t: TestApp, ask: Ask): Promise<string> {
  const query = new URLSearchParams({
    since: new Date(ask.since).toISOString(),
    until: new Date(ask.until).toISOString(),
    granularity: 'day',
    groupBy: ask.groupBy,
    timeZone: ask.timeZone,
  });
  const res = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary/export?${query}`, {
    headers: { authorization: `Bearer ${t.config.managementKey}` },
  });
  expect(res.status).toBe(200);
  return res.text();
}

/** A call through the gateway, recorded: its invocation's row as JSON. */
async function callNow(): Promise<Record<string, unknown>> {
  const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'today' }], max_tokens: 5 }),
  });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  await kept.nexus.gateway.drain();
  const { rows } = await kept.database.db.raw(
    `select row_to_json(i)::text as json from invocations i where workspace_id = ? order by started_at desc limit 1`,
    [tenant.workspaceId],
  );
  expect(id).toBeTruthy();
  return JSON.parse((rows as { json: string }[])[0]!.json) as Record<string, unknown>;
}

/** The range's days kept by the process that keeps them: its summary without `top` reads and keeps them as it answers. */
async function keptDays(ask: Ask): Promise<void> {
  const { top: _top, offset: _offset, ...all } = ask;
  await summary(kept, all);
}

const revision = async () =>
  Number((await kept.database.db('usage_revisions').where({ workspace_id: tenant.workspaceId }).first('revision'))?.revision ?? 0);

describe('the finished days a process keeps', () => {
  it('answer every summary, top summary and export by day as the statements do, the first time and kept', async () => {
    const tops = [{}, { top: 2 }, { top: 1, offset: 1 }, { top: 4, offset: 2 }, { top: 20 }];
    for (const timeZone of ['UTC', 'Asia/Tokyo', 'America/New_York', 'Asia/Kolkata']) {
      for (const [since, until] of [
        [FROM, TO],
        [FROM + 5 * HOUR, TO - 3 * HOUR],
      ] as const) {
        for (const groupBy of ['access', 'model'] as const) {
          for (const top of tops) {
            const ask = { groupBy, timeZone, since, until, ...top };
            const expected = await summary(plain, ask);
            expect(expected.buckets.length).toBeGreaterThan(0);
            // A top summary whose days are not kept is the statement's, while they are read to be kept.
            expect(await summary(kept, ask), `${JSON.stringify(ask)}, first`).toEqual(expected);
            await keptDays(ask);
            expect(await summary(kept, ask), `${JSON.stringify(ask)}, kept`).toEqual(expected);
          }
          const ask = { groupBy, timeZone, since, until };
          const csv = await exported(plain, ask);
          expect(await exported(kept, ask)).toBe(csv);
          expect(await exported(kept, ask)).toBe(csv);
        }
      }
    }
  }, 120_000);

  it('leave a top summary whose sums pass 2^53 to the statement, exact', async () => {
    for (const timeZone of ['UTC', 'Asia/Tokyo']) {
      const ask = { groupBy: 'access' as const, timeZone, since: HUGE_FROM, until: HUGE_FROM + 30 * DAY, top: 2 };
      const expected = await summary(plain, ask);
      expect(expected.buckets.some((b) => BigInt(b.costMicros) > 2n ** 58n)).toBe(true);
      await keptDays(ask);
      expect(await summary(kept, ask)).toEqual(expected);
    }
  });

  it('break the ties at the edge of a top summary as the database orders the keys', async () => {
    const ask = { groupBy: 'access' as const, timeZone: 'UTC', since: FROM, until: TO };
    const all = await summary(plain, ask);
    const ranked = [...new Set(all.buckets.filter((b) => TIED.includes(b.key)).map((b) => b.key))].sort();
    expect(ranked).toHaveLength(3);
    await keptDays(ask);
    for (const [top, offset] of [
      [1, 0],
      [1, 1],
      [2, 1],
    ] as const) {
      const keys = new Set((await summary(kept, { ...ask, top, offset })).buckets.filter((b) => !b.other).map((b) => b.key));
      expect([...keys]).toEqual(ranked.slice(offset, offset + top));
    }
  });

  it('are read again once a late record raises the revision; until then a change the rollups did not announce is not seen', async () => {
    const day = FROM + 3 * DAY;
    const ask = { groupBy: 'access' as const, timeZone: 'UTC', since: day, until: day + DAY };
    const before = await summary(kept, ask);
    const calls = (answer: typeof before) => answer.buckets.reduce((n, b) => n + b.calls, 0);

    // A day row changed by hand (no statement of Nexus does so): the process that keeps the day still answers it as
    // it read it; the one that keeps none reads the change.
    const row = { workspace_id: tenant.workspaceId, workspace_access_id: ACCESSES[4]!, day: new Date(day) };
    await kept.database.db('usage_day_key_rollups').where(row).increment('calls', 100);
    expect(await summary(kept, ask)).toEqual(before);
    expect(calls(await summary(plain, ask))).toBe(calls(before) + 100);
    await kept.database.db('usage_day_key_rollups').where(row).decrement('calls', 100);

    // A call recorded late (a spool's replay, through the gateway's record statement) raises the revision: the day
    // is read again, on every process.
    const at = await revision();
    const template = await callNow();
    const id = newId();
    const late = {
      ...template,
      id,
      workspace_access_id: ACCESSES[4]!,
      request_id: `late-${id}`,
      status: 'REJECTED',
      attempts: null,
      started_at: new Date(day + 10 * HOUR).toISOString(),
      completed_at: new Date(day + 10 * HOUR + 500).toISOString(),
    };
    await createCallRepo(kept.database.db, false).record([{ id, invocation: recordElement(INVOCATION_COLUMNS, late), leaseCall: null }]);
    expect(await revision()).toBe(at + 1);
    const after = await summary(kept, ask);
    expect(calls(after)).toBe(calls(before) + 1);
    expect(after).toEqual(await summary(plain, ask));
  });

  it("read today's hours at each summary", async () => {
    const ask = { groupBy: 'access' as const, timeZone: 'UTC', since: Date.now() - 3 * DAY, until: Date.now() + HOUR };
    const calls = async () => (await summary(kept, ask)).buckets.reduce((n, b) => n + b.calls, 0);
    const before = await calls();
    await callNow();
    expect(await calls()).toBe(before + 1);
  });

  it("are read again after the workspace's zone changes and after retention removes rollup rows", async () => {
    const at = await revision();
    const changed = await updateWorkspace({
      client: kept.client,
      path: { workspaceId: tenant.workspaceId },
      body: { timeZone: 'Europe/Paris' },
    });
    expect(changed.response.status).toBe(200);
    expect(await revision()).toBe(at + 1);
    const ask = { groupBy: 'model' as const, timeZone: 'Europe/Paris', since: FROM, until: TO };
    expect(await summary(kept, ask)).toEqual(await summary(plain, ask));

    const first = await summary(kept, { ...ask, since: FROM, until: FROM + 3 * DAY });
    expect(first.buckets.length).toBeGreaterThan(0);
    expect(await deleteRollupBatch(kept.database.db, tenant.workspaceId, new Date(FROM + 3 * DAY), 10_000)).toBeGreaterThan(0);
    expect(await revision()).toBe(at + 2);
    const removed = await summary(kept, { ...ask, since: FROM, until: FROM + 3 * DAY });
    expect(removed).toEqual(await summary(plain, { ...ask, since: FROM, until: FROM + 3 * DAY }));
    expect(removed.buckets.length).toBeLessThan(first.buckets.length);
  });
});

/**
 * getUsageSummary with `top` through HTTP: the keys that cost most over the whole range are series of their own, every
 * other key summed as one `other` series a bucket, so that the top series and the other one add up, to the unit and
 * the micro, to the summary without `top`: by user and by model, by day in the workspace's zone (the day rollups), in
 * another zone and by hour (the hourly rollups).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { getUsageSummary } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, type Tenant } from '../gateway/gateway-support.js';
import type { UsageBucketDto } from '../../generated/client/types.gen.js';
import { askSummary, rebuildRollups, seededUsageEvent, type SummaryAsk } from '../support/usage-rollups.js';

let t: TestApp;
let upstream: FakeUpstream;
let tenant: Tenant;

const HOUR = 3_600_000;
const FROM = Date.parse('2026-03-01T00:00:00Z');
const TO = Date.parse('2026-03-09T00:00:00Z');
const ACCESSES = Array.from({ length: 12 }, () => newId());
const MODELS = ['m-a', 'm-b', 'm-c', 'm-d', 'm-e'];

beforeAll(async () => {
  t = await startTestApp();
  const key = testProviderKey('usage-top');
  upstream = await startOpenAiUpstream({ apiKey: key });
  tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: key });
  // Users that spend unevenly (the i-th about i times the first), each event at a chosen time, then the rollups of them.
  let n = 0;
  const events = Array.from({ length: 1200 }, () => {
    n++;
    const access = (n * 7) % ACCESSES.length;
    return {
      ...seededUsageEvent(tenant.workspaceId, ACCESSES[access]!, MODELS, n, FROM + Math.floor(((n * 7919) % 1200) * ((TO - FROM) / 1200))),
      cost_micros: (access + 1) * (100 + ((n * 53) % 700)),
    };
  });
  await t.database.db.batchInsert('usage_events', events, 500);
  await rebuildRollups(t.database.db, tenant.workspaceId);
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

type Ask = SummaryAsk;

const answer = (ask: Ask) => askSummary(t, tenant.workspaceId, ask);

const summary = async (ask: Ask) => (await answer(ask)).buckets;

const SUMS = ['units', 'inputTokens', 'cachedInputTokens', 'outputTokens', 'costMicros'] as const;
const COUNTS = ['events', 'unpricedEvents', 'calls', 'failedCalls', 'refusedCalls'] as const;

/** The buckets of the keys not in `top`, summed per start (the other series as the full summary has it). */
function expectedOther(full: UsageBucketDto[], top: string[]) {
  const other = new Map<string, Record<string, bigint>>();
  for (const b of full.filter((x) => !top.includes(x.key))) {
    const sum = other.get(b.start) ?? Object.fromEntries([...SUMS, ...COUNTS].map((f) => [f, 0n]));
    for (const f of [...SUMS, ...COUNTS]) sum[f] = sum[f]! + BigInt(b[f] ?? 0);
    other.set(b.start, sum);
  }
  return other;
}

/** The keys by the range's cost, then units, then key: the `n` after the first `offset`. */
function topOf(full: UsageBucketDto[], n: number, offset = 0): string[] {
  const totals = new Map<string, { cost: bigint; units: bigint }>();
  for (const b of full) {
    const t0 = totals.get(b.key) ?? { cost: 0n, units: 0n };
    totals.set(b.key, { cost: t0.cost + BigInt(b.costMicros), units: t0.units + BigInt(b.units) });
  }
  return [...totals]
    .sort(([ka, a], [kb, b]) =>
      b.cost !== a.cost ? (b.cost > a.cost ? 1 : -1) : b.units !== a.units ? (b.units > a.units ? 1 : -1) : ka < kb ? -1 : 1,
    )
    .slice(offset, offset + n)
    .map(([k]) => k);
}

async function expectTopAddsUp(ask: Ask, n: number, offset?: number) {
  const [full, answered] = await Promise.all([summary(ask), answer({ ...ask, top: n, ...(offset === undefined ? {} : { offset }) })]);
  const topped = answered.buckets;
  const top = topOf(full, n, offset);
  const label = JSON.stringify({ ...ask, top: n, offset });
  // How many keys there are to page through: those of the whole summary.
  expect(answered.keyCount, label).toBe(new Set(full.map((b) => b.key)).size);
  // The top keys' series are the full summary's, bucket for bucket.
  expect(
    topped.filter((b) => !b.other),
    label,
  ).toEqual(full.filter((b) => top.includes(b.key)));
  // The other series: one a bucket with other keys, its key empty, the last of its bucket, the rest summed.
  const other = expectedOther(full, top);
  const others = topped.filter((b) => b.other);
  expect(
    others.map((b) => b.start),
    label,
  ).toEqual([...other.keys()]);
  for (const b of others) {
    expect(b.key).toBe('');
    const sum = other.get(b.start)!;
    for (const f of [...SUMS, ...COUNTS]) expect(BigInt(b[f] ?? 0), `${label} ${b.start} ${f}`).toBe(sum[f]);
    const inBucket = topped.filter((x) => x.start === b.start);
    expect(inBucket.at(-1)).toBe(b);
  }
  // Top and other add up to the whole, to the unit and the micro.
  for (const f of SUMS) {
    const total = (buckets: UsageBucketDto[]) => buckets.reduce((s, b) => s + BigInt(b[f]), 0n);
    expect(total(topped), `${label} ${f}`).toBe(total(full));
  }
  return { full, topped, top };
}

describe('a usage summary of its top keys', () => {
  it('by user by day in the workspace zone: the top users and the others, adding up to the whole', async () => {
    // A range that cuts its first and last days (edge hours from the hourly rollups, whole days from the day rollups).
    const { full, topped, top } = await expectTopAddsUp(
      { granularity: 'day', groupBy: 'access', timeZone: 'UTC', since: FROM + 5 * HOUR, until: TO - 7 * HOUR },
      3,
    );
    expect(top.length).toBe(3);
    expect(new Set(full.map((b) => b.key)).size).toBe(ACCESSES.length);
    // The answer holds at most 4 series a day, where the whole one holds 12.
    expect(topped.length).toBeLessThanOrEqual(4 * 8);
    expect(full.length).toBeGreaterThan(topped.length);
  });

  it('by user by hour, by model by day in another zone, and a top larger than the keys', async () => {
    await expectTopAddsUp({ granularity: 'hour', groupBy: 'access', timeZone: 'UTC', since: FROM, until: FROM + 30 * HOUR }, 5);
    // More hours than a summary reads at once without `top` (its slices): the top keys are the whole range's.
    await expectTopAddsUp({ granularity: 'hour', groupBy: 'access', timeZone: 'UTC', since: FROM - 3 * 86_400_000, until: TO }, 4);
    await expectTopAddsUp({ granularity: 'day', groupBy: 'model', timeZone: 'Asia/Tokyo', since: FROM, until: TO }, 2);
    const { topped } = await expectTopAddsUp({ granularity: 'day', groupBy: 'access', timeZone: 'UTC', since: FROM, until: TO }, 100);
    expect(topped.some((b) => b.other)).toBe(false);
  });

  it('pages through the users by cost (offset): each page the next ones, the others summed, every user on one page', async () => {
    const ask: Ask = { granularity: 'day', groupBy: 'access', timeZone: 'UTC', since: FROM + 5 * HOUR, until: TO - 7 * HOUR };
    const seen: string[] = [];
    for (const offset of [0, 5, 10]) {
      const { topped, top } = await expectTopAddsUp(ask, 5, offset);
      expect(new Set(topped.filter((b) => !b.other).map((b) => b.key))).toEqual(new Set(top));
      seen.push(...top);
    }
    // 12 users: pages of 5, 5 and 2, each user on one page.
    expect(seen.length).toBe(ACCESSES.length);
    expect(new Set(seen)).toEqual(new Set(ACCESSES));
    // By hour, and a page past the last user: no series but the others, the whole.
    await expectTopAddsUp({ granularity: 'hour', groupBy: 'access', timeZone: 'UTC', since: FROM, until: FROM + 30 * HOUR }, 3, 6);
    const { topped } = await expectTopAddsUp(ask, 5, 20);
    expect(topped.length).toBeGreaterThan(0);
    expect(topped.every((b) => b.other)).toBe(true);
  });

  it("ranks as the database's rows add up: each page's users, by cost over the range, from the usage events", async () => {
    const since = FROM + 5 * HOUR;
    const until = TO - 7 * HOUR;
    const ranked = (
      await t.database.db.raw(
        `select workspace_access_id::text as key, sum(cost_micros)::text as cost
           from usage_events where workspace_id = ? and created_at >= ? and created_at < ?
          group by workspace_access_id order by sum(cost_micros) desc, sum(units) desc, workspace_access_id::text`,
        [tenant.workspaceId, new Date(since), new Date(until)],
      )
    ).rows as { key: string; cost: string }[];
    const page = await answer({ granularity: 'day', groupBy: 'access', timeZone: 'UTC', since, until, top: 4, offset: 4 });
    expect(page.keyCount).toBe(ranked.length);
    const costs = new Map<string, bigint>();
    for (const b of page.buckets.filter((x) => !x.other)) costs.set(b.key, (costs.get(b.key) ?? 0n) + BigInt(b.costMicros));
    expect([...costs].sort(([, a], [, b]) => (b > a ? 1 : b < a ? -1 : 0)).map(([key, cost]) => ({ key, cost: String(cost) }))).toEqual(
      ranked.slice(4, 8),
    );
  });

  it('refuses a top of 0 or over 100, a negative offset, and an offset without top', async () => {
    const bad: Record<string, number>[] = [{ top: 0 }, { top: 101 }, { top: 5, offset: -1 }, { offset: 5 }];
    for (const query of bad) {
      const res = await getUsageSummary({
        client: t.client,
        path: { workspaceId: tenant.workspaceId },
        query: { groupBy: 'access', ...query },
      });
      expect(res.response.status, JSON.stringify(query)).toBe(400);
      expect((res.error as { error: { code: string } }).error.code).toBe('invalid_parameter');
    }
  });
});

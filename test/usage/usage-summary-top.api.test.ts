/**
 * getUsageSummary with `top` through HTTP: the keys that cost most over the whole range are series of their own, every
 * other key summed as one `other` series a bucket, so that the top series and the other one add up, to the unit and
 * the micro, to the summary without `top`: by user and by model, by day in the workspace's zone (the day rollups), in
 * another zone and by hour (the hourly rollups).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { rebuildWorkspaceRollupsSql, ROLLUP_TABLES } from '../../src/domain/recording/rollup-sql.js';
import { getUsageSummary } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, type Tenant } from '../gateway/gateway-support.js';
import type { UsageBucketDto } from '../../generated/client/types.gen.js';

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
      id: newId(),
      workspace_id: tenant.workspaceId,
      workspace_access_id: ACCESSES[access]!,
      quota_period_id: newId(),
      kind: 'USAGE',
      units: 1 + ((n * 37) % 900),
      input_tokens: (n * 13) % 500,
      cached_input_tokens: 0,
      output_tokens: (n * 11) % 300,
      cost_micros: (access + 1) * (100 + ((n * 53) % 700)),
      model: MODELS[n % MODELS.length]!,
      created_at: new Date(FROM + Math.floor(((n * 7919) % 1200) * ((TO - FROM) / 1200))),
    };
  });
  await t.database.db.batchInsert('usage_events', events, 500);
  for (const table of ROLLUP_TABLES) await t.database.db(table).where({ workspace_id: tenant.workspaceId }).delete();
  await t.database.db.raw(rebuildWorkspaceRollupsSql(':workspaceId'), { workspaceId: tenant.workspaceId });
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

interface Ask {
  granularity: 'hour' | 'day';
  groupBy: 'model' | 'access';
  timeZone: string;
  since: number;
  until: number;
  top?: number;
}

async function summary(ask: Ask) {
  const { since, until, ...rest } = ask;
  const res = await getUsageSummary({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    query: { ...rest, since: new Date(since).toISOString(), until: new Date(until).toISOString() },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(200);
  return res.data!.buckets;
}

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

/** The keys by the range's cost, then units, then key: the top `n`. */
function topOf(full: UsageBucketDto[], n: number): string[] {
  const totals = new Map<string, { cost: bigint; units: bigint }>();
  for (const b of full) {
    const t0 = totals.get(b.key) ?? { cost: 0n, units: 0n };
    totals.set(b.key, { cost: t0.cost + BigInt(b.costMicros), units: t0.units + BigInt(b.units) });
  }
  return [...totals]
    .sort(([ka, a], [kb, b]) =>
      b.cost !== a.cost ? (b.cost > a.cost ? 1 : -1) : b.units !== a.units ? (b.units > a.units ? 1 : -1) : ka < kb ? -1 : 1,
    )
    .slice(0, n)
    .map(([k]) => k);
}

async function expectTopAddsUp(ask: Ask, n: number) {
  const [full, topped] = await Promise.all([summary(ask), summary({ ...ask, top: n })]);
  const top = topOf(full, n);
  const label = JSON.stringify({ ...ask, top: n });
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

  it('refuses a top of 0 or over 100', async () => {
    for (const top of [0, 101]) {
      const res = await getUsageSummary({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { groupBy: 'access', top } });
      expect(res.response.status).toBe(400);
    }
  });
});

/**
 * getUsageSummary with `top` by day in a zone other than the workspace's reads the workspace's day rollups (its
 * whole days, less and plus the hours the two zones cut apart), as the summary without `top` does: through HTTP, over
 * random ranges, the answer (the series of the keys ranked by cost over the range, `other`, `keyCount`, with
 * `offset`) equals the one made from the hourly summary's hours added up per local day (London, New York, Kolkata,
 * Tokyo, Auckland and Los Angeles on a workspace in UTC, New York on one in Paris, across their DST changes); a day
 * row made to disagree with its hours shows the day rows are read, whatever the hours between the zones' midnights.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { localDate, localMidnight } from '../../src/domain/workspaces/time-zone.js';
import { getUsageSummary, updateWorkspace } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, type Tenant } from '../gateway/gateway-support.js';
import { prng } from '../support/prng.js';
import { byLocalDay, rebuildRollups } from '../support/usage-rollups.js';

let t: TestApp;
let upstream: FakeUpstream;
let tenant: Tenant;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** The events span New York's (March 8, 2026) and London's (March 29) spring DST changes. */
const FROM = Date.parse('2026-02-20T00:00:00Z');
const TO = Date.parse('2026-04-10T00:00:00Z');
const MODELS = ['gpt-a', 'gpt-b', 'gpt-c'];
const ACCESSES = Array.from({ length: 12 }, () => newId());

// Seeded, so that a failure can be run again as it was.
const SEED = Number(process.env.TOP_DAY_ROLLUPS_SEED ?? 20261207);
const rand = prng(SEED);

beforeAll(async () => {
  // The rollups' rows are changed by hand to show which of them a statement reads: the finished days a process keeps
  // (usage-days.ts, tested in usage-days.api.test.ts) would answer instead.
  t = await startTestApp({ env: { NEXUS_USAGE_DAY_CACHE_MB: '0' } });
  const key = testProviderKey('top-day-rollups');
  upstream = await startOpenAiUpstream({ apiKey: key });
  tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: key });
  // Users that spend unevenly (the i-th about i times the first), at chosen times, then the rollups of them.
  const events = Array.from({ length: 1500 }, () => {
    const access = Math.floor(rand() * ACCESSES.length);
    return {
      id: newId(),
      workspace_id: tenant.workspaceId,
      workspace_access_id: ACCESSES[access]!,
      quota_period_id: newId(),
      kind: 'USAGE',
      units: 1 + Math.floor(rand() * 1000),
      input_tokens: Math.floor(rand() * 500),
      cached_input_tokens: 0,
      output_tokens: Math.floor(rand() * 300),
      cost_micros: (access + 1) * Math.floor(rand() * 900),
      model: MODELS[Math.floor(rand() * MODELS.length)]!,
      created_at: new Date(FROM + Math.floor(rand() * (TO - FROM))),
    };
  });
  await t.database.db.batchInsert('usage_events', events, 500);
  await rebuildRollups(t.database.db, tenant.workspaceId);
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

type Bucket = Record<string, unknown> & { start: string; key: string; other?: true };
type GroupBy = 'model' | 'access';

async function answer(
  granularity: 'hour' | 'day',
  since: number,
  until: number,
  timeZone: string,
  groupBy: GroupBy,
  page?: [number, number],
) {
  const res = await getUsageSummary({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    query: {
      since: new Date(since).toISOString(),
      until: new Date(until).toISOString(),
      granularity,
      groupBy,
      timeZone,
      ...(page ? { top: page[0], offset: page[1] } : {}),
    },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(200);
  return { buckets: res.data!.buckets as unknown as Bucket[], keyCount: res.data!.keyCount };
}

/** `bucket`'s sums added to `sum`'s (each field as the API writes it: a number or a decimal string). */
function addTo(sum: Bucket, bucket: Bucket): void {
  for (const [field, value] of Object.entries(bucket)) {
    if (field === 'start' || field === 'key' || field === 'other') continue;
    const total = BigInt((sum[field] as string | number | undefined) ?? 0) + BigInt(value as string | number);
    sum[field] = typeof value === 'number' ? Number(total) : String(total);
  }
}

/**
 * The answer with `top` from the days of the hours: the keys ranked by cost over the range (then units, then key),
 * those after `offset` as series, every other key summed in one bucket a day, last, its key empty.
 */
function topFromHours(days: Bucket[], top: number, offset: number): { buckets: Bucket[]; keyCount: number } {
  const totals = new Map<string, { cost: bigint; units: bigint }>();
  for (const b of days) {
    const sum = totals.get(b.key) ?? { cost: 0n, units: 0n };
    totals.set(b.key, { cost: sum.cost + BigInt(b.costMicros as string), units: sum.units + BigInt(b.units as string) });
  }
  const ranked = [...totals]
    .sort(([ka, a], [kb, b]) =>
      b.cost !== a.cost ? (b.cost > a.cost ? 1 : -1) : b.units !== a.units ? (b.units > a.units ? 1 : -1) : ka < kb ? -1 : 1,
    )
    .map(([k]) => k);
  const series = new Set(ranked.slice(offset, offset + top));
  const buckets: Bucket[] = [];
  for (const start of [...new Set(days.map((b) => b.start))]) {
    const ofDay = days.filter((b) => b.start === start);
    buckets.push(...ofDay.filter((b) => series.has(b.key)));
    const others = ofDay.filter((b) => !series.has(b.key));
    if (others.length === 0) continue;
    const other: Bucket = { start, key: '', other: true };
    for (const b of others) addTo(other, b);
    buckets.push(other);
  }
  return { buckets, keyCount: ranked.length };
}

/** A random range inside the events' span, at most 40 days (an hourly summary's 1,000 buckets), whole hours or not. */
function randomRange(): [number, number] {
  const since = FROM - DAY + Math.floor(rand() * (TO - FROM));
  const length = Math.floor(rand() * 40 * DAY) + 1;
  return [since, Math.min(since + length, since + 40 * DAY - HOUR)];
}

async function setZone(zone: string) {
  const res = await updateWorkspace({ client: t.client, path: { workspaceId: tenant.workspaceId }, body: { timeZone: zone } });
  expect(res.response.status).toBe(200);
}

// The last: more series than keys (no other keys, so no `other`: the day's totals are not read).
const PAGES: [number, number][] = [
  [3, 0],
  [5, 4],
  [9, 0],
  [4, 8],
  [20, 0],
];

async function expectHoursAnswer(zone: string, ranges: number) {
  for (let i = 0; i < ranges; i++) {
    const [since, until] = randomRange();
    const groupBy: GroupBy = i % 3 === 2 ? 'model' : 'access';
    const page = groupBy === 'model' ? ([2, i % 2] as [number, number]) : PAGES[i % PAGES.length]!;
    const label = `${zone} ${new Date(since).toISOString()}..${new Date(until).toISOString()} by ${groupBy}, top ${page.join(' offset ')} (seed ${SEED})`;
    const [days, hours] = await Promise.all([
      answer('day', since, until, zone, groupBy, page),
      answer('hour', since, until, zone, groupBy),
    ]);
    expect(days.buckets.length, label).toBeGreaterThan(0);
    expect(days, label).toEqual(topFromHours(byLocalDay(hours.buckets, zone) as Bucket[], ...page));
  }
}

describe('a usage summary of its top keys by day in another zone than the workspace’s, from the day rollups', () => {
  for (const [own, zone] of [
    ['UTC', 'Europe/London'],
    ['UTC', 'America/New_York'],
    ['UTC', 'Asia/Kolkata'],
    ['UTC', 'Asia/Tokyo'],
    ['UTC', 'Pacific/Auckland'],
    ['UTC', 'America/Los_Angeles'],
    ['Europe/Paris', 'America/New_York'],
  ]) {
    it(`${zone} on a workspace in ${own}: the ranking, the series, other and keyCount are the hours'`, async () => {
      await setZone(own!);
      await expectHoursAnswer(zone!, 8);
    });
  }

  it('reads the day rows in a zone however many hours apart (a row made to disagree shows it)', async () => {
    await setZone('UTC');
    const [since, until] = [Date.parse('2026-03-01T00:00:00Z'), Date.parse('2026-03-11T00:00:00Z')];
    const zones = ['Europe/London', 'America/New_York', 'Asia/Kolkata', 'Asia/Tokyo', 'Pacific/Auckland'];
    const before = await Promise.all(zones.map((z) => answer('day', since, until, z, 'access', [3, 0])));
    // A UTC day that no longer agrees with its hours by 1,000 units, in both day rollups: a row of a top user, and one
    // of the day rollup by model (the day's totals, which `other` is the rest of). The user has a series in the day
    // the row's middle hour falls in, in each zone.
    const startIn = (zone: string, day: Date) => {
      const middle = localDate(new Date(day.getTime() + 12 * HOUR), zone);
      return localMidnight(middle.year, middle.month, middle.day, zone).toISOString();
    };
    const tops = new Set(before[0]!.buckets.filter((b) => !b.other).map((b) => b.key));
    const rows = (await t.database
      .db('usage_day_key_rollups')
      .where({ workspace_id: tenant.workspaceId, time_zone: 'UTC' })
      .whereBetween('day', [new Date('2026-03-03T00:00:00Z'), new Date('2026-03-08T00:00:00Z')])
      .orderBy('day')) as (Record<string, unknown> & { day: Date; workspace_access_id: string })[];
    const keyRow = rows.find(
      (r) =>
        tops.has(r.workspace_access_id) &&
        zones.every((z, i) => before[i]!.buckets.some((b) => b.start === startIn(z, r.day) && b.key === r.workspace_access_id)),
    )!;
    expect(keyRow).toBeDefined();
    const day = { workspace_id: tenant.workspaceId, time_zone: 'UTC', day: keyRow.day };
    const atKey = { ...day, workspace_access_id: keyRow.workspace_access_id, inference_key_id: keyRow.inference_key_id };
    const modelRow = (await t.database.db('usage_day_rollups').where(day).first()) as Record<string, unknown>;
    const atModel = { ...day, model: modelRow.model, provider_connection_id: modelRow.provider_connection_id, plan_id: modelRow.plan_id };
    await t.database.db('usage_day_key_rollups').where(atKey).increment('units', 1000);
    await t.database.db('usage_day_rollups').where(atModel).increment('units', 1000);
    try {
      for (const [i, zone] of zones.entries()) {
        const read = await answer('day', since, until, zone, 'access', [3, 0]);
        // The user's series holds the 1,000 units in the day the row's middle hour falls in; other is as it was.
        const start = startIn(zone, keyRow.day);
        const units = (a: { buckets: Bucket[] }, key: string) =>
          BigInt(a.buckets.find((b) => b.start === start && b.key === key)!.units as string);
        expect(units(read, keyRow.workspace_access_id) - units(before[i]!, keyRow.workspace_access_id), zone).toBe(1000n);
        expect(units(read, ''), zone).toBe(units(before[i]!, ''));
        expect(read.keyCount, zone).toBe(before[i]!.keyCount);
        expect(
          read.buckets.filter((b) => b.start !== start),
          zone,
        ).toEqual(before[i]!.buckets.filter((b) => b.start !== start));
      }
    } finally {
      await t.database.db('usage_day_key_rollups').where(atKey).decrement('units', 1000);
      await t.database.db('usage_day_rollups').where(atModel).decrement('units', 1000);
    }
  });
});

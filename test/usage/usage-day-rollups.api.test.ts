/**
 * getUsageSummary by day in the workspace's zone reads whole days from usage_day_rollups and the hours at the range's
 * edges from the hourly rollups: over random ranges, through HTTP, its answer equals the hourly summary's hours added
 * up per local day (the day the hour's start falls in), in UTC, a DST zone and half- and three-quarter-hour zones;
 * a change of zone cuts the days again; a day row left in another zone makes the range read as hours (each day rollup).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { localDate, localMidnight } from '../../src/domain/workspaces/time-zone.js';
import { getUsageSummary, updateWorkspace } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, type Tenant } from '../gateway/gateway-support.js';
import { prng } from '../support/prng.js';
import { byLocalDay, rebuildRollups, type Bucket } from '../support/usage-rollups.js';

let t: TestApp;
let upstream: FakeUpstream;
let tenant: Tenant;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** The events span New York's spring DST change (March 8, 2026). */
const FROM = Date.parse('2026-02-20T00:00:00Z');
const TO = Date.parse('2026-04-10T00:00:00Z');
const MODELS = ['gpt-a', 'gpt-b', 'gpt-c'];

// Seeded, so that a failure can be run again as it was.
const SEED = Number(process.env.DAY_ROLLUPS_SEED ?? 20261215);
const rand = prng(SEED);

beforeAll(async () => {
  // The rollups' rows are changed by hand to show which of them a statement reads: the finished days a process keeps
  // (usage-days.ts, tested in usage-days.api.test.ts) would answer instead.
  t = await startTestApp({ env: { NEXUS_USAGE_DAY_CACHE_MB: '0' } });
  const key = testProviderKey('day-rollups');
  upstream = await startOpenAiUpstream({ apiKey: key });
  tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: key });
  // Usage events at chosen times, as the gateway writes them (it stamps its own clock's), then the rollups of them.
  const events = Array.from({ length: 1500 }, () => ({
    id: newId(),
    workspace_id: tenant.workspaceId,
    workspace_access_id: tenant.accessId,
    quota_period_id: newId(),
    kind: 'USAGE',
    units: 1 + Math.floor(rand() * 1000),
    input_tokens: Math.floor(rand() * 500),
    cached_input_tokens: 0,
    output_tokens: Math.floor(rand() * 300),
    cost_micros: Math.floor(rand() * 9000),
    model: MODELS[Math.floor(rand() * MODELS.length)]!,
    created_at: new Date(FROM + Math.floor(rand() * (TO - FROM))),
  }));
  await t.database.db.batchInsert('usage_events', events, 500);
  await rebuildRollups(t.database.db, tenant.workspaceId);
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

async function summary(granularity: 'hour' | 'day', since: number, until: number, timeZone: string, groupBy: 'model' | 'access' | 'key') {
  const res = await getUsageSummary({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    query: { since: new Date(since).toISOString(), until: new Date(until).toISOString(), granularity, groupBy, timeZone },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(200);
  return res.data!.buckets as unknown as Bucket[];
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

async function expectSameAnswers(zone: string, ranges: number) {
  for (let i = 0; i < ranges; i++) {
    const [since, until] = randomRange();
    const groupBy = (['model', 'access', 'key'] as const)[i % 3]!;
    const [days, hours] = await Promise.all([summary('day', since, until, zone, groupBy), summary('hour', since, until, zone, groupBy)]);
    expect(days.length, `${zone} ${new Date(since).toISOString()}..${new Date(until).toISOString()} by ${groupBy}`).toBeGreaterThan(0);
    expect(days, `${zone} ${new Date(since).toISOString()}..${new Date(until).toISOString()} by ${groupBy} (seed ${SEED})`).toEqual(
      byLocalDay(hours, zone),
    );
  }
}

describe('usage summaries by day from the day rollups', () => {
  it('the rollups’ SQL keeps a day row per local day of the workspace (UTC first), with the hours’ sums', async () => {
    const rows: { time_zone: string; day: Date }[] = await t.database
      .db('usage_day_rollups')
      .where({ workspace_id: tenant.workspaceId })
      .select('time_zone', 'day');
    expect(rows.length).toBeGreaterThan(40);
    expect(new Set(rows.map((r) => r.time_zone))).toEqual(new Set(['UTC']));
    expect(rows.every((r) => r.day.getTime() % DAY === 0)).toBe(true);
    const units = async (table: string) =>
      String((await t.database.db(table).where({ workspace_id: tenant.workspaceId }).sum({ units: 'units' }).first())!.units);
    expect(await units('usage_day_rollups')).toBe(await units('usage_rollups'));
    expect(await units('usage_day_key_rollups')).toBe(await units('usage_rollups'));
  });

  it('UTC: the same answer as the hours added up per day, over random ranges', async () => {
    await expectSameAnswers('UTC', 12);
  });

  for (const zone of ['America/New_York', 'Asia/Kolkata', 'Asia/Kathmandu']) {
    it(`${zone}: a change of zone cuts the days again, and the answers stay the hours' (DST and partial-hour offsets)`, async () => {
      await setZone(zone);
      const zones = await t.database.db('usage_day_rollups').where({ workspace_id: tenant.workspaceId }).distinct('time_zone');
      expect(zones).toEqual([{ time_zone: zone }]);
      await expectSameAnswers(zone, 9);
    });
  }

  it('a zone 8 hours from the workspace’s (Tokyo on Paris) reads the day rows less and plus the hours between, and equals the hours', async () => {
    await setZone('Europe/Paris');
    await expectSameAnswers('Asia/Tokyo', 6);
  });

  it('another name of the workspace’s days (Etc/UTC for UTC) reads its day rollups, and equals the hours', async () => {
    await setZone('UTC');
    await expectSameAnswers('Etc/UTC', 6);
  });

  for (const [own, zone] of [
    ['UTC', 'Europe/London'],
    ['UTC', 'America/New_York'],
    ['UTC', 'Asia/Kolkata'],
    ['UTC', 'Asia/Kathmandu'],
    ['Europe/Paris', 'America/New_York'],
    ['America/New_York', 'Asia/Kathmandu'],
    ['Asia/Kolkata', 'America/New_York'],
    // Zones far from the workspace's: 9 hours, 12 to 13 with a DST change (April 5), 7 to 8 with one (March 8), 14
    // and 11 hours, a DST zone 13 to 14 hours from another (each with its changes in the span).
    ['UTC', 'Asia/Tokyo'],
    ['UTC', 'Pacific/Auckland'],
    ['UTC', 'America/Los_Angeles'],
    ['UTC', 'Pacific/Kiritimati'],
    ['UTC', 'Pacific/Pago_Pago'],
    ['Asia/Tokyo', 'America/New_York'],
    ['America/Los_Angeles', 'Pacific/Auckland'],
    ['Asia/Kathmandu', 'America/St_Johns'],
  ]) {
    it(`${zone} on a workspace in ${own}: its whole days from the day rows, less and plus the hours the zones cut apart, equal the hours`, async () => {
      await setZone(own!);
      await expectSameAnswers(zone!, 6);
    });
  }

  it('a day row is read in the zone’s day its middle hour falls in, by any zone (a row made to disagree shows it)', async () => {
    await setZone('UTC');
    // A UTC day row made to disagree with its hours by 1,000 units: in a range that holds the day wholly, every
    // zone's answer holds 1,000 units more, in the bucket of the day its middle hour falls in.
    const day = { workspace_id: tenant.workspaceId, time_zone: 'UTC', day: new Date('2026-03-05T00:00:00Z') };
    const row = (await t.database.db('usage_day_rollups').where(day).first()) as Record<string, unknown>;
    const at = { ...day, model: row.model, provider_connection_id: row.provider_connection_id, plan_id: row.plan_id };
    const [since, until] = [Date.parse('2026-03-01T00:00:00Z'), Date.parse('2026-03-11T00:00:00Z')];
    const zones = ['UTC', 'Etc/UTC', 'Universal', 'Europe/London', 'Etc/GMT-1', 'America/New_York', 'Asia/Tokyo', 'Pacific/Auckland'];
    const unitsOf = (buckets: Bucket[]) => buckets.reduce((n, b) => n + BigInt(b.units as string), 0n);
    const before = await Promise.all(zones.map((z) => summary('day', since, until, z, 'model')));
    await t.database.db('usage_day_rollups').where(at).increment('units', 1000);
    try {
      for (const [i, z] of zones.entries()) {
        const read = await summary('day', since, until, z, 'model');
        expect(unitsOf(read) - unitsOf(before[i]!), z).toBe(1000n);
        const middle = localDate(new Date('2026-03-05T12:00:00Z'), z);
        const start = localMidnight(middle.year, middle.month, middle.day, z).toISOString();
        const of = (buckets: Bucket[]) => BigInt(buckets.find((b) => b.start === start && b.key === row.model)!.units as string);
        expect(of(read) - of(before[i]!), z).toBe(1000n);
      }
    } finally {
      await t.database.db('usage_day_rollups').where(at).decrement('units', 1000);
    }
  });

  it('the day of until is read from its day row when no later hour of it has usage, else from its hours', async () => {
    await setZone('UTC');
    // A UTC day whose last hour with usage is not its last hour: a range can end after it and inside the day.
    const { rows } = await t.database.db.raw<{ rows: { last: Date }[] }>(
      `select max(hour) as last from usage_rollups where workspace_id = ? group by date_trunc('day', hour, 'UTC')
        having max(hour) < date_trunc('day', max(hour), 'UTC') + interval '23 hours' order by 1 desc limit 1`,
      [tenant.workspaceId],
    );
    const lastHour = rows[0]!.last.getTime();
    const day = { workspace_id: tenant.workspaceId, time_zone: 'UTC', day: new Date(Math.floor(lastHour / DAY) * DAY) };
    const since = day.day.getTime() - 3 * DAY;
    const row = (await t.database.db('usage_day_key_rollups').where(day).first()) as Record<string, unknown>;
    const at = { ...day, workspace_access_id: row.workspace_access_id, inference_key_id: row.inference_key_id };
    const unitsOn = (buckets: Bucket[]) =>
      BigInt(buckets.find((b) => b.start === day.day.toISOString() && b.key === row.workspace_access_id)!.units as string);
    // The range holds the day's last hour with usage: the same answer as its hours, then read from the day's row
    // (the 1,000 units a day row no longer agreeing with its hours shows).
    const holding = await summary('day', since, lastHour + HOUR / 2, 'UTC', 'access');
    expect(holding).toEqual(byLocalDay(await summary('hour', since, lastHour + HOUR / 2, 'UTC', 'access'), 'UTC'));
    await t.database.db('usage_day_key_rollups').where(at).increment('units', 1000);
    try {
      expect(unitsOn(await summary('day', since, lastHour + HOUR / 2, 'UTC', 'access')) - unitsOn(holding)).toBe(1000n);
      // The range ends before the day's last hour with usage: its hours are read, not its row.
      const cut = await summary('day', since, lastHour, 'UTC', 'access');
      expect(cut).toEqual(byLocalDay(await summary('hour', since, lastHour, 'UTC', 'access'), 'UTC'));
      // Read by another zone's summary too, when the range holds the whole day (Abidjan's days are UTC's: the
      // summary's slice of them ends at the day's end).
      const wholeDay = day.day.getTime() + DAY;
      const hoursInAbidjan = byLocalDay(await summary('hour', since, wholeDay, 'Africa/Abidjan', 'access'), 'Africa/Abidjan');
      const total = (buckets: Bucket[]) => buckets.reduce((n, b) => n + BigInt(b.units as string), 0n);
      expect(total(await summary('day', since, wholeDay, 'Africa/Abidjan', 'access')) - total(hoursInAbidjan)).toBe(1000n);
      // A day older than the workspace's rollup retention may have lost hours to it: its hours are read.
      const ageDays = Math.floor((Date.now() - day.day.getTime()) / DAY);
      await t.database
        .db('workspaces')
        .where({ id: tenant.workspaceId })
        .update({ rollup_retention_days: ageDays - 1 });
      try {
        expect(await summary('day', since, lastHour + HOUR / 2, 'UTC', 'access')).toEqual(holding);
        // So does another zone's summary of a range holding the whole day: its row, past the retention, is not read.
        const whole = day.day.getTime() + DAY;
        const abidjan = byLocalDay(await summary('hour', since, whole, 'Africa/Abidjan', 'access'), 'Africa/Abidjan');
        expect(await summary('day', since, whole, 'Africa/Abidjan', 'access')).toEqual(abidjan);
      } finally {
        await t.database.db('workspaces').where({ id: tenant.workspaceId }).update({ rollup_retention_days: 730 });
      }
    } finally {
      await t.database.db('usage_day_key_rollups').where(at).decrement('units', 1000);
    }
  });

  const STRAYS = [
    ['usage_day_rollups', 'model', ['model', 'provider_connection_id', 'plan_id'], 'model'],
    ['usage_day_key_rollups', 'access', ['workspace_access_id', 'inference_key_id'], 'workspace_access_id'],
  ] as const;
  for (const [table, groupBy, series, keyColumn] of STRAYS) {
    it(`a row of ${table} left in another zone (a call recorded while the zone changed) makes the range read as hours`, async () => {
      await setZone('UTC');
      const [since, until] = [Date.parse('2026-03-01T00:00:00Z'), Date.parse('2026-03-11T00:00:00Z')];
      const before = await summary('day', since, until, 'UTC', groupBy);
      const tokyo = await summary('day', since, until, 'Asia/Tokyo', groupBy);
      const day = { workspace_id: tenant.workspaceId, time_zone: 'UTC', day: new Date('2026-03-05T00:00:00Z') };
      const row = (await t.database.db(table).where(day).first()) as Record<string, unknown>;
      const at = { ...day, ...Object.fromEntries(series.map((c) => [c, row[c]])) };
      // A UTC day that no longer agrees with its hours, and a stray row of another zone near the range: hours are read.
      await t.database.db(table).where(at).increment('units', 1000);
      await t.database.db(table).insert({ ...row, time_zone: 'Asia/Tokyo', day: new Date('2026-03-04T15:00:00Z') });
      expect(await summary('day', since, until, 'UTC', groupBy)).toEqual(before);
      expect(await summary('day', since, until, 'Asia/Tokyo', groupBy)).toEqual(tokyo);
      // Without the stray row the day is read (what shows the day path is taken), then put back.
      await t.database.db(table).where({ workspace_id: tenant.workspaceId, time_zone: 'Asia/Tokyo' }).delete();
      const read = await summary('day', since, until, 'UTC', groupBy);
      const of = (buckets: Bucket[]) => buckets.find((b) => b.start === '2026-03-05T00:00:00.000Z' && b.key === row[keyColumn])!;
      expect(BigInt(of(read).units as string) - BigInt(of(before).units as string)).toBe(1000n);
      await t.database.db(table).where(at).decrement('units', 1000);
      expect(await summary('day', since, until, 'UTC', groupBy)).toEqual(before);
    });
  }
});

/**
 * The migration that adds the day rollups (usage_day_rollups, usage_day_key_rollups) fills them from usage_rollups, each workspace's hours summed per day of its
 * own time zone (the local day each hour's start falls in). Run on a test schema: the migration taken down, hourly
 * rows written as an earlier version left them, the migration up again.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { down, up } from '../../migrations/20261215010000_usage_day_rollups.js';
import { ROLLUP_SUMS } from '../../src/domain/recording/rollup-sql.js';
import { localDate, localMidnight } from '../../src/domain/workspaces/time-zone.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  // Up again whatever happened, so the schema goes back to the next file as it came.
  if (!(await database.db.schema.hasTable('usage_day_rollups'))) await up(database.db);
  await database?.drop();
});

const ZONES = { '00000000-0000-4000-8000-0000000000d1': 'UTC', '00000000-0000-4000-8000-0000000000d2': 'Asia/Kolkata' };
const access = '00000000-0000-4000-8000-0000000000a1';

it('fills the day rollups with the sums of usage_rollups per day of each workspace’s zone', async () => {
  const { db } = database;
  await down(db);
  const now = new Date();
  for (const [id, zone] of Object.entries(ZONES)) {
    await db('workspaces').insert({ id, name: `day-${zone}`, status: 'ACTIVE', time_zone: zone, created_at: now, updated_at: now });
  }
  // Hours around UTC midnight and Kolkata's (18:30 UTC), in both workspaces, under two models.
  const hours = ['2026-11-01T17:00:00Z', '2026-11-01T18:00:00Z', '2026-11-01T19:00:00Z', '2026-11-01T23:00:00Z', '2026-11-02T00:00:00Z'];
  const rows = Object.keys(ZONES).flatMap((workspaceId) =>
    hours.flatMap((at, h) =>
      ['m1', 'm2'].map((model, m) => ({
        workspace_id: workspaceId,
        hour: new Date(at),
        workspace_access_id: access,
        inference_key_id: 'k1',
        model,
        provider_connection_id: 'c1',
        plan_id: '',
        ...Object.fromEntries(ROLLUP_SUMS.map((s, j) => [s, 1 + h * 10 + m * 100 + j])),
      })),
    ),
  );
  await db('usage_rollups').insert(rows);
  await up(db);

  // What each day should hold: the hours' sums added up per workspace, local day and series (model, or access and key).
  for (const [table, series] of [
    ['usage_day_rollups', ['model', 'provider_connection_id', 'plan_id']],
    ['usage_day_key_rollups', ['workspace_access_id', 'inference_key_id']],
  ] as const) {
    const expected = new Map<string, Record<string, string>>();
    for (const row of rows) {
      const zone = ZONES[row.workspace_id as keyof typeof ZONES];
      const date = localDate(row.hour, zone);
      const day = localMidnight(date.year, date.month, date.day, zone).toISOString();
      const id = [row.workspace_id, day, zone, ...series.map((c) => row[c])].join(' ');
      const sum = expected.get(id) ?? Object.fromEntries(ROLLUP_SUMS.map((s) => [s, '0']));
      for (const s of ROLLUP_SUMS) sum[s] = String(BigInt(sum[s]!) + BigInt((row as unknown as Record<string, number>)[s]!));
      expected.set(id, sum);
    }
    const got = (await db(table).whereIn('workspace_id', Object.keys(ZONES))) as Record<string, unknown>[];
    const byId = new Map(
      got.map((d) => [
        [d.workspace_id, (d.day as Date).toISOString(), d.time_zone, ...series.map((c) => d[c])].map(String).join(' '),
        Object.fromEntries(ROLLUP_SUMS.map((s) => [s, String(d[s])])),
      ]),
    );
    expect(byId, table).toEqual(expected);
  }
  const days = (await db('usage_day_rollups').whereIn('workspace_id', Object.keys(ZONES))) as Record<string, unknown>[];
  // UTC: two days (Nov 1, Nov 2); Kolkata: 17:00 UTC is Nov 1, 18:00 (23:30 local) too, 19:00 onwards Nov 2.
  expect(new Set(days.map((d) => `${String(d.time_zone)} ${(d.day as Date).toISOString()}`))).toEqual(
    new Set([
      'UTC 2026-11-01T00:00:00.000Z',
      'UTC 2026-11-02T00:00:00.000Z',
      'Asia/Kolkata 2026-10-31T18:30:00.000Z',
      'Asia/Kolkata 2026-11-01T18:30:00.000Z',
    ]),
  );
});

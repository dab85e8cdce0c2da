/**
 * The migration that adds usage_key_rollups fills it from usage_rollups: a database upgraded with a month of rollups
 * answers its summaries by access and by key with the sums it had. Run on a test schema: the migration taken down,
 * rollup rows written as an earlier version left them, the migration up again.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { down, up } from '../../migrations/20261130020000_usage_key_rollups.js';
import { KIND_COUNTS } from '../../src/domain/recording/kind-sql.js';
import { ROLLUP_SUMS as SUMS_NOW } from '../../src/domain/recording/rollup-sql.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  // Up again whatever happened, so the schema goes back to the next file as it came.
  if (!(await database.db.schema.hasTable('usage_key_rollups'))) await up(database.db);
  await database?.drop();
});

/** The sums the rollups had when the migration was written: those of the kinds came later (20261208010000). */
const ROLLUP_SUMS = SUMS_NOW.filter((s) => !(KIND_COUNTS as readonly string[]).includes(s));

const workspaceId = '00000000-0000-4000-8000-00000000000a';
const accesses = ['00000000-0000-4000-8000-0000000000a1', '00000000-0000-4000-8000-0000000000a2'];

it('fills usage_key_rollups with the sums of usage_rollups per hour, access and key', async () => {
  const { db } = database;
  await down(db);
  const hour = (h: number) => new Date(Date.UTC(2026, 10, 1, h));
  // Two hours; in each, access 1's key under two models and two connections, its calls without a key (''), and
  // access 2's key under one model.
  const rows = [0, 1].flatMap((h) => [
    { hour: hour(h), workspace_access_id: accesses[0], inference_key_id: 'k1', model: 'm1', provider_connection_id: 'c1', units: 10 + h },
    { hour: hour(h), workspace_access_id: accesses[0], inference_key_id: 'k1', model: 'm2', provider_connection_id: 'c1', units: 20 },
    { hour: hour(h), workspace_access_id: accesses[0], inference_key_id: 'k1', model: 'm1', provider_connection_id: 'c2', units: 30 },
    { hour: hour(h), workspace_access_id: accesses[0], inference_key_id: '', model: 'm1', provider_connection_id: '', units: 5 },
    { hour: hour(h), workspace_access_id: accesses[1], inference_key_id: 'k2', model: 'm1', provider_connection_id: 'c1', units: 7 },
  ]);
  await db('usage_rollups').insert(
    rows.map((r, i) => ({
      workspace_id: workspaceId,
      plan_id: '',
      ...Object.fromEntries(ROLLUP_SUMS.map((s, j) => [s, i + j])),
      ...r,
    })),
  );
  await up(db);

  const sums = ROLLUP_SUMS.map((s) => `sum(${s})::text as ${s}`).join(', ');
  const fromRollups = await db.raw(
    `select hour, workspace_access_id, inference_key_id, ${sums} from usage_rollups
      where workspace_id = ? group by 1, 2, 3 order by 1, 2, 3`,
    [workspaceId],
  );
  const byKey = await db.raw(
    `select hour, workspace_access_id, inference_key_id, ${sums} from usage_key_rollups
      where workspace_id = ? group by 1, 2, 3 order by 1, 2, 3`,
    [workspaceId],
  );
  expect(byKey.rows).toHaveLength(6);
  expect(byKey.rows).toEqual(fromRollups.rows);
  // One row per hour, access and key: access 1's key in hour 0 summed over its three rows.
  const first = (await db('usage_key_rollups').where({ workspace_id: workspaceId, hour: hour(0), inference_key_id: 'k1' })) as {
    units: string;
  }[];
  expect(first.map((r) => String(r.units))).toEqual([String(10 + 20 + 30)]);
});

import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createGatewayDb } from '../../src/gateway/gateway-db.js';
import { openConnections } from '../../src/gateway/warm-up.js';
import { createTestDatabase, preparedStatements, type TestDatabase } from '../support/test-db.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ poolMax: 3 });
});
afterAll(() => t.drop());

const WRITTEN = [
  'invocations',
  'usage_events',
  'lease_calls',
  'quota_leases',
  'quota_periods',
  'usage_rollups',
  'events',
  'rate_windows',
  'rate_allowances',
];
const NAMED = [
  'nexus_acquire_lease',
  'nexus_extend_lease',
  'nexus_give_back_allowance',
  'nexus_heartbeat',
  'nexus_key_lookup',
  'nexus_record_calls',
  'nexus_release_lease',
  'nexus_snapshot',
  'nexus_take_allowance',
];

/** The gateway's pool on the test's database, as gateway-parts.ts makes it with prepared statements. */
const gatewayPool = (poolMax: number, idleMs = 120_000) =>
  createGatewayDb(
    t.db,
    { gatewayAsyncCommit: false, databasePoolMax: poolMax, gatewayPoolIdleMs: idleMs, databasePreparedStatements: true },
    () => new Date(),
  );

type Pooled = { acquireConnection(): Promise<pg.Client>; releaseConnection(c: pg.Client): Promise<void> };

/** Each of `conn`'s prepared statements, with its custom and generic plans so far. */
async function plansOf(conn: pg.Client): Promise<[string, number, number][]> {
  const { rows } = await conn.query<{ name: string; generic_plans: string; custom_plans: string }>(
    'select name, generic_plans, custom_plans from pg_prepared_statements order by name',
  );
  return rows.map((r) => [r.name, Number(r.custom_plans), Number(r.generic_plans)]);
}

it.skipIf(!preparedStatements || process.env.NEXUS_TEST_DB === 'pglite')(
  "settles each pooled connection on its generic plan of the gateway's named statements, writing nothing",
  async () => {
    const rowsBefore = await Promise.all(WRITTEN.map((table) => t.db(table).count({ n: '*' }).first()));
    const { db } = gatewayPool(3);
    try {
      expect(await openConnections(db, 3)).toBe(3);

      // The pool's three connections, each asked what it has prepared.
      const client = db.client as Pooled;
      const held = await Promise.all([0, 1, 2].map(() => client.acquireConnection()));
      try {
        for (const conn of held) {
          // Five plans for the values, then the generic plan kept: a call's execution plans nothing more.
          expect(await plansOf(conn)).toEqual(NAMED.map((name) => [name, 5, 1]));
        }
      } finally {
        await Promise.all(held.map((c) => client.releaseConnection(c)));
      }
      expect(await Promise.all(WRITTEN.map((table) => t.db(table).count({ n: '*' }).first()))).toEqual(rowsBefore);
    } finally {
      await db.destroy();
    }
  },
);

it.skipIf(!preparedStatements || process.env.NEXUS_TEST_DB === 'pglite' || !!process.env.TEST_PGBOUNCER_URL)(
  "has every connection the gateway's pool opens settle on its plans, and keeps it open unused for the idle time given",
  async () => {
    const rowsBefore = await Promise.all(WRITTEN.map((table) => t.db(table).count({ n: '*' }).first()));
    const { db, owned } = gatewayPool(2);
    expect(owned).toBe(true);
    try {
      // No warm-up: a connection opened as a call would open it, the second one while the first is held.
      const client = db.client as Pooled;
      const [a, b] = [await client.acquireConnection(), await client.acquireConnection()];
      try {
        for (const conn of [a, b]) expect(await plansOf(conn)).toEqual(NAMED.map((name) => [name, 5, 1]));
      } finally {
        await Promise.all([a, b].map((c) => client.releaseConnection(c)));
      }
      // Closed only after the idle time given (knex's default is 30 s): a pool opened again pays the plans again.
      expect((db.client as unknown as { pool: { idleTimeoutMillis: number } }).pool.idleTimeoutMillis).toBe(120_000);
      expect(await Promise.all(WRITTEN.map((table) => t.db(table).count({ n: '*' }).first()))).toEqual(rowsBefore);
    } finally {
      await db.destroy();
    }
  },
);

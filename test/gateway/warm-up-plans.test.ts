import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createAuthRepo } from '../../src/gateway/auth-repo.js';
import { openConnections } from '../../src/gateway/warm-up.js';
import { createCallRepo } from '../../src/records/call-repo.js';
import { createTestDatabase, preparedStatements, type TestDatabase } from '../support/test-db.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ poolMax: 3 });
});
afterAll(() => t.drop());

const WRITTEN = ['invocations', 'usage_events', 'lease_calls', 'quota_leases', 'usage_rollups', 'events'];

it.skipIf(!preparedStatements || process.env.NEXUS_TEST_DB === 'pglite')(
  "settles each pooled connection on its generic plan of the gateway's named statements, writing nothing",
  async () => {
    const now = new Date();
    const statements = [...createAuthRepo(t.db).idleStatements(now), ...createCallRepo(t.db).idleStatements(now)];
    const rowsBefore = await Promise.all(WRITTEN.map((table) => t.db(table).count({ n: '*' }).first()));

    expect(await openConnections(t.db, 3, statements)).toBe(3);

    // The pool's three connections, each asked what it has prepared.
    const client = t.db.client as { acquireConnection(): Promise<pg.Client>; releaseConnection(c: pg.Client): Promise<void> };
    const held = await Promise.all([0, 1, 2].map(() => client.acquireConnection()));
    try {
      for (const conn of held) {
        const { rows } = await conn.query<{ name: string; generic_plans: string; custom_plans: string }>(
          'select name, generic_plans, custom_plans from pg_prepared_statements order by name',
        );
        expect(rows.map((r) => r.name)).toEqual(['nexus_heartbeat', 'nexus_key_lookup', 'nexus_record_calls', 'nexus_snapshot']);
        // Five plans for the values, then the generic plan kept: a call's execution plans nothing more.
        for (const r of rows) expect([r.name, Number(r.custom_plans), Number(r.generic_plans)]).toEqual([r.name, 5, 1]);
      }
    } finally {
      await Promise.all(held.map((c) => client.releaseConnection(c)));
    }
    expect(await Promise.all(WRITTEN.map((table) => t.db(table).count({ n: '*' }).first()))).toEqual(rowsBefore);
  },
);

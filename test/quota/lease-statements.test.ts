/**
 * A lease's acquisition, extension and release (src/domain/quota/lease-sql.ts) as the gateway sends them, named
 * statements (prepared once per connection), and as they go behind a transaction pooler (unnamed): the same answers
 * and the same rows, on twin accesses. Only a repository told so names them; unnamed, no connection keeps them.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaRepo } from '../../src/domain/quota/quota-repo.js';
import type { Services } from '../../src/domain/services.js';
import { newId } from '../../src/ids.js';
import { createTestDatabase, preparedStatements, type TestDatabase } from '../support/test-db.js';
import { provisionAccess, servicesFor } from './quota-fixture.js';

let database: TestDatabase;
let services: Services;

beforeAll(async () => {
  database = await createTestDatabase({ poolMax: 2 });
  services = servicesFor(database, { now: () => new Date() });
});
afterAll(async () => {
  await database?.drop();
});

const HOUR = 3_600_000;

/** A lease of 10 units on the access's period, held for an hour from `now`. */
function tenUnits(period: { id: string; workspace_id: string; workspace_access_id: string }, leaseId: string, now: Date) {
  return {
    id: leaseId,
    workspaceId: period.workspace_id,
    accessId: period.workspace_access_id,
    periodId: period.id,
    need: 10n,
    want: 10n,
    share: 1,
    requestId: 'test',
    now,
    expiresAt: new Date(now.getTime() + HOUR),
  };
}

/**
 * An access with 1,000 units, a lease of 10 of them acquired, then extended by `extend`'s ask: the answer and the rows
 * after it, and after the lease's release.
 */
async function extended(
  prepared: boolean,
  name: string,
  extend: (now: Date, periodEnd: Date) => { need: bigint; want: bigint; now: Date },
  options: { released?: boolean } = {},
) {
  const { period } = await provisionAccess(services, { quotaUnits: '1000' }, `ext-${name}-${prepared}`);
  const now = new Date();
  const repo = createQuotaRepo(database.db, prepared);
  const leaseId = newId();
  const acquired = await repo.acquireLease(tenUnits(period, leaseId, now));
  expect(acquired).toEqual({ held: 10n, remaining: 990n, available: 990n });
  if (options.released) await repo.releaseLease(leaseId, now);
  const target = { leaseId, accessId: period.workspace_access_id, periodId: period.id };
  const ask = extend(now, period.period_end);
  const expiresAt = new Date(ask.now.getTime() + 2 * HOUR);
  const answer = await repo.extendLease({ ...target, ...ask, share: 8, expiresAt });
  const lease = await database.db('quota_leases').where({ id: leaseId }).first('reserved_units', 'status', 'expires_at');
  const row = await database.db('quota_periods').where({ id: period.id }).first('reserved_units', 'consumed_units', 'granted_units');
  const after = {
    answer,
    lease: { ...lease, renewed: lease.expires_at.getTime() === expiresAt.getTime(), expires_at: undefined },
    row,
  };
  // Released: what it holds goes back to its period.
  await repo.releaseLease(leaseId, ask.now);
  const released = await database.db('quota_periods').where({ id: period.id }).first('reserved_units');
  const status = (await database.db('quota_leases').where({ id: leaseId }).first('status')).status;
  return { ...after, released: { reserved_units: released.reserved_units, status } };
}

const cases: [string, Parameters<typeof extended>[2], { released?: boolean }?][] = [
  // 990 available: at least 5, up to 200 while that is at most an eighth of it (123).
  ['grows by an eighth of what the period has', (now) => ({ need: 5n, want: 200n, now })],
  ['grows by what it wants, when that is less', (now) => ({ need: 5n, want: 40n, now })],
  ['is refused beyond what the period has', (now) => ({ need: 2_000n, want: 2_000n, now })],
  ['renews its expiry with nothing to add', (now) => ({ need: 0n, want: 0n, now })],
  ['answers its period over once it ended', (_now, end) => ({ need: 5n, want: 40n, now: end })],
  ['answers a lease no longer HELD', (now) => ({ need: 5n, want: 40n, now }), { released: true }],
];

describe('a lease acquired, extended and released, named and unnamed', () => {
  it.each(cases)('%s: the same answer and rows either way', async (name, extend, options) => {
    const named = await extended(true, name.slice(0, 12), extend, options);
    const unnamed = await extended(false, name.slice(0, 12), extend, options);
    expect(named).toEqual(unnamed);
  });

  it('acquires, holds at least the need, at most an eighth of what is available, and renews the expiry', async () => {
    const { answer, lease, row, released } = await extended(true, 'figures', (now) => ({ need: 5n, want: 200n, now }));
    expect(answer).toEqual({ leased: true, held: 123n, remaining: 990n - 123n, available: 990n - 123n });
    expect(lease).toMatchObject({ reserved_units: 133n, status: 'HELD', renewed: true });
    expect(row.reserved_units).toBe(133n);
    expect(released).toEqual({ reserved_units: 0n, status: 'RELEASED' });
    const refused = await extended(true, 'refused', (now) => ({ need: 2_000n, want: 2_000n, now }));
    expect(refused.answer).toEqual({ leased: true, held: null, remaining: null, available: 990n, periodOver: false });
    expect(refused.lease).toMatchObject({ reserved_units: 10n, renewed: false });
  });

  it('run in the transaction a repository is made over, named or not, and leave nothing once it rolls back', async () => {
    const { period } = await provisionAccess(services, { quotaUnits: '1000' }, 'in-a-transaction');
    for (const prepared of [true, false]) {
      const leaseId = newId();
      const now = new Date();
      const rolledBack = new Error('rolled back');
      await expect(
        database.db.transaction(async (trx) => {
          const held = await createQuotaRepo(trx, prepared).acquireLease(tenUnits(period, leaseId, now));
          expect(held.held).toBe(10n);
          // Seen inside the transaction, as its own write.
          expect(await trx('quota_leases').where({ id: leaseId }).first('status')).toEqual({ status: 'HELD' });
          throw rolledBack;
        }),
      ).rejects.toBe(rolledBack);
      expect(await database.db('quota_leases').where({ id: leaseId }).first()).toBeUndefined();
      expect((await database.db('quota_periods').where({ id: period.id }).first('reserved_units')).reserved_units).toBe(0n);
    }
  });

  it.skipIf(!preparedStatements || process.env.NEXUS_TEST_DB === 'pglite')(
    'are prepared on the connection only when the repository is told so',
    async () => {
      const client = database.db.client as { acquireConnection(): Promise<pg.Client>; releaseConnection(c: pg.Client): Promise<void> };
      /** Runs `sql` on each of the pool's two connections (both held at once): the names they have prepared. */
      const onEach = async (sql: string) => {
        const held = await Promise.all([0, 1].map(() => client.acquireConnection()));
        try {
          const names = await Promise.all(held.map(async (conn) => (await conn.query<{ name: string }>(sql)).rows.map((r) => r.name)));
          return [...new Set(names.flat())].sort();
        } finally {
          await Promise.all(held.map((conn) => client.releaseConnection(conn)));
        }
      };
      const prepared = () => onEach("select name from pg_prepared_statements where name like 'nexus_%_lease'");
      // Fresh connections (pg remembers what it prepared on each: a DEALLOCATE behind its back would break it).
      await database.db.destroy();
      database.db.initialize();
      await extended(false, 'unnamed', (now) => ({ need: 5n, want: 40n, now }));
      expect(await prepared()).toEqual([]);
      await extended(true, 'named', (now) => ({ need: 5n, want: 40n, now }));
      expect(await prepared()).toEqual(['nexus_acquire_lease', 'nexus_extend_lease', 'nexus_release_lease']);
    },
  );
});

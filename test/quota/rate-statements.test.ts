/**
 * A rate allowance's grant and give-back (src/domain/rate-limits/rate-sql.ts) as the gateway sends them, named
 * statements (prepared once per connection), and as they go behind a transaction pooler (unnamed): the same answers
 * and the same rows, step for step, on twin accesses. Only a repository told so names them; the statements a new
 * gateway connection settles on write nothing.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { namedQuery } from '../../src/db/named-query.js';
import { createRateRepo } from '../../src/domain/rate-limits/rate-repo.js';
import { rateIdleStatements } from '../../src/domain/rate-limits/rate-sql.js';
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

const T0 = Date.parse('2026-12-01T00:00:00Z');

const ask = (need: number, want: number, limit: number | null) => ({ need, want, limit });

/**
 * One process's grants and give-backs on a new access, each at its own instant: the answers, and the access's window
 * and allowances after each (without their ids, which differ between the twins).
 */
async function steps(prepared: boolean, name: string) {
  const { access, workspace } = await provisionAccess(services, { quotaUnits: '1000' }, `rate-${name}-${prepared}`);
  const repo = createRateRepo(database.db, prepared);
  const id = newId();
  const target = { id, workspaceId: workspace.id, accessId: access.id, holdMs: 1000, share: 8 };
  const rows = async () => ({
    window: await database
      .db('rate_windows')
      .where({ workspace_access_id: access.id })
      .first('requests_tat', 'requests_limit', 'tokens_tat', 'tokens_limit', 'concurrent'),
    allowances: await database.db('rate_allowances').where({ workspace_access_id: access.id }).select('concurrent', 'expires_at'),
  });
  const take = (at: number, requests: number, tokens: number, slots: number, limits: [number, number, number] = [100, 10_000, 10]) =>
    repo.take({
      ...target,
      nowMs: T0 + at,
      requests: ask(requests, requests * 50, limits[0]),
      tokens: ask(tokens, tokens * 50, limits[1]),
      concurrent: ask(slots, slots * 4, limits[2]),
      expiresAt: new Date(T0 + at + 60_000),
    });
  const giveBack = (at: number, requests: number, tokens: number, concurrent: number, limits = { requests: 100, tokens: 10_000 }) =>
    repo.giveBack({ id, accessId: access.id, nowMs: T0 + at, requests, tokens, concurrent, limits });
  const seen: unknown[] = [];
  const step = async (what: Promise<unknown>) => seen.push({ answer: await what, ...(await rows()) });
  await step(take(0, 1, 100, 1)); // the window made on first use
  await step(take(10, 1, 100, 1));
  await step(take(20, 200, 100, 1)); // more requests than the limit: nothing granted
  await step(giveBack(30, 5, 100, 1));
  await step(take(40, 1, 100, 1, [50, 10_000, 10])); // the plan's limits changed: the schedule rescaled
  await step(giveBack(50, 0, 0, 99, { requests: 50, tokens: 10_000 })); // more slots than held: what the row holds
  await step(take(60, 1, 100, 0, [100, 10_000, 0])); // no slot to give
  return seen;
}

describe("a rate allowance's grant and give-back, named and unnamed", () => {
  it('give the same answers and rows at each step', async () => {
    const named = await steps(true, 'twin');
    const unnamed = await steps(false, 'twin');
    expect(named).toEqual(unnamed);
    // The steps did what they say: a grant, a refusal, a give-back of what is held and no more.
    const answers = named.map((s) => (s as { answer: unknown }).answer) as ({ granted: unknown } | undefined)[];
    expect(answers[0]!.granted).toMatchObject({ requests: expect.any(Number), concurrent: expect.any(Number) });
    expect(answers[2]!.granted).toBeNull();
    const last = named.at(-1) as { window: { concurrent: number }; allowances: unknown[] };
    expect(last.window.concurrent).toBe(0);
    expect(last.allowances).toEqual([]);
  });

  it('write nothing as a new connection settles on their plans', async () => {
    const before = await database.db('rate_windows').count({ n: '*' }).first();
    const query = namedQuery(database.db, preparedStatements);
    for (const s of rateIdleStatements(new Date())) for (let i = 0; i < 6; i++) await query(s.name, s.text, s.values);
    expect(await database.db('rate_windows').count({ n: '*' }).first()).toEqual(before);
    expect(
      await database.db('rate_allowances').where({ workspace_access_id: '00000000-0000-0000-0000-000000000000' }).first(),
    ).toBeUndefined();
  });

  it.skipIf(!preparedStatements || process.env.NEXUS_TEST_DB === 'pglite')(
    'are prepared on the connection only when the repository is told so',
    async () => {
      const client = database.db.client as { acquireConnection(): Promise<pg.Client>; releaseConnection(c: pg.Client): Promise<void> };
      /** The names prepared on each of the pool's two connections (both held at once). */
      const prepared = async () => {
        const held = await Promise.all([0, 1].map(() => client.acquireConnection()));
        try {
          const sql = "select name from pg_prepared_statements where name like 'nexus_%_allowance'";
          const names = await Promise.all(held.map(async (conn) => (await conn.query<{ name: string }>(sql)).rows.map((r) => r.name)));
          return [...new Set(names.flat())].sort();
        } finally {
          await Promise.all(held.map((conn) => client.releaseConnection(conn)));
        }
      };
      // Fresh connections (pg remembers what it prepared on each: a DEALLOCATE behind its back would break it).
      await database.db.destroy();
      database.db.initialize();
      await steps(false, 'unnamed');
      expect(await prepared()).toEqual([]);
      await steps(true, 'named');
      expect(await prepared()).toEqual(['nexus_give_back_allowance', 'nexus_take_allowance']);
    },
  );
});

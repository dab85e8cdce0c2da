/**
 * rowBatches (src/db/row-batches.ts), what the usage export by day and user reads its rows with: a statement's rows in
 * batches as PostgreSQL sends them, in a transaction of its own, its connection given back to the pool whether the
 * rows are read to the end, left half-way or the statement fails.
 */
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowBatches } from '../../src/db/row-batches.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ poolMax: 2 });
});
afterAll(() => t.drop());

const pg = process.env.NEXUS_TEST_DB !== 'pglite';
const SERIES = `select n::text as n, :label::text as label, (n * 3)::text as tripled from generate_series(1, :count) n`;
const LOCAL = `select set_config('enable_hashagg', 'off', true)`;

async function all(batches: AsyncIterable<unknown[][]>): Promise<unknown[][][]> {
  const out: unknown[][][] = [];
  for await (const batch of batches) out.push(batch);
  return out;
}

/** The pool's connections in use (knex's tarn pool). */
const used = (db: Knex) => (db.client as { pool: { numUsed(): number } }).pool.numUsed();

describe.skipIf(!pg)('rowBatches', () => {
  it('gives the rows in order as arrays, in batches of the size asked, the last one short', async () => {
    const batches = await all(await rowBatches(t.db, SERIES, { label: 'x', count: 1000 }, LOCAL, 256));
    expect(batches.map((b) => b.length)).toEqual([256, 256, 256, 232]);
    const rows = batches.flat();
    expect(rows[0]).toEqual(['1', 'x', '3']);
    expect(rows.at(-1)).toEqual(['1000', 'x', '3000']);
    expect(rows).toEqual(
      ((await t.db.raw(SERIES, { label: 'x', count: 1000 })).rows as { n: string; label: string; tripled: string }[]).map((r) => [
        r.n,
        r.label,
        r.tripled,
      ]),
    );
    expect(used(t.db)).toBe(0);
  });

  it('runs after its settings, local to its transaction, and leaves the connection as it found it', async () => {
    const batches = await all(
      await rowBatches(t.db, `select current_setting('enable_hashagg') as s, now() = statement_timestamp() as fresh`, {}, LOCAL, 10),
    );
    expect(batches).toEqual([[['off', false]]]);
    const after = await t.db.transaction(async (trx) => (await trx.raw(`select current_setting('enable_hashagg') as s`)).rows[0].s);
    expect(after).toBe('on');
  });

  it('gives no batch for no row', async () => {
    expect(await all(await rowBatches(t.db, SERIES, { label: 'x', count: 0 }, LOCAL, 10))).toEqual([]);
    expect(used(t.db)).toBe(0);
  });

  it("throws a statement's failure before any row, and gives its connection back", async () => {
    await expect(rowBatches(t.db, `select 1 / (n - n) from generate_series(1, 3) n`, {}, LOCAL, 10)).rejects.toThrow(/division by zero/);
    expect(used(t.db)).toBe(0);
    await expect(rowBatches(t.db, 'select 1', {}, `select no_such_function()`, 10)).rejects.toThrow(/no_such_function/);
    expect(used(t.db)).toBe(0);
  });

  it('throws a failure after some rows once the rows before it are read', async () => {
    const batches = await rowBatches(t.db, `select 10 / (3 - n) from generate_series(1, 5000) n`, {}, LOCAL, 1);
    const read: unknown[][] = [];
    await expect(
      (async () => {
        for await (const batch of batches) read.push(...batch);
      })(),
    ).rejects.toThrow(/division by zero/);
    expect(read).toEqual([[5], [10]]);
    expect(used(t.db)).toBe(0);
  });

  it('a reader that stops half-way leaves the rest to be read and dropped, and the connection goes back', async () => {
    const batches = await rowBatches(t.db, SERIES, { label: 'x', count: 100_000 }, LOCAL, 100);
    for await (const batch of batches) {
      expect(batch).toHaveLength(100);
      break;
    }
    await expect.poll(() => used(t.db), { timeout: 10_000 }).toBe(0);
    // Both of the pool's connections are free to use.
    await Promise.all([t.db.raw('select pg_sleep(0.05)'), t.db.raw('select pg_sleep(0.05)')]);
  });
});

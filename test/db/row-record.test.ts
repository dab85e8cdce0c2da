/**
 * A call's rows as elements of the record statement's arrays (src/db/row-record.ts): each field quoted for record_in
 * when it must be, and escaped again as the array's element. PostgreSQL reads them back as they were written.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { recordArray, recordElement } from '../../src/db/row-record.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase({ poolMax: 1 });
  await database.db.raw('create type row_record_probe as (t text, n numeric, b boolean, at timestamptz, j jsonb)');
});
afterAll(async () => {
  await database?.drop();
});

const COLUMNS = ['t', 'n', 'b', 'at', 'j'];
const texts = ['plain', '', 'two words', 'a "quoted" word', 'back\\slash', 'comma, (parens)', 'tab\tand\nline', '\\"', 'é 世界'];

it('writes each field as record_in and the array read it, quotes and backslashes escaped twice', () => {
  const at = new Date(Date.UTC(2026, 11, 7, 14, 0, 0, 5));
  expect(recordElement(COLUMNS, { t: 'plain', n: 12n, b: true, at, j: null })).toBe('"(plain,12,true,2026-12-07T14:00:00.005Z,)"');
  expect(recordElement(COLUMNS, { t: 'a "b" \\c', n: 1.5, b: false, at: null, j: { k: 'v' } })).toBe(
    '"(\\"a \\\\\\"b\\\\\\" \\\\\\\\c\\",1.5,false,,\\"{\\\\\\"k\\\\\\":\\\\\\"v\\\\\\"}\\")"',
  );
  expect(recordElement(COLUMNS, { t: '', n: Number.NaN, b: undefined, at: undefined, j: [] })).toBe('"(\\"\\",,,,)"');
});

it('is read back by PostgreSQL as it was written', async () => {
  const rows = texts.map((t, i) => ({ t, n: BigInt(i), b: i % 2 === 0, at: new Date(1_700_000_000_000 + i), j: { t, i } }));
  const { rows: read } = await database.db.raw<{ rows: { t: string; n: string; b: boolean; at: Date; j: unknown }[] }>(
    'select (r).* from unnest(cast(? as row_record_probe[])) r',
    [recordArray(rows.map((r) => recordElement(COLUMNS, r)))],
  );
  expect(read.map((r) => ({ ...r, n: BigInt(r.n) }))).toEqual(rows);
});

/**
 * The record statement reads a call's rows by position (src/db/row-record.ts): the attributes of the composite types
 * the migrations make must be the columns the code writes, in the same order, or a row's fields would land in other
 * columns. A column added to one and not the other fails here.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { INVOCATION_COLUMNS } from '../../src/domain/recording/record-sql.js';
import { LEASE_CALL_COLUMNS } from '../../src/domain/recording/settlement-sql.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase({ poolMax: 1 });
});
afterAll(async () => {
  await database?.drop();
});

async function attributes(type: string): Promise<string[]> {
  const { rows } = await database.db.raw<{ rows: { attname: string }[] }>(
    // The type as the schema's search path finds it (each test file has a schema of its own).
    `select attname from pg_attribute
      where attrelid = (select typrelid from pg_type where oid = to_regtype(?)) and attnum > 0 and not attisdropped
      order by attnum`,
    [type],
  );
  return rows.map((r) => r.attname);
}

it("has the record statement's input types in the order the code writes their fields", async () => {
  expect(await attributes('nexus_invocation_input')).toEqual([...INVOCATION_COLUMNS]);
  expect(await attributes('nexus_lease_call_input')).toEqual([...LEASE_CALL_COLUMNS]);
});

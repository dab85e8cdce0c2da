/**
 * A fresh database per test file: its own schema on the real PostgreSQL (migrated,
 * dropped at the end), or an in-memory PGlite when none answered in global setup.
 */
import { randomBytes } from 'node:crypto';
import { createDatabase, type Db } from '../../src/db/database.js';
import { migrateLatest } from '../../src/db/migrate.js';

export interface TestDatabase {
  db: Db;
  url: string | undefined;
  schema: string | undefined;
  drop(): Promise<void>;
}

export async function createTestDatabase(options: { poolMax?: number } = {}): Promise<TestDatabase> {
  if (process.env.NEXUS_TEST_DB === 'pglite') {
    const db = createDatabase({ databaseUrl: undefined });
    await migrateLatest(db);
    return { db, url: undefined, schema: undefined, drop: () => db.destroy() };
  }
  const url = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const db = createDatabase({ databaseUrl: url, schema, poolMax: options.poolMax ?? 10 });
  await migrateLatest(db, schema);
  return {
    db,
    url,
    schema,
    async drop() {
      await db.raw('drop schema if exists ?? cascade', [schema]).catch(() => {});
      await db.destroy();
    },
  };
}

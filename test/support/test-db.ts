/**
 * A clean database per test file: a migrated schema of its own on the real PostgreSQL,
 * or an in-memory PGlite when none answered in global setup.
 *
 * Migrating costs far more than emptying, so a worker keeps the schemas its files gave
 * back: drop() empties every table (TRUNCATE ... RESTART IDENTITY; no migration seeds
 * rows), renames the schema and keeps it for the next createTestDatabase() in that worker. Where
 * vitest shares modules between files (the api project, isolate: false) the next file
 * gets it; elsewhere the module is fresh per file and each file migrates its own. The
 * schemas carry the run's name (NEXUS_TEST_RUN, set in global setup), which drops them
 * all at its end.
 *
 * Through PgBouncer (TEST_PGBOUNCER_URL, set by scripts/pgbouncer-tests.sh): a
 * database of its own instead of a schema, since a schema is chosen per session
 * (search_path) and a pooler in transaction mode keeps no session. It is created
 * and migrated over the direct connection (DDL does not go through the pooler) and
 * served through PgBouncer; `url` names it there.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDatabase, type Db } from '../../src/db/database.js';
import { migrateLatest } from '../../src/db/migrate.js';

/** Whether the run's gateway statements are prepared by name (NEXUS_DATABASE_PREPARED_STATEMENTS, for a pooler). */
export const preparedStatements = process.env.NEXUS_DATABASE_PREPARED_STATEMENTS !== 'false';

export interface TestDatabase {
  db: Db;
  url: string | undefined;
  schema: string | undefined;
  /** Through PgBouncer: the same database straight to PostgreSQL, for what needs a session (NEXUS_DATABASE_LISTEN_URL). */
  directUrl?: string | undefined;
  drop(): Promise<void>;
}

/** Runs one statement on its own connection (CREATE/DROP DATABASE cannot run in a pool's transaction). */
async function direct(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Schemas this worker migrated and a file gave back, emptied, for the next file. */
const spare: string[] = [];

/** The prefix of this run's schemas (global setup drops them at the end). */
export function runSchemaPrefix(): string {
  return `t_${process.env.NEXUS_TEST_RUN ?? 'local'}_`;
}

/** Every table but the migrator's, emptied, counters restarted: a just-migrated schema again. */
async function empty(db: Db, schema: string): Promise<void> {
  const rows = await db('pg_tables')
    .where({ schemaname: schema })
    .whereNotIn('tablename', ['knex_migrations', 'knex_migrations_lock'])
    .select<{ tablename: string }[]>('tablename');
  if (!rows.length) return;
  const tables = rows.map((r) => `"${schema}"."${r.tablename}"`).join(', ');
  await db.raw(`truncate ${tables} restart identity cascade`);
}

export async function createTestDatabase(options: { poolMax?: number } = {}): Promise<TestDatabase> {
  if (process.env.NEXUS_TEST_DB === 'pglite') {
    const db = createDatabase({ databaseUrl: undefined });
    await migrateLatest(db);
    return { db, url: undefined, schema: undefined, drop: () => db.destroy() };
  }
  const url = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const pooler = process.env.TEST_PGBOUNCER_URL;
  if (pooler) {
    const name = `t_${randomBytes(6).toString('hex')}`;
    await direct(url, `create database "${name}"`);
    const migrator = createDatabase({ databaseUrl: withDatabase(url, name), poolMax: 1 });
    try {
      await migrateLatest(migrator);
    } finally {
      await migrator.destroy();
    }
    const pooled = withDatabase(pooler, name);
    const db = createDatabase({ databaseUrl: pooled, poolMax: options.poolMax ?? 10 });
    return {
      db,
      url: pooled,
      schema: undefined,
      directUrl: withDatabase(url, name),
      async drop() {
        await db.destroy();
        // PgBouncer still holds server connections to it: WITH (FORCE) ends them.
        await direct(url, `drop database if exists "${name}" with (force)`).catch(() => {});
      },
    };
  }
  const reused = spare.pop();
  const schema = reused ?? `${runSchemaPrefix()}${randomBytes(6).toString('hex')}`;
  const db = createDatabase({ databaseUrl: url, schema, poolMax: options.poolMax ?? 10 });
  if (!reused) await migrateLatest(db, schema);
  let dropped = false;
  return {
    db,
    url,
    schema,
    async drop() {
      if (dropped) return;
      dropped = true;
      try {
        await empty(db, schema);
        // Under a new name: whatever of the file outlived it (a timer, a pool another app opened) finds
        // no tables by the old name, as if the schema were dropped, instead of writing into the next file's.
        const renamed = `${runSchemaPrefix()}${randomBytes(6).toString('hex')}`;
        await db.raw('alter schema ?? rename to ??', [schema, renamed]);
        spare.push(renamed);
      } catch {
        await db.raw('drop schema if exists ?? cascade', [schema]).catch(() => {});
      } finally {
        await db.destroy();
      }
    },
  };
}

/**
 * A clean database per test file: a migrated schema of its own on the real PostgreSQL,
 * or an in-memory PGlite when none answered in global setup.
 *
 * Migrating (seconds) costs far more than emptying, so the run keeps the schemas its files
 * gave back: drop() empties every table (TRUNCATE ... RESTART IDENTITY; no migration seeds
 * rows) and renames the schema a spare's name; the next createTestDatabase(), in any worker
 * or project of the run, claims a spare by renaming it to a name of its own (of two claims at
 * once, one finds the name gone and tries the next) and migrates only when none is left. So
 * a run migrates about as many schemas as files run at once, not one per file. The schemas
 * carry the run's name (NEXUS_TEST_RUN, set in global setup), which drops them all at its end.
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

/** The prefix of this run's schemas (global setup drops them at the end). */
export function runSchemaPrefix(): string {
  return `t_${process.env.NEXUS_TEST_RUN ?? 'local'}_`;
}

/** The prefix of the run's spare schemas: migrated, emptied, given back by a file that ended. */
const sparePrefix = () => `${runSchemaPrefix()}spare_`;

/**
 * A spare schema claimed for `schema` (renamed to it), on a connection of its own: the pool's connections create
 * their schema when they open. False when none is left, so the caller migrates one.
 */
async function claimSpare(url: string, schema: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const like = `${sparePrefix().replaceAll('_', '\\_')}%`;
    const { rows } = await client.query<{ nspname: string }>('select nspname from pg_namespace where nspname like $1', [like]);
    // In no particular order, so that files claiming at once mostly try different ones.
    rows.sort(() => Math.random() - 0.5);
    for (const { nspname } of rows) {
      try {
        await client.query(`alter schema "${nspname}" rename to "${schema}"`);
        return true;
      } catch {
        // Another file claimed it first.
      }
    }
    return false;
  } finally {
    await client.end();
  }
}

/**
 * Every table but the migrator's, emptied, counters restarted: a just-migrated schema again. The history tables
 * refuse TRUNCATE (their append-only triggers): triggers are off for this one transaction (the test user is a
 * superuser), as they would be for a replication's apply.
 */
async function empty(db: Db, schema: string): Promise<void> {
  const rows = await db('pg_tables')
    .where({ schemaname: schema })
    .whereNotIn('tablename', ['knex_migrations', 'knex_migrations_lock'])
    .select<{ tablename: string }[]>('tablename');
  if (!rows.length) return;
  const tables = rows.map((r) => `"${schema}"."${r.tablename}"`).join(', ');
  await db.transaction(async (tx) => {
    await tx.raw('set local session_replication_role = replica');
    await tx.raw(`truncate ${tables} restart identity cascade`);
  });
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
  const schema = `${runSchemaPrefix()}${randomBytes(6).toString('hex')}`;
  const claimed = await claimSpare(url, schema);
  const db = createDatabase({ databaseUrl: url, schema, poolMax: options.poolMax ?? 10 });
  if (!claimed) await migrateLatest(db, schema);
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
        // Under a spare's name: whatever of the file outlived it (a timer, a pool another app opened, a process)
        // finds no tables by the old name, as if the schema were dropped, instead of writing into the next file's.
        await db.raw('alter schema ?? rename to ??', [schema, `${sparePrefix()}${randomBytes(6).toString('hex')}`]);
      } catch {
        await db.raw('drop schema if exists ?? cascade', [schema]).catch(() => {});
      } finally {
        await db.destroy();
      }
    },
  };
}

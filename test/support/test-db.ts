/**
 * A clean database per test file: a migrated schema of its own on the real PostgreSQL,
 * or an in-memory PGlite when none answered in global setup.
 *
 * The schema is a copy of the run's migrated template (test/support/schema-template.ts), made in one
 * transaction instead of running every migration again; it is dropped when the file gives it back.
 * The schemas carry the run's name (NEXUS_TEST_RUN, set in global setup), which drops whatever is
 * left of them at its end.
 *
 * Through PgBouncer (TEST_PGBOUNCER_URL, set by scripts/pgbouncer-tests.sh): a
 * database of its own instead of a schema, since a schema is chosen per session
 * (search_path) and a pooler in transaction mode keeps no session. It is created
 * and filled from the template (or migrated) over the direct connection (DDL does not go
 * through the pooler) and served through PgBouncer; `url` names it there.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDatabase, type Db } from '../../src/db/database.js';
import { migrateLatest } from '../../src/db/migrate.js';
import { copySchema, schemaTemplate } from './schema-template.js';

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
    const template = await schemaTemplate(url, runSchemaPrefix());
    if (template) await copySchema(withDatabase(url, name), template, runSchemaPrefix(), 'public');
    else {
      const migrator = createDatabase({ databaseUrl: withDatabase(url, name), poolMax: 1 });
      try {
        await migrateLatest(migrator);
      } finally {
        await migrator.destroy();
      }
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
  const prefix = runSchemaPrefix();
  const schema = `${prefix}${randomBytes(6).toString('hex')}`;
  const template = await schemaTemplate(url, prefix);
  if (template) await copySchema(url, template, prefix, schema);
  const db = createDatabase({ databaseUrl: url, schema, poolMax: options.poolMax ?? 10 });
  if (!template) await migrateLatest(db, schema);
  let dropped = false;
  return {
    db,
    url,
    schema,
    async drop() {
      if (dropped) return;
      dropped = true;
      try {
        await db.raw('drop schema if exists ?? cascade', [schema]).catch(() => {});
      } finally {
        await db.destroy();
      }
    },
  };
}

/**
 * Migrations are the files in migrations/ (timestamp_name.ts), applied in name
 * order by knex. The same files run on PostgreSQL and PGlite.
 *
 * From source (tsx) they are migrations/*.ts; compiled (dist/db/migrate.js), they are
 * dist/migrations/*.js. Either way a migration is named by its source file, the name knex
 * records in knex_migrations, so a database migrated by one layout is up to date for the other.
 */
import type { Knex } from 'knex';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Db } from './database.js';

const here = dirname(fileURLToPath(import.meta.url));
const compiled = import.meta.url.endsWith('.js');
const migrationsDir = compiled ? join(here, '..', 'migrations') : join(here, '..', '..', 'migrations');
const extension = compiled ? '.js' : '.ts';
const migrationFile = /^\d{14}_[a-z0-9_]+$/;

interface Migration {
  up(knex: Knex): Promise<void>;
  down?(knex: Knex): Promise<void>;
}

/** The migrations, or those up to and including `until` (a migration's name without its extension). */
const sourceUntil = (until?: string): Knex.MigrationSource<string> => ({
  async getMigrations() {
    return readdirSync(migrationsDir)
      .filter((f) => f.endsWith(extension) && migrationFile.test(f.slice(0, -extension.length)))
      .map((f) => f.slice(0, -extension.length))
      .filter((name) => until === undefined || name <= until)
      .map((name) => `${name}.ts`)
      .sort();
  },
  getMigrationName(name) {
    return name;
  },
  async getMigration(name): Promise<Knex.Migration> {
    const file = join(migrationsDir, `${name.slice(0, -'.ts'.length)}${extension}`);
    const mod = (await import(pathToFileURL(file).href)) as Migration;
    return { up: mod.up, down: mod.down ?? (async () => {}) };
  },
});

function migrationConfig(schema?: string, until?: string): Knex.MigratorConfig {
  return { migrationSource: sourceUntil(until), schemaName: schema, tableName: 'knex_migrations' };
}

/** Applies the pending migrations (with `until`, those up to it: a test of a later migration's conversion). */
export async function migrateLatest(db: Db, schema?: string, until?: string): Promise<string[]> {
  if (schema) await db.raw('create schema if not exists ??', [schema]);
  const [, applied] = (await db.migrate.latest(migrationConfig(schema, until))) as [number, string[]];
  return applied;
}

/** Pending migrations, for /readyz. */
export async function pendingMigrations(db: Db, schema?: string): Promise<number> {
  const [, pending] = (await db.migrate.list(migrationConfig(schema))) as [unknown[], unknown[]];
  return pending.length;
}

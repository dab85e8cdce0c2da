/**
 * Migrations are the files in migrations/ (timestamp_name.ts), applied in name
 * order by knex. The same files run on PostgreSQL and PGlite.
 */
import type { Knex } from 'knex';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Db } from './database.js';

const migrationsDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'migrations');

interface Migration {
  up(knex: Knex): Promise<void>;
  down?(knex: Knex): Promise<void>;
}

const source: Knex.MigrationSource<string> = {
  async getMigrations() {
    return readdirSync(migrationsDir)
      .filter((f) => /^\d{14}_[a-z0-9_]+\.ts$/.test(f))
      .sort();
  },
  getMigrationName(name) {
    return name;
  },
  async getMigration(name): Promise<Knex.Migration> {
    const mod = (await import(pathToFileURL(join(migrationsDir, name)).href)) as Migration;
    return { up: mod.up, down: mod.down ?? (async () => {}) };
  },
};

export function migrationConfig(schema?: string): Knex.MigratorConfig {
  return { migrationSource: source, schemaName: schema, tableName: 'knex_migrations' };
}

export async function migrateLatest(db: Db, schema?: string): Promise<string[]> {
  if (schema) await db.raw('create schema if not exists ??', [schema]);
  const [, applied] = (await db.migrate.latest(migrationConfig(schema))) as [number, string[]];
  return applied;
}

/** Pending migrations, for /readyz. */
export async function pendingMigrations(db: Db, schema?: string): Promise<number> {
  const [, pending] = (await db.migrate.list(migrationConfig(schema))) as [unknown[], unknown[]];
  return pending.length;
}

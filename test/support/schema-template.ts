/**
 * The migrated schema a test file's own schema is copied from. Migrating runs every file of migrations/, each
 * in a transaction of its own (seconds on a busy 2-core host, paid by every file); the schema they leave, as
 * pg_dump prints it, is replayed in one transaction for a fraction of that.
 *
 * Once per run: the first file that needs a schema, in any worker or project, migrates `t_<run>_template`
 * and has pg_dump print it (tables, indexes, functions, triggers, partitions, sequences and the rows the
 * migrator keeps) into the run's directory; a PostgreSQL advisory lock makes the other workers wait for it and
 * then read the file. Each file then creates a schema of its own from that text, its name put in the
 * template's place: a just-migrated schema, on which nothing of another file ever ran. Where pg_dump is
 * missing or refuses the server (an older major version), undefined: each file migrates its own.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { createDatabase } from '../../src/db/database.js';
import { migrateLatest } from '../../src/db/migrate.js';
import { runDir } from './paths.js';

const run = promisify(execFile);

/** The run's template schema, by the prefix of its schemas (global setup drops them all at the end). */
function templateName(prefix: string): string {
  return `${prefix}template`;
}

let made: Promise<string | undefined> | undefined;

/** The template's text (made on first use in the run), or undefined where pg_dump cannot print it. */
export function schemaTemplate(url: string, prefix: string): Promise<string | undefined> {
  made ??= make(url, templateName(prefix)).catch((err: unknown) => {
    console.warn(`No schema template (each test file migrates its own schema): ${(err as Error).message}`);
    return undefined;
  });
  return made;
}

/**
 * A new schema `schema` in the database at `url`, a copy of the template's structure and migrator rows, in one
 * transaction; `public` (a database of its own, which has it already) is filled instead of created.
 */
export async function copySchema(url: string, template: string, prefix: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const sql = template.replaceAll(templateName(prefix), schema);
    // One simple query: its statements run as one implicit transaction, so a copy is whole or absent.
    await client.query(schema === 'public' ? sql.replace('CREATE SCHEMA public;', '') : sql);
  } finally {
    await client.end();
  }
}

async function make(url: string, name: string): Promise<string> {
  const file = join(runDir, `${name}.sql`);
  if (existsSync(file)) return readFileSync(file, 'utf8');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // Held until this connection ends: another worker that wants the template waits here, then finds the file.
    await client.query('select pg_advisory_lock(hashtext($1))', [name]);
    if (existsSync(file)) return readFileSync(file, 'utf8');
    await client.query(`drop schema if exists "${name}" cascade`);
    const db = createDatabase({ databaseUrl: url, schema: name, poolMax: 1 });
    try {
      await migrateLatest(db, name);
    } finally {
      await db.destroy();
    }
    const { stdout } = await run(
      'pg_dump',
      ['--dbname', url, '--schema', name, '--inserts', '--no-owner', '--no-privileges', '--no-tablespaces'],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    // psql's meta-commands (\restrict and \unrestrict in recent releases) are not SQL.
    const sql = stdout
      .split('\n')
      .filter((line) => !line.startsWith('\\'))
      .join('\n');
    if (!sql.includes('CREATE TABLE') || !sql.includes(name)) throw new Error(`pg_dump printed no schema ${name}`);
    mkdirSync(runDir, { recursive: true });
    writeFileSync(`${file}.${process.pid}`, sql);
    renameSync(`${file}.${process.pid}`, file);
    return sql;
  } finally {
    await client.end();
  }
}

/**
 * Once per run, for all the projects: decide the database (real PostgreSQL, or
 * loudly PGlite), name the run (its test schemas carry the name), clear the run
 * records, and at the end drop the run's schemas, print which admin operations the
 * suite exercised through HTTP with a response that matched the contract and scan
 * every project's records for a leaked provider key.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import pg from 'pg';
import { printContractCoverage } from '../../scripts/test-records.js';
import { findSecretLeaks, recordFiles, SECRET_MARKER } from '../security/secret-marker.js';
import { runDir } from './paths.js';
import { runSchemaPrefix } from './test-db.js';

export const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

export default async function setup() {
  rmSync(runDir, { recursive: true, force: true });
  mkdirSync(runDir, { recursive: true });
  process.env.NEXUS_TEST_RUN ??= randomBytes(4).toString('hex');
  const url = process.env.TEST_DATABASE_URL ?? DEFAULT_TEST_DATABASE_URL;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('select 1');
    process.env.TEST_DATABASE_URL = url;
    process.env.NEXUS_TEST_DB = 'postgres';
  } catch (err) {
    const line = '='.repeat(78);
    console.warn(
      `\n${line}\nNO POSTGRESQL at ${url.replace(/\/\/[^@]*@/, '//***@')} (${(err as Error).message}).\n` +
        `The suite runs on embedded PGlite instead. CI always has PostgreSQL.\n${line}\n`,
    );
    process.env.NEXUS_TEST_DB = 'pglite';
  } finally {
    await client.end().catch(() => {});
  }
  return async () => {
    if (process.env.NEXUS_TEST_DB === 'postgres') await dropRunSchemas(url);
    printContractCoverage();
    // No provider key (tests mark theirs with SECRET_MARKER) may appear in any response body or log line of the run.
    const leaks = findSecretLeaks(recordFiles(runDir));
    if (leaks.length) {
      // vitest reports a teardown error but still exits 0: make the exit code say it too.
      process.exitCode = 1;
      throw new Error(
        `SECRET LEAK: ${leaks.length} record(s) of this run contain a provider key (${SECRET_MARKER}...):\n  ${leaks.join('\n  ')}`,
      );
    }
  };
}

/** The schemas the run's workers kept for reuse (test/support/test-db.ts). */
async function dropRunSchemas(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const prefix = runSchemaPrefix().replaceAll('_', '\\_');
    const { rows } = await client.query<{ nspname: string }>('select nspname from pg_namespace where nspname like $1', [`${prefix}%`]);
    for (const { nspname } of rows) await client.query(`drop schema if exists "${nspname}" cascade`);
  } finally {
    await client.end();
  }
}

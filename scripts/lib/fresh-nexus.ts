/**
 * A Nexus on a fresh database, for the scripts that seed a large workspace and time what reads it
 * (bench-usage.ts, console-scale.ts, bench-rollup.ts): the database is made on DATABASE_URL's server (default the local
 * PostgreSQL), Nexus listens on it in this process with a root key, and both are gone when `run` ends (unless the
 * database is to be kept, or is a kept one: BenchDatabase; BENCH_KEEP_DATABASE=1 keeps any).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { buildApp, listen, type NexusApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROOT_KEY = 'nx-mgmt-bench-root-0123456789abcdefghijklmnop';

export interface FreshNexus {
  /** Where Nexus listens. */
  url: string;
  /** The fresh database, for seeding it directly. */
  databaseUrl: string;
  nexus: NexusApp;
  /** The Management Key Nexus was started with. */
  rootKey: string;
  /** The root key's headers for the Admin API (JSON bodies). */
  headers: Record<string, string>;
}

/** The settings a fresh Nexus runs with on `databaseUrl`: also those of another process of it on the same database. */
export const freshNexusEnv = (databaseUrl: string): Record<string, string> => ({
  NODE_ENV: 'production',
  DATABASE_URL: databaseUrl,
  NEXUS_MANAGEMENT_KEY: ROOT_KEY,
  NEXUS_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
  NEXUS_LOG_LEVEL: 'warn',
});

/** Which database Nexus runs on, when not a fresh one dropped at the end. */
export interface BenchDatabase {
  /** The database's name (default `nexus_bench_<name>_<random>`). */
  name?: string;
  /** It exists already (a kept one, measured again): not made, and migrated to the latest by Nexus's start. */
  existing?: boolean;
  /** Left in place at the end. */
  keep?: boolean;
}

/** `env`: settings beside the defaults below (NEXUS_ALLOW_PRIVATE_UPSTREAMS, say). */
export async function withFreshNexus(
  name: string,
  run: (fresh: FreshNexus) => Promise<void>,
  env: Record<string, string> = {},
  database: BenchDatabase = {},
): Promise<void> {
  const dbName = database.name ?? `nexus_bench_${name}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  if (!database.existing) await admin.query(`create database ${dbName}`);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${dbName}`;
  try {
    const config = loadConfig({
      ...freshNexusEnv(url.toString()),
      HOST: '127.0.0.1',
      PORT: '0',
      ...env,
    });
    const nexus = await buildApp(config, {});
    const server = await listen(nexus, 0, '127.0.0.1', 2000);
    try {
      await run({
        url: server.url,
        databaseUrl: url.toString(),
        nexus,
        rootKey: ROOT_KEY,
        headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
      });
    } finally {
      await server.shutdown();
    }
  } finally {
    // BENCH_KEEP_DATABASE=1 keeps the seeded database for EXPLAIN after the run (named here; drop it by hand).
    const keep = database.keep || process.env.BENCH_KEEP_DATABASE === '1';
    if (keep && !database.existing) console.log(`database kept: ${dbName}`);
    if (!keep && !database.existing) await admin.query(`drop database if exists ${dbName} with (force)`);
    await admin.end();
  }
}

/** The p-th percentile of sorted figures. */
export const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

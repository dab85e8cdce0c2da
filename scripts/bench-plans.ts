/**
 * `npx tsx scripts/bench-plans.ts`: what the gateway's named statements cost PostgreSQL on a fresh connection, the
 * case a fresh process's pool is in (docs/performance.md, "A fresh process"). On a database of its own, migrated, it
 * opens BENCH_PLANS_ROUNDS connections (default 4) in turn and runs each named statement eight times on each, with
 * the values the warm-up runs them with (src/gateway/warm-up.ts: they match no row and write nothing); it prints the
 * backend's CPU of each execution (/proc, its schedstat), in µs: PostgreSQL plans each of the first five for its
 * values, makes the generic plan at the sixth, and only runs it from then on.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the cluster, which must be on this host
 * (its backends' /proc); the database is dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createDatabase } from '../src/db/database.js';
import { migrateLatest } from '../src/db/migrate.js';
import { gatewayIdleStatements } from '../src/gateway/gateway-db.js';
import { cpuNanosOf } from './lib/proc-cpu.js';
import { CLUSTER_URL, onCluster } from './lib/cluster.js';

const ROUNDS = Number(process.env.BENCH_PLANS_ROUNDS ?? 4);
const EXECUTIONS = 8;

const database = `nexus_plans_${randomBytes(4).toString('hex')}`;
const url = new URL(CLUSTER_URL);
url.pathname = `/${database}`;
await onCluster(`create database "${database}"`);
try {
  const db = createDatabase({ databaseUrl: url.toString() });
  await migrateLatest(db);
  await db.destroy();
  const now = new Date();
  const statements = gatewayIdleStatements(db, now);
  const figures = new Map(statements.map((s) => [s.name, [] as number[][]]));
  for (let round = 0; round < ROUNDS; round++) {
    const conn = new pg.Client({ connectionString: url.toString() });
    await conn.connect();
    try {
      const { pid } = (await conn.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!;
      for (const { name, text, values } of statements) {
        const us: number[] = [];
        for (let i = 0; i < EXECUTIONS; i++) {
          const before = cpuNanosOf(pid);
          await conn.query({ name, text, values });
          us.push(Math.round((cpuNanosOf(pid) - before) / 1000));
        }
        figures.get(name)!.push(us);
      }
    } finally {
      await conn.end();
    }
  }
  console.log(
    `PostgreSQL backend CPU per execution on a fresh connection, µs (${ROUNDS} connections, each a line of executions 1-${EXECUTIONS})\n`,
  );
  console.log(`| statement | ${Array.from({ length: EXECUTIONS }, (_, i) => i + 1).join(' | ')} | first 6 in all, ms |`);
  console.log(`|---|${Array.from({ length: EXECUTIONS + 1 }, () => '---:').join('|')}|`);
  for (const [name, rows] of figures)
    for (const us of rows)
      console.log(`| ${name} | ${us.join(' | ')} | ${(us.slice(0, 6).reduce((a, b) => a + b, 0) / 1000).toFixed(1)} |`);
} finally {
  await onCluster(`drop database if exists "${database}" with (force)`);
}

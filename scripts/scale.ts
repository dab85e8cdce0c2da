/**
 * `npm run bench:scale`: what one PostgreSQL serves as Nexus scales out. Nexus is started as `npm start` starts it
 * (the compiled dist/server.js) in each of these setups, in turn, on one fresh database:
 *   direct:1, direct:2     NEXUS_WORKERS=1 and 2, straight to PostgreSQL (prepared statements on);
 *   pgbouncer:1, pgbouncer:2  the same through a PgBouncer of the script's own in transaction pooling
 *                          (scripts/lib/pgbouncer.ts), with NEXUS_DATABASE_PREPARED_STATEMENTS=false.
 * Each is loaded for SCALE_DURATION seconds (default 10) by autocannon with SCALE_CONNECTIONS connections (32),
 * metered non-streaming chat completions spread over SCALE_USERS end users (16) against an upstream that answers at
 * once (its own process). It prints requests/s, p50/p99 latency, non-2xx answers, and PostgreSQL's transactions
 * and inserted rows per second over the run (pg_stat_database of the database, before and after).
 *
 *   SCALE_CONFIGS='direct:1;direct:2;pgbouncer:2' SCALE_DURATION=15 npm run bench:scale
 *
 * SCALE_MODE=cold measures a cold tenant instead, on the first setup of SCALE_CONFIGS: in an open loop of
 * SCALE_RATE requests/s (1400; each call sent when due, its latency counted from then) over up to
 * SCALE_CONNECTIONS connections (raise it to 256 or more, so the rate holds while answers are slow), the warm
 * tenant's steady state (5 s); then a tenant of SCALE_COLD_USERS end users
 * (50) made just before, its first second (every key and lease looked up in that second); then the same
 * tenant's first second after 3 s idle (its leases released, its lookups expired). Prints p50/p99 of each,
 * and the PostgreSQL transactions each phase made (pg_stat_database, as above).
 *
 *   SCALE_MODE=cold SCALE_CONFIGS=direct:1 SCALE_CONNECTIONS=256 npm run bench:scale
 *
 * SCALE_MODE=fresh measures a fresh process instead, on the first setup of SCALE_CONFIGS: Nexus started anew (the
 * tenant provisioned by an earlier process), loaded as soon as /readyz answers 200, in the same open loop at
 * SCALE_RATE (here 800 by default) for 5 s, then 5 s more (its steady state); prints p50/p99 of each and the ratio
 * of the first 5 s's p99 to the steady one's, for each of SCALE_ROUNDS fresh processes (default 5), and the median
 * ratio with its interquartile range; and the p99 of each of the first 5 seconds, and the CPU per call of Nexus's
 * process and of the database's PostgreSQL backends (/proc; a backend opened meanwhile counted whole) in each 5 s.
 * SCALE_LOG_FILE=<file> appends each Nexus process's log lines (its request lines, at `info`) to that file.
 * SCALE_PRIME=<n> gives each process of this build n whole calls (16 at a time, the tenant's keys in turn) once
 * /readyz answers and before its load, and SCALE_AGAINST's processes none: what warming the whole call (its code,
 * its keys and leases, the first wave, the upstream's connections) would give a fresh process.
 *
 *   SCALE_MODE=fresh SCALE_CONFIGS=direct:1 SCALE_CONNECTIONS=256 npm run bench:scale
 *
 * SCALE_MODE=memory measures one fresh process's memory instead, on the first setup of SCALE_CONFIGS: its resident
 * set (VmRSS, sampled every 100 ms) and V8's heap (its /metrics) once /readyz answers 200 and 2 s later, then in
 * the same open loop at each rate of SCALE_RATES (requests/s, default '200;400;800') for SCALE_DURATION s each,
 * then after 5 s idle: the highest resident set of each phase is what a container's memory limit must allow.
 * SCALE_NODE_FLAGS passes node/V8 flags to Nexus's process (to compare them), and its words NAME=value to its
 * environment ('MALLOC_ARENA_MAX=2 --max-semi-space-size=8'); SCALE_ROUNDS (here 1) processes of each build.
 *
 *   SCALE_MODE=memory SCALE_CONFIGS=direct:1 SCALE_CONNECTIONS=256 npm run bench:scale
 *
 * In both, SCALE_AGAINST=<dir> names another checkout of Nexus (a git worktree of an earlier commit, with its
 * node_modules): each round starts a process of this build, then one of that checkout's (built first), on the same
 * database and tenant, and the tables print both.
 *
 *   SCALE_MODE=fresh SCALE_RATE=300 SCALE_AGAINST=../before SCALE_CONFIGS=direct:1 SCALE_CONNECTIONS=256 npm run bench:scale
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names the cluster; the database the
 * script creates there is dropped at the end. Everything shares this machine's cores: the figures compare
 * setups within one run, they are not what a dedicated PostgreSQL would sustain.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { Pool } from 'undici';
import { startPgBouncer, type PgBouncer } from './lib/pgbouncer.js';
import { CLUSTER_URL, onCluster } from './lib/cluster.js';
import { load, openLoop } from './lib/scale-load.js';
import { fresh, memory, type Build } from './lib/scale-fresh.js';
import { startArgs } from './lib/nexus-process.js';
import { adminClient, provisionTenant } from '../test/support/tenant.js';
import { startFixedOpenAiUpstream } from '../test/support/upstreams/openai.js';

const DURATION = Number(process.env.SCALE_DURATION ?? 10);
const CONNECTIONS = Number(process.env.SCALE_CONNECTIONS ?? 32);
const USERS = Number(process.env.SCALE_USERS ?? 16);
const CONFIGS = (process.env.SCALE_CONFIGS ?? 'direct:1;direct:2;pgbouncer:1;pgbouncer:2').split(';').map((c) => {
  const [via, workers] = c.trim().split(':');
  if ((via !== 'direct' && via !== 'pgbouncer') || !/^\d+$/.test(workers ?? ''))
    throw new Error(`SCALE_CONFIGS: '${c}' is not direct:N or pgbouncer:N`);
  return { via, workers: Number(workers) };
});
const MODE = process.env.SCALE_MODE ?? 'steady';
const RATE = Number(process.env.SCALE_RATE ?? (MODE === 'fresh' ? 800 : 1400));
const ROUNDS = Number(process.env.SCALE_ROUNDS ?? 5);
const RATES = (process.env.SCALE_RATES ?? '200;400;800').split(';').map(Number);
/** SCALE_NODE_FLAGS: node/V8 flags, and NAME=value words, which go to the process's environment (MALLOC_ARENA_MAX=2). */
const NODE_WORDS = process.env.SCALE_NODE_FLAGS ? process.env.SCALE_NODE_FLAGS.split(' ').filter(Boolean) : [];
const NODE_FLAGS = NODE_WORDS.filter((w) => !/^[A-Z_][A-Z0-9_]*=/.test(w));
const NODE_ENV = Object.fromEntries(
  NODE_WORDS.filter((w) => !NODE_FLAGS.includes(w)).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]),
);
/** SCALE_AGAINST: another checkout of Nexus (its own build), started in turn with this one in the fresh and memory modes. */
const AGAINST = process.env.SCALE_AGAINST;
const COLD_USERS = Number(process.env.SCALE_COLD_USERS ?? 50);
const ROOT_KEY = 'nx-mgmt-scale-root-0123456789abcdefghijklmnop';
const PROVIDER_KEY = 'sk-scale-upstream-0123456789';
const projectRoot = join(fileURLToPath(import.meta.url), '..', '..');

/** The upstream, in a process of its own: answers every request at once (test/support/upstreams/openai.ts). */
async function runUpstream(): Promise<void> {
  const upstream = await startFixedOpenAiUpstream();
  process.stdout.write(JSON.stringify({ port: Number(new URL(upstream.url).port) }) + '\n');
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function startUpstream(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--role=upstream'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) =>
      resolve({ child, url: `http://127.0.0.1:${(JSON.parse(d.toString()) as { port: number }).port}` }),
    );
    child.once('exit', (code) => reject(new Error(`upstream exited with ${code}`)));
  });
}

/** `npm start`'s command line (the compiled build), with NEXUS_WORKERS; ready when each worker has said it listens. */
async function startNexus(
  databaseUrl: string,
  workers: number,
  prepared: boolean,
  root = projectRoot,
): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [...NODE_FLAGS, ...startArgs(root)], {
    cwd: root,
    env: {
      ...NODE_ENV,
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      NEXUS_PUBLIC_URL: url,
      DATABASE_URL: databaseUrl,
      NEXUS_WORKERS: String(workers),
      NEXUS_DATABASE_PREPARED_STATEMENTS: String(prepared),
      NEXUS_MANAGEMENT_KEY: ROOT_KEY,
      NEXUS_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
      NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
      NEXUS_LOG_LEVEL: 'info',
      NEXUS_SHUTDOWN_TIMEOUT_MS: '2000',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let listening = 0;
  let buffer = '';
  const logTo = process.env.SCALE_LOG_FILE;
  child.stdout.on('data', (d: Buffer) => {
    if (logTo) appendFileSync(logTo, d);
    buffer += d.toString();
    const lines = buffer.split('\n');
    buffer = lines.pop()!;
    for (const line of lines) {
      if (line.includes('"msg":"listening"')) listening++;
      else if (line.includes('"level":"error"') || line.includes('"level":"warn"')) process.stderr.write(line + '\n');
    }
  });
  const deadline = Date.now() + 120_000;
  while (listening < workers) {
    if (child.exitCode !== null) throw new Error(`nexus exited with ${child.exitCode}`);
    if (Date.now() > deadline) throw new Error('nexus did not start in 120 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, url };
}

/** Waits until `url`'s /readyz answers 200: what a load balancer waits for before it sends a new process calls. */
async function untilReady(url: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const status = await fetch(`${url}/readyz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${url}/readyz did not answer 200 in 60 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function stopNexus(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** A tenant with `users` end users on a plan with a quota no run exhausts, through the Admin API. */
async function provision(
  nexusUrl: string,
  upstreamUrl: string,
  name = 'scale',
  users = USERS,
): Promise<{ gatewayPath: string; apiKeys: string[] }> {
  const tenant = await provisionTenant(adminClient(nexusUrl, ROOT_KEY), {
    name,
    baseUrl: upstreamUrl,
    providerKey: PROVIDER_KEY,
    users,
    quotaUnits: 1_000_000_000_000_000n,
    maxOutputTokens: 4096,
  });
  return { gatewayPath: new URL(tenant.gatewayBaseUrl).pathname, apiKeys: tenant.users.map((u) => u.apiKey) };
}

/** The database's committed (and rolled back) transactions and inserted rows so far. */
async function dbCounters(database: string): Promise<{ xacts: number; inserted: number }> {
  // The backends report their counters at most once a second, when idle: wait for the last of them.
  await new Promise((r) => setTimeout(r, 1500));
  const client = new pg.Client({ connectionString: CLUSTER_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ xacts: string; inserted: string }>(
      'select xact_commit + xact_rollback as xacts, tup_inserted as inserted from pg_stat_database where datname = $1',
      [database],
    );
    return { xacts: Number(rows[0]!.xacts), inserted: Number(rows[0]!.inserted) };
  } finally {
    await client.end();
  }
}

/** The PostgreSQL backends on `database` now (but the one asking): Nexus's pool, or PgBouncer's. */
async function backendsOf(database: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: CLUSTER_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
      [database],
    );
    return rows.map((r) => r.pid);
  } finally {
    await client.end();
  }
}

interface Row {
  setup: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  xactPerSec: number;
  insertsPerSec: number;
}

/**
 * SCALE_MODE=cold: latency of a tenant's first second (its keys and leases not looked up yet) against the
 * steady state of a warm one, at the same fixed rate, on one Nexus.
 */
async function cold(
  nexusUrl: string,
  upstreamUrl: string,
  warm: { gatewayPath: string; apiKeys: string[] },
  database: string,
): Promise<void> {
  const pool = new Pool(nexusUrl, { connections: CONNECTIONS, pipelining: 1, keepAliveTimeout: 60_000 });
  const rows: { phase: string; sent: number; p50: number; p99: number; max: number; non2xx: number; xacts: number }[] = [];
  const run = async (phase: string, tenant: { gatewayPath: string; apiKeys: string[] }, seconds: number) => {
    const before = await dbCounters(database);
    const measured = await openLoop(pool, `${tenant.gatewayPath}/v1/chat/completions`, tenant.apiKeys, RATE, seconds);
    const after = await dbCounters(database);
    rows.push({ phase, ...measured, xacts: after.xacts - before.xacts });
    console.log(JSON.stringify(rows.at(-1)));
  };
  try {
    // A warm-up: the warm tenant's keys cached, its leases taken, the connections open.
    await openLoop(pool, `${warm.gatewayPath}/v1/chat/completions`, warm.apiKeys, RATE, 2);
    await run(`warm tenant (${warm.apiKeys.length} users), steady state, 5 s`, warm, 5);
    const fresh = await provision(nexusUrl, upstreamUrl, `cold-${randomBytes(3).toString('hex')}`, COLD_USERS);
    await run(`new tenant (${COLD_USERS} users), its first second`, fresh, 1);
    await new Promise((r) => setTimeout(r, 3000));
    await run('the same tenant after 3 s idle, its first second', fresh, 1);
  } finally {
    await pool.close();
  }
  console.log(
    `\n${cpus().length} cores (shared with PostgreSQL, the upstream and the load generator), ${CONNECTIONS} connections, ${RATE} requests/s offered\n`,
  );
  console.log('| phase | requests/s sent | p50 ms | p99 ms | max ms | non-2xx | p99 / steady p99 | PostgreSQL transactions |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.phase} | ${r.sent} | ${r.p50} | ${r.p99} | ${r.max} | ${r.non2xx} | ${(r.p99 / rows[0]!.p99).toFixed(1)} | ${r.xacts} |`,
    );
  }
}

async function main(): Promise<void> {
  execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: projectRoot, stdio: 'inherit' });
  if (AGAINST) execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: AGAINST, stdio: 'inherit' });
  const database = `nexus_scale_${randomBytes(4).toString('hex')}`;
  const directUrl = (() => {
    const u = new URL(CLUSTER_URL);
    u.pathname = `/${database}`;
    return u.toString();
  })();
  await onCluster(`create database "${database}"`);
  const upstream = await startUpstream();
  let bouncer: PgBouncer | undefined;
  const rows: Row[] = [];
  try {
    if (CONFIGS.some((c) => c.via === 'pgbouncer')) bouncer = await startPgBouncer(CLUSTER_URL, { poolSize: 20 });
    // Migrated and provisioned once, straight to PostgreSQL (DDL does not go through the pooler).
    const first = await startNexus(directUrl, 1, true);
    const tenant = await provision(first.url, upstream.url);
    await stopNexus(first.child);
    if (MODE === 'memory' || MODE === 'fresh') {
      const config = CONFIGS[0]!;
      const viaBouncer = config.via === 'pgbouncer';
      const url = viaBouncer ? bouncer!.url(directUrl) : directUrl;
      const builds: Build[] = [{ label: 'this build', start: () => startNexus(url, config.workers, !viaBouncer) }];
      if (AGAINST) builds.push({ label: basename(AGAINST), start: () => startNexus(url, config.workers, !viaBouncer, AGAINST) });
      const backends = () => backendsOf(database);
      const run = {
        rate: RATE,
        rounds: ROUNDS,
        connections: CONNECTIONS,
        untilReady,
        stop: stopNexus,
        backends,
        prime: Number(process.env.SCALE_PRIME ?? 0),
      };
      if (MODE === 'fresh') await fresh(builds, tenant, run);
      else await memory(builds, tenant, { ...run, rounds: Number(process.env.SCALE_ROUNDS ?? 1) }, RATES, DURATION, NODE_WORDS.join(' '));
      return;
    }
    if (MODE === 'cold') {
      const config = CONFIGS[0]!;
      const viaBouncer = config.via === 'pgbouncer';
      const nexus = await startNexus(viaBouncer ? bouncer!.url(directUrl) : directUrl, config.workers, !viaBouncer);
      try {
        await cold(nexus.url, upstream.url, tenant, database);
      } finally {
        await stopNexus(nexus.child);
      }
      return;
    }
    for (const config of CONFIGS) {
      const setup = `${config.via}, ${config.workers} worker${config.workers > 1 ? 's' : ''}`;
      const viaBouncer = config.via === 'pgbouncer';
      const nexus = await startNexus(viaBouncer ? bouncer!.url(directUrl) : directUrl, config.workers, !viaBouncer);
      try {
        const options = load(`${nexus.url}${tenant.gatewayPath}/v1/chat/completions`, tenant.apiKeys, CONNECTIONS);
        // A warm-up: the workers' keys cached, their leases taken, the pools' connections open.
        await autocannon({ ...options, duration: 2 });
        const before = await dbCounters(database);
        const started = Date.now();
        const result = await autocannon({ ...options, duration: DURATION });
        const seconds = (Date.now() - started) / 1000;
        const after = await dbCounters(database);
        rows.push({
          setup,
          rps: Math.round(result.requests.average),
          p50: result.latency.p50,
          p99: result.latency.p99,
          non2xx: result.non2xx + result.errors + result.timeouts,
          xactPerSec: Math.round((after.xacts - before.xacts) / seconds),
          insertsPerSec: Math.round((after.inserted - before.inserted) / seconds),
        });
        console.log(JSON.stringify(rows.at(-1)));
      } finally {
        await stopNexus(nexus.child);
      }
    }
  } finally {
    upstream.child.kill();
    bouncer?.stop();
    await onCluster(`drop database if exists "${database}" with (force)`).catch((err: Error) =>
      console.error(`could not drop ${database}: ${err.message}`),
    );
  }
  console.log(
    `\n${cpus().length} cores (shared with PostgreSQL, the upstream and the load generator), ${CONNECTIONS} connections, ${DURATION} s each${bouncer ? `, ${bouncer.version}` : ''}\n`,
  );
  console.log('| setup | requests/s | p50 ms | p99 ms | non-2xx | PostgreSQL transactions/s | rows inserted/s |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.setup} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.non2xx} | ${r.xactPerSec} | ${r.insertsPerSec} |`);
}

if (process.argv.includes('--role=upstream')) void runUpstream();
else
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });

/**
 * `npm run bench:history`: history at scale (docs/operations.md, "History: sizing and figures"). A fresh database and
 * Nexus get a workspace of BENCH_HISTORY_USERS end users (default 8) on one plan, keeping 10 years of history (the
 * history job's hourly retention must not drop the seed's months); a second fresh database and Nexus, the same
 * workspace, kept empty: the reference for PostgreSQL's CPU per recorded call. Then, in steps:
 *   1. PostgreSQL's CPU per recorded call: BENCH_HISTORY_ROUNDS pairs of rounds (default 5), one round on each database
 *      (which goes first alternating), each of BENCH_HISTORY_BATCHES batches (default 200) of 20 calls through the
 *      gateway's record statement
 *      (src/domain/recording/record-sql.ts), the CPU time of its backend (/proc/<pid>/stat) read around each round;
 *      reported: each database's median round with its IQR, and the median and IQR of the pairs' ratios (seeded/empty).
 *      Both databases are empty at this step;
 *   2. BENCH_HISTORY_SMALL invocations and as many usage events (default 100,000 each), spread evenly over
 *      BENCH_HISTORY_MONTHS months (default 12) up to now, written with COPY, the rollups computed from them, analyzed;
 *      the size on disk of each table; the CPU per recorded call again; the usage summary (by day in the workspace's
 *      zone, read from the day rollups, the same days under another name of that zone, read from them too, the days
 *      of zones whose midnights are an hour or none from it (London), 9 hours (Tokyo), 12 to 13 (Auckland) and 7 to 8
 *      (Los Angeles), read from them and the hours between; by user, all of them, and the top 9 with the others
 *      summed, in the workspace's zone, London's and Tokyo's) and the invocations list answered through HTTP (BENCH_HISTORY_RUNS
 *      times each, default 20: p50, and the first answer's time beside it);
 *   3. up to BENCH_HISTORY_LARGE of each (default 1,000,000) the same way, and the same figures;
 *   4. the size on disk per month of each table (rows, heap and indexes), and the time to drop the oldest month's
 *      partitions of invocations and usage events (DROP TABLE, lock_timeout 1 s) while calls are recorded at once: the
 *      slowest record batch during the drops is reported (a drop that blocked calls would show in it).
 * The seed's ids and request ids are UUID v7 of each row's time, as the gateway makes them; each call has its attempt (its id, status and
 * times), as a call that reached its provider has (the connection index holds only those). PostgreSQL must run on this host.
 * The leases the CPU step records on are released when it ends (on a kept database, those an earlier run left held too, before it
 * starts): a lease left held would be read by every later run's record statement.
 *
 * BENCH_HISTORY_KEEP=1 keeps the seeded database, named bench_history_<BENCH_HISTORY_LARGE in millions>m (printed),
 * to measure it again later: BENCH_HISTORY_DB=<name> seeds nothing and runs the steps above on that database instead
 * (migrated to the latest first by its Nexus's start, then the tables each call updates in place vacuumed and analyzed,
 * as autovacuum keeps them: vacuumUpdated; the empty one is fresh): sizes, CPU per recorded call, reads, months. BENCH_HISTORY_REBUILD=1 then computes its rollups anew first (a migration that adds a rollup table it does
 * not fill, say). Its drop step is skipped unless BENCH_HISTORY_DROP=1 (each run would drop one more month of it);
 * BENCH_HISTORY_DROP=0 skips it on a seeding run. A seed writes a million rows of each table at a time, each million
 * in one transaction with its count in the database's bench_history_seed: BENCH_HISTORY_DB on a seed stopped midway
 * writes the rest (the same times, from the same plan) and computes the rollups before measuring.
 *
 * BENCH_HISTORY_CONVERT=<rows> (default 0: skipped) then times the migration that partitions the tables
 * (migrations/20261210010000_history_partitions.ts) on a schema migrated up to the one before it, whose invocations,
 * usage events, webhook attempts and audit logs hold that many rows each over BENCH_HISTORY_MONTHS months.
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): the server the fresh databases are made on;
 * they are dropped at the end (the seeded one unless kept).
 */
import { cpus, loadavg } from 'node:os';
import pg from 'pg';
import { createDatabase } from '../src/db/database.js';
import { migrateLatest } from '../src/db/migrate.js';
import { recordCallsSql } from '../src/domain/recording/record-sql.js';
import { recordValues } from '../src/records/call-repo.js';
import { ROLLUP_TABLES } from '../src/domain/recording/rollup-sql.js';
import { adminClient, provisionTenant, type Tenant } from '../test/support/tenant.js';
import { withFreshNexus } from './lib/fresh-nexus.js';
import { rebuildRollups, seatsOf, seed, seedMonths, seedPlanOf, vacuumUpdated, type BenchTenant } from './lib/history-seed.js';
import { cpuSecondsOf } from './lib/proc-cpu.js';
import { batchOf, openLeases, releaseLeases } from './lib/record-batch.js';

const USERS = Number(process.env.BENCH_HISTORY_USERS ?? 8);
const ROUNDS = Number(process.env.BENCH_HISTORY_ROUNDS ?? 5);
const SMALL = Number(process.env.BENCH_HISTORY_SMALL ?? 100_000);
const LARGE = Number(process.env.BENCH_HISTORY_LARGE ?? 1_000_000);
const MONTHS = Number(process.env.BENCH_HISTORY_MONTHS ?? 12);
const RUNS = Number(process.env.BENCH_HISTORY_RUNS ?? 20);
/** The request id of the leases the CPU step records on (released at its end, and before it on a kept database). */
const LEASES_NAMED = 'bench-history';
const CONVERT = Number(process.env.BENCH_HISTORY_CONVERT ?? 0);
/** The seeded database's name when it is to be kept (BENCH_HISTORY_KEEP=1). */
const KEEP = process.env.BENCH_HISTORY_KEEP === '1' ? `bench_history_${Math.round(LARGE / 1e6)}m` : undefined;
/** A kept database to measure again instead of seeding one. */
const KEPT = process.env.BENCH_HISTORY_DB;
const REBUILD = process.env.BENCH_HISTORY_REBUILD === '1';
const DROP = (process.env.BENCH_HISTORY_DROP ?? (KEPT ? '0' : '1')) === '1';
// A round's CPU is read in the kernel's ticks (10 ms): 4,000 calls at ~150 µs are ~60 of them, a 2% step.
const BATCHES = Number(process.env.BENCH_HISTORY_BATCHES ?? 200);
const CALLS = 20;
const DAY_MS = 86_400_000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

interface MonthSize {
  table: string;
  name: string;
  rows: string;
  heap: string;
  indexes: string;
}

/** The size of a month: each month's rows, heap and indexes printed for the oldest and the newest full ones. */
async function reportMonths(client: pg.Client): Promise<MonthSize[]> {
  const months = await client.query<MonthSize>(
    `select p.relname as table, c.relname as name, c.reltuples::bigint as rows, pg_table_size(c.oid) as heap, pg_indexes_size(c.oid) as indexes
       from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
      where p.relname in ('invocations', 'usage_events') and c.reltuples > 0 order by c.relname`,
  );
  console.log('\nper month (the oldest and the newest full ones):');
  for (const table of ['invocations', 'usage_events']) {
    const rows = months.rows.filter((m) => m.table === table);
    for (const m of [rows[1], rows[rows.length - 2]].filter(Boolean)) {
      const bytes = Number(m!.heap) + Number(m!.indexes);
      console.log(
        `  ${m!.name.padEnd(24)} ${Number(m!.rows).toLocaleString('en').padStart(12)} rows  heap ${(Number(m!.heap) / 2 ** 20).toFixed(1)} MiB  ` +
          `indexes ${(Number(m!.indexes) / 2 ** 20).toFixed(1)} MiB  ${(bytes / Number(m!.rows)).toFixed(0)} B/row`,
      );
    }
  }
  return months.rows;
}

/** The oldest month of each table dropped while calls are recorded: how long each drop took, and the slowest record meanwhile. */
async function dropWhileRecording(client: pg.Client, months: MonthSize[], recordBatch: () => Promise<unknown>): Promise<void> {
  let recording = true;
  let slowest = 0;
  let batches = 0;
  const calls = (async () => {
    while (recording) {
      const started = performance.now();
      await recordBatch();
      slowest = Math.max(slowest, performance.now() - started);
      batches++;
    }
  })();
  await new Promise((r) => setTimeout(r, 500));
  const before = slowest;
  for (const table of ['invocations', 'usage_events']) {
    const oldest = months.find((m) => m.table === table)!;
    const started = performance.now();
    await client.query('begin');
    await client.query(`set local lock_timeout = '1s'`);
    await client.query(`drop table ${oldest.name}`);
    await client.query('commit');
    console.log(
      `\ndropped ${oldest.name} (${Number(oldest.rows).toLocaleString('en')} rows) in ${(performance.now() - started).toFixed(0)} ms`,
    );
  }
  await new Promise((r) => setTimeout(r, 500));
  recording = false;
  await calls;
  console.log(`record batches meanwhile: ${batches}, slowest ${slowest.toFixed(0)} ms (before the drops: ${before.toFixed(0)} ms)`);
}

/** Where calls are recorded for the CPU figures: a connection of its own, whose backend's CPU time is read. */
interface Recorder {
  /** Records one batch of CALLS calls through the gateway's statement. */
  batch(): Promise<unknown>;
  /** The backend's CPU seconds so far. */
  cpuSeconds(): number;
  end(): Promise<void>;
}

/** A recorder on `databaseUrl` for `tenant`'s users, each holding a lease as a gateway process does. */
async function recorderOn(databaseUrl: string, tenant: BenchTenant): Promise<Recorder> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const leases = await openLeases(client, tenant, LEASES_NAMED);
  const statement = recordCallsSql(true);
  const pid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  cpuSecondsOf(pid);
  return {
    batch: () => {
      const rows = batchOf(tenant, leases, tenant.planId, CALLS);
      return client.query({
        name: 'bench_record',
        text: statement,
        values: recordValues(rows),
      });
    },
    cpuSeconds: () => cpuSecondsOf(pid),
    end: async () => {
      await releaseLeases(client, LEASES_NAMED);
      await client.end();
    },
  };
}

/** The bench's tenant in a kept database: its workspace, connection, plan and users (each with a key). */
async function keptTenant(client: pg.Client): Promise<BenchTenant> {
  const { rows } = await client.query<{ workspaceId: string; connectionId: string; planId: string; accessId: string; apiKeyId: string }>(
    `select w.id as "workspaceId", c.id as "connectionId", a.plan_id as "planId", a.id as "accessId",
            (select k.id from inference_keys k where k.workspace_access_id = a.id limit 1) as "apiKeyId"
       from workspaces w join provider_connections c on c.workspace_id = w.id join workspace_accesses a on a.workspace_id = w.id
      where w.name = 'bench-history' order by a.id`,
  );
  if (rows.length === 0) throw new Error('no workspace bench-history in BENCH_HISTORY_DB');
  return { ...rows[0]!, users: rows.map((r) => ({ accessId: r.accessId, apiKeyId: r.apiKeyId, apiKey: '' })) };
}

interface Spread {
  median: number;
  q1: number;
  q3: number;
}
const spread = (xs: number[]): Spread => {
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
  return { median: at(0.5), q1: at(0.25), q3: at(0.75) };
};

/** One round's PostgreSQL CPU per recorded call, µs: BATCHES batches of CALLS calls. */
async function cpuRound(recorder: Recorder): Promise<number> {
  const before = recorder.cpuSeconds();
  for (let b = 0; b < BATCHES; b++) await recorder.batch();
  return ((recorder.cpuSeconds() - before) * 1e6) / (BATCHES * CALLS);
}

/**
 * PostgreSQL's CPU per recorded call on the empty database and on the seeded one, in ROUNDS pairs of rounds (which
 * goes first alternating, so that the host's load drifting weighs on both alike): each one's median with its IQR, and
 * the ratio seeded/empty of each pair's.
 */
async function pairedCpu(empty: Recorder, seeded: Recorder): Promise<{ empty: Spread; seeded: Spread; ratio: Spread }> {
  await empty.batch();
  await seeded.batch();
  const e: number[] = [];
  const s: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) {
      e.push(await cpuRound(empty));
      s.push(await cpuRound(seeded));
    } else {
      s.push(await cpuRound(seeded));
      e.push(await cpuRound(empty));
    }
  }
  return { empty: spread(e), seeded: spread(s), ratio: spread(s.map((x, i) => x / e[i]!)) };
}

/** The size on disk of each history table with its indexes (partitions summed), and of the whole database. */
async function reportSizes(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ table: string; heap: string; indexes: string }>(
    `select t as table, sum(pg_table_size(c.oid))::bigint as heap, sum(pg_indexes_size(c.oid))::bigint as indexes
       from unnest($1::text[]) t join pg_class c on c.relname = t or c.oid in (select inhrelid from pg_inherits where inhparent = t::regclass)
      where c.relkind = 'r' group by t order by t`,
    [['invocations', 'usage_events', ...ROLLUP_TABLES]],
  );
  const mib = (b: string | number) => `${(Number(b) / 2 ** 20).toFixed(0)} MiB`;
  for (const r of rows) console.log(`  ${r.table.padEnd(28)} heap ${mib(r.heap).padStart(10)}  indexes ${mib(r.indexes).padStart(10)}`);
  const db = await client.query<{ bytes: string }>('select pg_database_size(current_database()) as bytes');
  console.log(`  ${'the whole database'.padEnd(28)} ${mib(db.rows[0]!.bytes)}`);
}

/** The usage summaries and the lists the console reads, answered through HTTP by the Nexus at `serverUrl`. */
function readsOf(ws: string): [string, string][] {
  const iso = (ms: number) => encodeURIComponent(new Date(ms).toISOString());
  const now = Date.now();
  // A year by day, asked with `params`.
  const year = (params: string) =>
    `/admin/v1/workspaces/${ws}/usage-summary?since=${iso(now - 365 * DAY_MS)}&until=${iso(now)}&granularity=day&${params}`;
  return [
    [
      'summary, 30 days by day',
      `/admin/v1/workspaces/${ws}/usage-summary?since=${iso(now - 30 * DAY_MS)}&until=${iso(now)}&granularity=day`,
    ],
    ['summary, 12 months by day, by model', year('groupBy=model')],
    // The same days under another name of the workspace's zone (Etc/UTC for UTC): read from the day rollups too.
    ['the same in Etc/UTC (the same days)', year('groupBy=model&timeZone=Etc/UTC')],
    // The days of a zone whose midnights are near the workspace's (London's: UTC's in winter, an hour earlier in
    // summer): the day rollups' whole days, and the hours the two zones' days cut apart.
    ['the same in Europe/London', year('groupBy=model&timeZone=Europe/London')],
    // The days of zones whose midnights are far from the workspace's: 9 hours (Tokyo), 12 to 13 (Auckland, the most a
    // day is cut: half its hours), 7 to 8 (Los Angeles). The same way: the whole days' rows, the hours between.
    ['the same in Asia/Tokyo', year('groupBy=model&timeZone=Asia/Tokyo')],
    ['the same in Pacific/Auckland', year('groupBy=model&timeZone=Pacific/Auckland')],
    ['the same in America/Los_Angeles', year('groupBy=model&timeZone=America/Los_Angeles')],
    ['summary, 12 months by day, by user', year('groupBy=access')],
    // What the console asks by user: the 9 who cost most over the range and the others summed, by day in the
    // operator's zone (here the workspace's, then London's and Tokyo's, read from the day rollups and the hours between).
    ['summary, 12 months by day, by user, top 9', year('groupBy=access&top=9')],
    ['the same in Europe/London', year('groupBy=access&top=9&timeZone=Europe/London')],
    ['the same in Asia/Tokyo', year('groupBy=access&top=9&timeZone=Asia/Tokyo')],
    ['invocations, newest page', `/admin/v1/workspaces/${ws}/invocations`],
    [
      'invocations, 7 days a month ago',
      `/admin/v1/workspaces/${ws}/invocations?since=${iso(now - 37 * DAY_MS)}&until=${iso(now - 30 * DAY_MS)}`,
    ],
    ['usage events, newest page', `/admin/v1/workspaces/${ws}/usage-events`],
  ];
}

/** p50 of RUNS answers of `path` through HTTP (after two), ms, and the first answer's (no day kept yet: usage-days.ts). */
async function p50(serverUrl: string, headers: Record<string, string>, path: string): Promise<{ p50: number; first: number }> {
  const times: number[] = [];
  let first = 0;
  for (let r = 0; r < RUNS + 2; r++) {
    const started = performance.now();
    const res = await fetch(`${serverUrl}${path}`, { headers });
    await res.text();
    if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
    if (r === 0) first = performance.now() - started;
    if (r >= 2) times.push(performance.now() - started);
  }
  return { p50: median(times), first };
}

const fixed = (s: Spread, digits = 0) => `${s.median.toFixed(digits)} (IQR ${s.q1.toFixed(digits)}-${s.q3.toFixed(digits)})`;

/** The figures at `label`: the CPU per recorded call paired with the empty database's, and every read's p50. */
async function measure(label: string, empty: Recorder, seeded: Recorder, serverUrl: string, headers: Record<string, string>, ws: string) {
  const cpu = await pairedCpu(empty, seeded);
  console.log(
    `${label}: PostgreSQL CPU per recorded call ${fixed(cpu.seeded)} µs, on the empty database ${fixed(cpu.empty)} µs; ` +
      `ratio over ${ROUNDS} paired rounds ${fixed(cpu.ratio, 2)}; load average ${load()}`,
  );
  for (const [name, path] of readsOf(ws)) {
    const { p50: ms, first } = await p50(serverUrl, headers, path);
    console.log(`  ${name.padEnd(40)} p50 ${ms.toFixed(1).padStart(6)} ms   first answer ${first.toFixed(1).padStart(6)} ms`);
  }
}

/** A tenant as the bench's, provisioned through the Admin API of the Nexus at `serverUrl`. */
const benchTenant = (serverUrl: string, rootKey: string): Promise<Tenant> =>
  provisionTenant(adminClient(serverUrl, rootKey), {
    name: 'bench-history',
    baseUrl: 'http://127.0.0.1:9',
    providerKey: 'sk-bench-history-0123456789',
    users: USERS,
    quotaUnits: 1_000_000_000_000n,
  });

const ENV = { NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true' };

// The empty database the CPU per recorded call is compared with, round by round.
await withFreshNexus(
  'history_empty',
  async (bare) => {
    const empty = await recorderOn(bare.databaseUrl, await benchTenant(bare.url, bare.rootKey));
    try {
      await withFreshNexus(
        'history',
        async ({ url: serverUrl, databaseUrl, rootKey, headers }) => {
          const client = new pg.Client({ connectionString: databaseUrl });
          await client.connect();
          try {
            const tenant = KEPT ? await keptTenant(client) : await benchTenant(serverUrl, rootKey);
            // Every seeded month kept by the history job's hourly retention (the default keeps 90 days of calls): were it
            // not, a run longer than an hour, or a Nexus started on the kept database, would drop months of the seed.
            await client.query('update workspaces set detail_retention_days = 3650, rollup_retention_days = 3650 where id = $1', [
              tenant.workspaceId,
            ]);
            // The leases earlier runs on a kept database left HELD (before they released theirs at the end).
            const stale = KEPT ? await releaseLeases(client, LEASES_NAMED) : 0;
            const seeded = await recorderOn(databaseUrl, tenant);
            // Each recorder's connection ends before its database is dropped, whatever happened: a connection the drop
            // ends itself would be an error no one listens to, and the process would stop before its cleanup.
            try {
              const ws = tenant.workspaceId;
              console.log(`host: ${cpus().length} CPUs, load average ${load()} (1, 5, 15 min)`);
              console.log(`${ROUNDS} paired rounds of ${BATCHES} batches of ${CALLS} calls; ${MONTHS} months; ${USERS} users`);
              if (KEEP) console.log(`the database is kept: ${KEEP}`);
              console.log();
              if (KEPT) {
                console.log(`the kept database ${KEPT}, migrated to the latest; leases earlier runs left held, released: ${stale}`);
                const plan = await seedPlanOf(client);
                if (plan && plan.seeded < plan.total) {
                  const from = plan.seeded;
                  const seconds = await seed(client, tenant, await seatsOf(client, tenant), plan, plan.total, MONTHS);
                  console.log(
                    `its seed resumed: rows ${from.toLocaleString('en')} to ${plan.total.toLocaleString('en')} in ${seconds.toFixed(0)} s`,
                  );
                }
                if (REBUILD || (plan && plan.rolledUp < plan.seeded)) {
                  console.log(`rollups computed anew in ${(await rebuildRollups(client, ws, plan)).toFixed(0)} s`);
                }
                console.log(`vacuumed: ${(await vacuumUpdated(client)).toFixed(1)} s`);
                await reportSizes(client);
                await measure('as kept', empty, seeded, serverUrl, headers, ws);
              } else {
                const seats = await seatsOf(client, tenant);
                await measure('empty tables', empty, seeded, serverUrl, headers, ws);
                await seedMonths(client, MONTHS);
                const plan = (await seedPlanOf(client, LARGE))!;
                for (const size of [SMALL, LARGE].filter((n) => n > 0)) {
                  const seconds = await seed(client, tenant, seats, plan, size, MONTHS);
                  const rolled = await rebuildRollups(client, ws, plan);
                  console.log(
                    `\n${size.toLocaleString('en')} invocations and as many usage events: seeded (COPY) in ${seconds.toFixed(0)} s, ` +
                      `rollups and analyze ${rolled.toFixed(0)} s; load average ${load()}`,
                  );
                  await reportSizes(client);
                  await measure(`at ${size.toLocaleString('en')} rows`, empty, seeded, serverUrl, headers, ws);
                }
              }
              const months = await reportMonths(client);
              if (DROP) await dropWhileRecording(client, months, seeded.batch);
            } finally {
              await seeded.end();
            }
            console.log(`\nhost after: load average ${load()} (1, 5, 15 min)`);
          } finally {
            await client.end();
          }
        },
        ENV,
        KEEP ? { name: KEEP, keep: true } : KEPT ? { name: KEPT, existing: true } : {},
      );
    } finally {
      await empty.end();
    }
  },
  ENV,
);

/** The partitioning migration's time on tables of CONVERT rows each, on a schema of its own (dropped after). */
async function timeConversion(): Promise<void> {
  const schema = `bench_history_convert_${process.pid}`;
  const db = createDatabase({ databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', schema, poolMax: 1 });
  try {
    await migrateLatest(db, schema, '20261208110000_people_invitations');
    const span = `make_interval(days => ${MONTHS * 30})`;
    const at = `now() - ${span} + (n::double precision / ${CONVERT}) * ${span}`;
    const started = performance.now();
    await db.raw(`insert into invocations (id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, request_id, method,
                    endpoint, requested_model, status, metering_status, quota_units, started_at, completed_at)
                  select gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'seed-' || n, 'POST',
                         'v1/chat/completions', 'gpt-4o', 'SUCCEEDED', 'metered', 300, ${at}, ${at} from generate_series(1, ${CONVERT}) n`);
    await db.raw(`insert into usage_events (id, workspace_id, workspace_access_id, quota_period_id, invocation_id, kind, units, model, created_at)
                  select gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'USAGE', 300, 'gpt-4o', ${at}
                    from generate_series(1, ${CONVERT}) n`);
    await db.raw(`insert into webhook_attempts (id, event_id, endpoint_id, workspace_id, outcome, latency_ms, created_at)
                  select gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'DELIVERED', 5, ${at} from generate_series(1, ${CONVERT}) n`);
    await db.raw(`insert into audit_logs (id, actor_key_id, action, resource_type, resource_id, created_at)
                  select gen_random_uuid(), 'root', 'workspace.updated', 'workspace', 'w', ${at} from generate_series(1, ${CONVERT}) n`);
    await db.raw('analyze');
    const size = await db.raw<{ rows: { bytes: string }[] }>(
      `select sum(pg_total_relation_size(c.oid))::bigint as bytes from pg_class c join pg_namespace s on s.oid = c.relnamespace
        where s.nspname = ? and c.relname in ('invocations', 'usage_events', 'webhook_attempts', 'audit_logs')`,
      [schema],
    );
    console.log(
      `\nconversion: ${CONVERT.toLocaleString('en')} rows in each of the four tables (${(Number(size.rows[0]!.bytes) / 2 ** 20).toFixed(0)} MiB ` +
        `with indexes) seeded in ${((performance.now() - started) / 1e3).toFixed(0)} s`,
    );
    const migrating = performance.now();
    await migrateLatest(db, schema);
    const seconds = (performance.now() - migrating) / 1e3;
    console.log(
      `the partitioning migration: ${seconds.toFixed(1)} s, ${((seconds / (4 * CONVERT)) * 1e6).toFixed(1)} s per million rows ` +
        `(the tables locked meanwhile); load average ${load()}`,
    );
  } finally {
    await db.raw('drop schema if exists ?? cascade', [schema]);
    await db.destroy();
  }
}

if (CONVERT > 0) await timeConversion();

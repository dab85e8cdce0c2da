/**
 * `npm run bench:usage`: what getUsageSummary (the console's charts) costs on a large workspace.
 * A fresh database gets BENCH_USAGE_EVENTS (default 1,000,000) usage events in one workspace, each
 * with its invocation as the gateway writes them, made by generate_series over BENCH_USAGE_DAYS
 * (default 30) days, 20 accesses with 2 inference keys each, 3 plans, 5 models and 3 connections; one
 * call in 25 failed, one in 50 refused (no event); the events carry a cost under a price (one model's
 * none: unpriced), cache writes and reasoning tokens on some. The usage rollup is computed from them
 * (src/domain/recording/rollup-sql.ts). A Nexus listens on it in this process, and each query below (every grouping by hour
 * over 7 days and by day over all the days, and the largest by hour over all the days) is asked through
 * HTTP BENCH_USAGE_RUNS times (default 30, after 3 to warm up) by a client in its own process
 * (lib/timed-gets.ts); it prints p50 and p99 per query through HTTP (until the answer's last byte is read;
 * the client's JSON parse is not counted), and the p50 of the service's call alone (the SQL and its mapping,
 * every slice read, without HTTP and JSON).
 *
 * BENCH_USAGE_AGAINST=<dir> then compares the largest answer with another checkout's (a git worktree of an earlier
 * commit, with the same migrations): both compiled, each run as its own process on the seeded database, asked in turn
 * by one client (compareWith). A build's answer time moves by a tenth or more from one minute to the next on a shared host;
 * asked in turn, two builds' rounds share the moment, and the median of their ratios is steadier than either p50
 * (still, on a busy host, only several runs that agree tell a few percent apart: docs/performance.md).
 * BENCH_USAGE_AGAINST=. compares this checkout with itself: the method's own spread.
 *   git worktree add --detach ../before HEAD~1 && (cd ../before && ln -s ../<this checkout>/node_modules .)
 *   BENCH_USAGE_AGAINST=../before npm run bench:usage
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): the server the fresh database
 * is made on; it is dropped at the end.
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { text } from 'node:stream/consumers';
import { fileURLToPath } from 'node:url';
import { freshNexusEnv, percentile, withFreshNexus } from './lib/fresh-nexus.js';
import { startNexusProcess, type NexusProcess } from './lib/nexus-process.js';
import { seedUsage } from './lib/usage-seed.js';
import { cpuSecondsOf } from './lib/proc-cpu.js';
import { systemActor } from '../src/domain/actor.js';
import type { UsageGroupBy } from '../src/domain/invocations/invocation-repo.js';

const EVENTS = Number(process.env.BENCH_USAGE_EVENTS ?? 1_000_000);
const DAYS = Number(process.env.BENCH_USAGE_DAYS ?? 30);
const RUNS = Number(process.env.BENCH_USAGE_RUNS ?? 30);
const AGAINST = process.env.BENCH_USAGE_AGAINST;
const projectRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The times of `runs` GETs of each of `urls` (after 3 to warm up, asked in turn) by a client in its own process
 * (lib/timed-gets.ts), a list per URL.
 */
async function timedGets(urls: string[], headers: Record<string, string>, runs: number): Promise<number[][]> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/lib/timed-gets.ts', String(runs), ...urls], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  child.stdin.end(JSON.stringify(headers));
  const [out, [code]] = await Promise.all([text(child.stdout), once(child, 'exit')]);
  if (code !== 0) throw new Error(`timed-gets exited with ${String(code)}`);
  return JSON.parse(out) as number[][];
}

/**
 * The largest summary's answer from this checkout and from `against` (another checkout of Nexus, with the same
 * migrations), each compiled and run as its own process on the seeded database, asked in turn by one client: each
 * one's p50, the median of the rounds' ratios (theirs to this one's), and each process's CPU per answer.
 */
async function compareWith(against: string, databaseUrl: string, rootKey: string, path: string): Promise<void> {
  const roots = [projectRoot, resolve(against)];
  for (const root of roots) execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  const processes: NexusProcess[] = [];
  try {
    for (const root of roots) processes.push(await startNexusProcess(freshNexusEnv(databaseUrl), { built: true, root }));
    const cpuBefore = processes.map((p) => cpuSecondsOf(p.child.pid!));
    const [mine, theirs] = await timedGets(
      processes.map((p) => `${p.url}${path}`),
      { authorization: `Bearer ${rootKey}` },
      RUNS,
    );
    // Each process answered 3 warm-up rounds and RUNS timed ones.
    const msPerAnswer = processes.map((p, i) => ((cpuSecondsOf(p.child.pid!) - cpuBefore[i]!) * 1000) / (RUNS + 3));
    const ratios = mine!.map((ms, i) => theirs![i]! / ms);
    const p50 = (values: number[]) =>
      percentile(
        [...values].sort((a, b) => a - b),
        50,
      );
    console.log(`\nall ${DAYS} days by hour, by key, this checkout and ${against} in turn (${RUNS} rounds):`);
    console.log(`  this checkout  p50 ${p50(mine!).toFixed(1)} ms, ${msPerAnswer[0]!.toFixed(0)} ms of its process's CPU per answer`);
    console.log(`  ${against}  p50 ${p50(theirs!).toFixed(1)} ms, ${msPerAnswer[1]!.toFixed(0)} ms of its process's CPU per answer`);
    console.log(`  ${against} / this checkout, the median of the rounds' ratios: ${p50(ratios).toFixed(3)}`);
  } finally {
    await Promise.all(processes.map((p) => p.stop()));
  }
}

await withFreshNexus('usage', async ({ url: serverUrl, databaseUrl, nexus, rootKey, headers }) => {
  const created = await fetch(`${serverUrl}/admin/v1/workspaces`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'bench-usage' }),
  });
  const workspaceId = ((await created.json()) as { id: string }).id;

  const until = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
  const since = new Date(until.getTime() - DAYS * 86_400_000);
  const seedStarted = Date.now();
  const rollups = await seedUsage(databaseUrl, workspaceId, { events: EVENTS, since, until });
  console.log(
    `seeded ${EVENTS.toLocaleString('en')} usage events and invocations over ${DAYS} days in ${((Date.now() - seedStarted) / 1000).toFixed(1)} s (usage_rollups: ${rollups.toLocaleString('en')} rows)\n`,
  );

  const day = 86_400_000;
  const lastWeek = new Date(until.getTime() - 7 * day).toISOString();
  const groupings: UsageGroupBy[] = ['model', 'access', 'connection', 'key', 'plan'];
  const queries: [string, Record<string, string>][] = [
    [
      'last 24 h by hour, by model',
      { since: new Date(until.getTime() - day).toISOString(), until: until.toISOString(), granularity: 'hour', groupBy: 'model' },
    ],
    ...groupings.map((g): [string, Record<string, string>] => [
      `last 7 days by hour, by ${g}`,
      { since: lastWeek, until: until.toISOString(), granularity: 'hour', groupBy: g },
    ]),
    ...groupings.map((g): [string, Record<string, string>] => [
      `all ${DAYS} days by day, by ${g}`,
      { since: since.toISOString(), until: until.toISOString(), granularity: 'day', groupBy: g },
    ]),
    ...(['access', 'key'] as const).map((g): [string, Record<string, string>] => [
      `all ${DAYS} days by hour, by ${g}`,
      { since: since.toISOString(), until: until.toISOString(), granularity: 'hour', groupBy: g },
    ]),
  ];
  // The figures scale with how busy the host is: say it.
  console.log(
    `host: ${cpus().length} CPUs, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')} (1, 5, 15 min)\n`,
  );
  console.log(
    `${'query'.padEnd(36)} ${'events'.padStart(10)} ${'calls'.padStart(10)} ${'cost'.padStart(14)} ${'buckets'.padStart(8)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'query p50'.padStart(10)}`,
  );
  const actor = systemActor('bench-usage');
  for (const [label, query] of queries) {
    const target = `${serverUrl}/admin/v1/workspaces/${workspaceId}/usage-summary?${new URLSearchParams(query)}`;
    // Timed by a client in its own process: one in this process would read the answer on the thread that writes it.
    const [times] = (await timedGets([target], headers, RUNS)) as [number[]];
    const res = await fetch(target, { headers });
    const body = (await res.json()) as { buckets: { events: number; calls: number; costMicros: string }[] };
    if (res.status !== 200) throw new Error(`${label}: ${res.status} ${JSON.stringify(body)}`);
    const events = body.buckets.reduce((n, b) => n + b.events, 0);
    const calls = body.buckets.reduce((n, b) => n + b.calls, 0);
    const cost = body.buckets.reduce((n, b) => n + BigInt(b.costMicros), 0n);
    const buckets = body.buckets.length;
    times.sort((a, b) => a - b);
    // The same summary without HTTP and JSON: the service's call (the SQL and the mapping of its rows).
    const inner: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const started = performance.now();
      const summary = await nexus.services.invocations.usageSummary(actor, {
        workspaceId,
        since: new Date(query.since!),
        until: new Date(query.until!),
        granularity: query.granularity as 'hour' | 'day',
        groupBy: query.groupBy as UsageGroupBy,
        timeZone: 'UTC',
      });
      for await (const slice of summary.buckets) void slice;
      inner.push(performance.now() - started);
    }
    inner.sort((a, b) => a - b);
    console.log(
      `${label.padEnd(36)} ${events.toLocaleString('en').padStart(10)} ${calls.toLocaleString('en').padStart(10)} ${cost.toLocaleString('en').padStart(14)} ${String(buckets).padStart(8)} ${percentile(times, 50).toFixed(1).padStart(8)} ${percentile(times, 99).toFixed(1).padStart(8)} ${percentile(inner, 50).toFixed(1).padStart(10)}`,
    );
  }
  if (AGAINST) {
    const largest = new URLSearchParams({ since: since.toISOString(), until: until.toISOString(), granularity: 'hour', groupBy: 'key' });
    await compareWith(AGAINST, databaseUrl, rootKey, `/admin/v1/workspaces/${workspaceId}/usage-summary?${largest}`);
  }
});

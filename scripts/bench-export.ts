/**
 * `npm run bench:export`: the worst case of exportUsageSummary within its cap. An export's range holds at most a leap
 * year of hours (8784 buckets), and only the hours from the first usage in it to the last are read: the worst is a
 * whole year with usage in every hour. A fresh database gets BENCH_EXPORT_EVENTS (default 1,000,000) usage events in one
 * workspace, spread evenly over the 366 days before this hour (lib/usage-seed.ts: 20 accesses with 2 keys each, 3
 * plans, 5 models, 3 connections), and a Nexus listens on it in this process. Each export of the whole year (by hour in
 * every grouping, and by day by key) is asked through HTTP BENCH_EXPORT_RUNS times (default 5, after 3 to warm up) by a
 * client in its own process (lib/timed-gets.ts), which reads each answer to its last byte; it prints p50 and the
 * slowest, the answer's rows and size, and how far this process's resident memory (the server's) rose while it
 * answered them. It also asks what a scoped key could ask before the cap (years 0001 to 9999 by hour), refused
 * now at once, and prints the worst export within the cap.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): the server the fresh database is made on; it is
 * dropped at the end.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpus, loadavg } from 'node:os';
import { text } from 'node:stream/consumers';
import { request } from 'undici';
import { percentile, withFreshNexus } from './lib/fresh-nexus.js';
import { seedUsage } from './lib/usage-seed.js';

const EVENTS = Number(process.env.BENCH_EXPORT_EVENTS ?? 1_000_000);
const RUNS = Number(process.env.BENCH_EXPORT_RUNS ?? 5);
const HOUR = 3_600_000;
const DAYS = 366;

/** The times of `runs` GETs of `url` (after 3 to warm up) by a client in its own process, each to the last byte. */
async function timedGets(url: string, headers: Record<string, string>, runs: number): Promise<number[]> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/lib/timed-gets.ts', String(runs), url], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  child.stdin.end(JSON.stringify(headers));
  const [out, [code]] = await Promise.all([text(child.stdout), once(child, 'exit')]);
  if (code !== 0) throw new Error(`timed-gets exited with ${String(code)}`);
  return (JSON.parse(out) as number[][])[0]!;
}

/** The garbage collector, when node runs with --expose-gc (the npm script does). */
const gc = (globalThis as { gc?: () => void }).gc;

/**
 * How far this process's resident memory rose while `run` ran (sampled every 20 ms), in MB over what it was just
 * before it, after a collection: what the server took to answer the exports.
 */
async function rssRise<T>(run: () => Promise<T>): Promise<{ result: T; rssMb: number }> {
  gc?.();
  const before = process.memoryUsage.rss();
  let peak = before;
  const sample = () => (peak = Math.max(peak, process.memoryUsage.rss()));
  const timer = setInterval(sample, 20);
  try {
    const result = await run();
    sample();
    return { result, rssMb: (peak - before) / 1e6 };
  } finally {
    clearInterval(timer);
  }
}

/** An answer's lines (less its header) and bytes, read as it comes (this process holds none of it). */
async function measure(url: string, headers: Record<string, string>): Promise<{ rows: number; bytes: number }> {
  const res = await request(url, { headers });
  if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${await res.body.text()}`);
  let lines = 0;
  let bytes = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) lines++;
  }
  return { rows: lines - 1, bytes };
}

await withFreshNexus('export', async ({ url: serverUrl, databaseUrl, headers }) => {
  const created = await fetch(`${serverUrl}/admin/v1/workspaces`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'bench-export' }),
  });
  const workspaceId = ((await created.json()) as { id: string }).id;
  const until = new Date(Math.floor(Date.now() / HOUR) * HOUR);
  const since = new Date(until.getTime() - DAYS * 24 * HOUR);
  const seedStarted = Date.now();
  const rollups = await seedUsage(databaseUrl, workspaceId, { events: EVENTS, since, until });
  console.log(
    `seeded ${EVENTS.toLocaleString('en')} usage events over ${DAYS} days (every hour used) in ${((Date.now() - seedStarted) / 1000).toFixed(1)} s (usage_rollups: ${rollups.toLocaleString('en')} rows)`,
  );
  console.log(
    `host: ${cpus().length} CPUs, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')} (1, 5, 15 min)\n`,
  );

  const exportUrl = (query: Record<string, string>) =>
    `${serverUrl}/admin/v1/workspaces/${workspaceId}/usage-summary/export?${new URLSearchParams(query)}`;

  // Before the cap, any scoped key could ask this: 70 million hourly buckets, read a thousand at a time.
  const unbounded = exportUrl({ since: '0001-01-01T00:00:00Z', until: '9999-12-31T00:00:00Z', granularity: 'hour' });
  const askedAt = performance.now();
  const refused = await fetch(unbounded, { headers });
  const refusal = (await refused.json()) as { error: { code: string; message: string } };
  console.log(
    `years 0001 to 9999 by hour: ${refused.status} ${refusal.error.code} in ${(performance.now() - askedAt).toFixed(1)} ms ("${refusal.error.message}")\n`,
  );

  const range = { since: since.toISOString(), until: until.toISOString() };
  const exports: [string, Record<string, string>][] = [
    ...['model', 'access', 'connection', 'key', 'plan'].map((g): [string, Record<string, string>] => [
      `${DAYS} days by hour, by ${g}`,
      { ...range, granularity: 'hour', groupBy: g },
    ]),
    [`${DAYS} days by day, by key`, { ...range, granularity: 'day', groupBy: 'key' }],
  ];
  console.log(
    `${'export'.padEnd(32)} ${'rows'.padStart(9)} ${'MB'.padStart(7)} ${'p50 ms'.padStart(9)} ${'max ms'.padStart(9)} ${'RSS +MB'.padStart(8)}`,
  );
  let worst = { label: '', ms: 0 };
  for (const [label, query] of exports) {
    const target = exportUrl(query);
    const { rows, bytes } = await measure(target, headers);
    const { result: times, rssMb } = await rssRise(() => timedGets(target, headers, RUNS));
    times.sort((a, b) => a - b);
    const max = times.at(-1)!;
    if (max > worst.ms) worst = { label, ms: max };
    console.log(
      `${label.padEnd(32)} ${rows.toLocaleString('en').padStart(9)} ${(bytes / 1e6).toFixed(1).padStart(7)} ${percentile(times, 50).toFixed(0).padStart(9)} ${max.toFixed(0).padStart(9)} ${rssMb.toFixed(0).padStart(8)}`,
    );
  }
  console.log(`\nthe worst export within the cap: ${worst.label}, ${(worst.ms / 1000).toFixed(2)} s (the slowest of ${RUNS} runs)`);
});

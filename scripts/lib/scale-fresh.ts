/**
 * bench:scale's measures of one fresh process (scripts/scale.ts): SCALE_MODE=fresh (its first 5 s at a fixed rate
 * against its next 5 s) and SCALE_MODE=memory (its resident set and heap, idle then at each rate). With SCALE_AGAINST
 * each round starts the builds in turn (in the fresh mode their order reversed every other round), so that the
 * host's moment weighs on both alike.
 */
import type { ChildProcess } from 'node:child_process';
import { cpus } from 'node:os';
import { Pool } from 'undici';
import { BODY, heapOf, openLoop, quartiles } from './scale-load.js';
import { cpuNanosOf, rssMbOf } from './proc-cpu.js';

/** A build to start: its name in the tables, and how to start one process of it. */
export interface Build {
  label: string;
  start(): Promise<{ child: ChildProcess; url: string }>;
}

interface Tenant {
  gatewayPath: string;
  apiKeys: string[];
}

interface Run {
  rate: number;
  rounds: number;
  connections: number;
  untilReady(url: string): Promise<void>;
  stop(child: ChildProcess): Promise<void>;
  /** Calls each process of the first build takes before its load (SCALE_PRIME; 0: none). */
  prime?: number;
  /** The PostgreSQL backends serving the run's database now (a fresh process's pool among them). */
  backends?(): Promise<number[]>;
}

/** The CPU ns each of `pids` has used so far; a pid gone (or no /proc) is left out. */
function cpuOf(pids: number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      out.set(pid, cpuNanosOf(pid));
    } catch {
      // gone: not counted
    }
  }
  return out;
}

/** CPU µs per call between two readings of `cpuOf`, a pid present only at the second counted whole (a backend opened meanwhile). */
function cpuPerCall(before: Map<number, number>, after: Map<number, number>, calls: number): number {
  let ns = 0;
  for (const [pid, a] of after) ns += a - (before.get(pid) ?? 0);
  return Math.round(ns / 1000 / calls);
}

/** `calls` calls, 16 at a time, the tenant's keys in turn: a process primed by whole calls before its load. */
async function prime(pool: Pool, path: string, apiKeys: string[], calls: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < calls; i = next++) {
      const res = await pool.request({
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKeys[i % apiKeys.length]}` },
        body: BODY,
      });
      await res.body.dump();
    }
  };
  await Promise.all(Array.from({ length: 16 }, lane));
}

/**
 * SCALE_MODE=fresh: a fresh process's first 5 s at a fixed rate against its next 5 s, `rounds` processes of each
 * build started anew and loaded once /readyz answers 200; the p99 of each of the first 5 seconds too.
 */
export async function fresh(builds: Build[], tenant: Tenant, run: Run): Promise<void> {
  const ratios = new Map<string, number[]>(builds.map((b) => [b.label, []]));
  const steady = new Map<string, number[]>(builds.map((b) => [b.label, []]));
  console.log(
    '| build | process | first 5 s p50 ms | first 5 s p99 ms | its seconds p99 ms | next 5 s p50 ms | next 5 s p99 ms | non-2xx | CPU µs/call, process first / next | PostgreSQL first / next | p99 first / next |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (let round = 1; round <= run.rounds; round++) {
    // The builds in turn, their order reversed every other round: the one started first is not always the same.
    for (const build of round % 2 ? builds : [...builds].reverse()) {
      const nexus = await build.start();
      const pool = new Pool(nexus.url, { connections: run.connections, pipelining: 1, keepAliveTimeout: 60_000 });
      try {
        await run.untilReady(nexus.url);
        const path = `${tenant.gatewayPath}/v1/chat/completions`;
        const pids = async () => [nexus.child.pid!, ...((await run.backends?.()) ?? [])];
        // SCALE_PRIME: the first build's processes take that many calls (16 at a time) before their load; the
        // others none: what a warm-up of the whole call (its key, its lease, the gateway's code) would give.
        if (run.prime && build === builds[0]) await prime(pool, path, tenant.apiKeys, run.prime);
        const cpu0 = cpuOf(await pids());
        const first = await openLoop(pool, path, tenant.apiKeys, run.rate, 5);
        const cpu1 = cpuOf(await pids());
        const next = await openLoop(pool, path, tenant.apiKeys, run.rate, 5);
        const cpu2 = cpuOf(await pids());
        const calls = run.rate * 5;
        const own = (m: Map<number, number>) => new Map([...m].filter(([pid]) => pid === nexus.child.pid));
        const theirs = (m: Map<number, number>) => new Map([...m].filter(([pid]) => pid !== nexus.child.pid));
        const cpu = [own, theirs].map((part) => [cpuPerCall(part(cpu0), part(cpu1), calls), cpuPerCall(part(cpu1), part(cpu2), calls)]);
        const ratio = first.p99 / Math.max(1, next.p99);
        ratios.get(build.label)!.push(ratio);
        steady.get(build.label)!.push(next.p99);
        console.log(
          `| ${build.label} | ${round} | ${first.p50} | ${first.p99} | ${first.p99BySecond.join(', ')} | ${next.p50} | ${next.p99} | ${first.non2xx + next.non2xx} | ${cpu[0]!.join(' / ')} | ${cpu[1]!.join(' / ')} | ${ratio.toFixed(1)} |`,
        );
      } finally {
        await pool.close();
        await run.stop(nexus.child);
      }
    }
  }
  console.log(`\n${run.rate} requests/s offered, ${run.connections} connections at most, ${cpus().length} cores shared:`);
  for (const [label, xs] of ratios) {
    const q = quartiles(xs);
    const s = quartiles(steady.get(label)!);
    console.log(
      `${label}: a fresh process's p99 in its first 5 s is ${q.median.toFixed(1)}x its next 5 s's (median of ${xs.length}, IQR ${q.q1.toFixed(1)}-${q.q3.toFixed(1)}); the next 5 s's p99 ${s.median} ms (IQR ${s.q1}-${s.q3})`,
    );
  }
}

interface MemoryRow {
  build: string;
  phase: string;
  answered: string;
  peak: number;
  rss: number;
  heap: Awaited<ReturnType<typeof heapOf>>;
}

/** One process of `build`: its resident set and heap, idle then at each of `rates` for `duration` s. */
async function memoryOf(build: Build, tenant: Tenant, run: Run, rates: number[], duration: number): Promise<MemoryRow[]> {
  const nexus = await build.start();
  const pool = new Pool(nexus.url, { connections: run.connections, pipelining: 1, keepAliveTimeout: 60_000 });
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMbOf(nexus.child.pid!) ?? 0)), 100);
  const rows: MemoryRow[] = [];
  const sample = async (phase: string, answered = '') => {
    const rss = rssMbOf(nexus.child.pid!) ?? 0;
    rows.push({ build: build.label, phase, answered, peak: Math.max(peak, rss), rss, heap: await heapOf(nexus.url) });
    console.log(JSON.stringify(rows.at(-1)));
    peak = 0;
  };
  try {
    await run.untilReady(nexus.url);
    await sample('ready');
    await new Promise((r) => setTimeout(r, 2000));
    await sample('idle, 2 s after ready');
    const path = `${tenant.gatewayPath}/v1/chat/completions`;
    for (const rate of rates) {
      const t0 = performance.now();
      const measured = await openLoop(pool, path, tenant.apiKeys, rate, duration);
      const answered = Math.round((rate * duration) / ((performance.now() - t0) / 1000));
      await sample(`${rate} requests/s offered, ${duration} s`, `${answered}${measured.non2xx ? `, ${measured.non2xx} non-2xx` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 5000));
    await sample('idle, 5 s after');
  } finally {
    clearInterval(sampler);
    await pool.close();
    await run.stop(nexus.child);
  }
  return rows;
}

/**
 * SCALE_MODE=memory: the resident set and heap of one fresh process of each build per round, idle then at each of
 * `rates` for `duration` s; the highest resident set of each phase (sampled every 100 ms) and the heap at its end.
 */
export async function memory(builds: Build[], tenant: Tenant, run: Run, rates: number[], duration: number, flags: string): Promise<void> {
  const rows: MemoryRow[] = [];
  for (let round = 1; round <= run.rounds; round++)
    for (const build of builds) rows.push(...(await memoryOf(build, tenant, run, rates, duration)));
  const mb = (x: number) => x.toFixed(0);
  console.log(`\n${cpus().length} cores shared, ${run.connections} connections at most, node flags: ${flags || 'none'}\n`);
  console.log(
    '| build | phase | requests/s answered | highest RSS MiB | RSS at its end | V8 heap total / used | of it the young generation | external |',
  );
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows)
    console.log(
      `| ${r.build} | ${r.phase} | ${r.answered} | ${mb(r.peak)} | ${mb(r.rss)} | ${mb(r.heap.heapTotal)} / ${mb(r.heap.heapUsed)} | ${mb(r.heap.newSpace)} | ${mb(r.heap.external)} |`,
    );
}

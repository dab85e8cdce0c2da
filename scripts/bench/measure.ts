/**
 * How `npm run bench` measures one target: autocannon under load (at a fixed offered rate, then at saturation),
 * one request at a time, and the CPU of the proxy's process and of the PostgreSQL backends that serve it, from
 * Linux's /proc.
 */
import autocannon from 'autocannon';
import type pg from 'pg';
import { Pool, request } from 'undici';
import { benchRequestBody } from '../lib/bench-request.js';
import { cpuNanosOf, cpuTimeOf, rssMbOf } from '../lib/proc-cpu.js';
import { addStatements, statementsNow } from './pg-statements.js';
import { CONNECTIONS, DURATION, LIGHT_DURATION, PACING, RATE, RATE_DURATION, WARMUP } from './config.js';
import { openLoop } from '../lib/scale-load.js';

/** One target's figures in one round, for one mode (JSON or a stream). */
export interface Row {
  target: string;
  mode: 'json' | 'stream';
  /** Saturation: requests/s answered, latency under load (ms), the proxy's and PostgreSQL's CPU µs per call. */
  rps: number;
  p50: number;
  p99: number;
  cpuMax?: number | undefined;
  pgMax?: number | undefined;
  /**
   * At BENCH_RATE requests/s offered (at saturation with BENCH_RATE=0): CPU µs per call of the proxy's process (and
   * its user-space part: JavaScript, the HTTP parsers, V8's GC; the rest is the kernel's socket work), of the
   * PostgreSQL backends serving it, and its resident set at the phase's end (MiB).
   */
  cpuProxy?: number | undefined;
  /** Requests/s answered in that phase: BENCH_RATE, unless the target could not keep up (its CPU per call then counts idle work). */
  answered?: number | undefined;
  cpuProxyUser?: number | undefined;
  cpuPg?: number | undefined;
  /** Nexus's statements in that phase, from its /metrics: calls per record statement, lease statements per 1,000 calls. */
  callsPerRecord?: number | undefined;
  leasePer1k?: number | undefined;
  /** PostgreSQL backends of its role opened during that phase (each counted whole in its CPU: its start, its statements' first plans). */
  newBackends?: number | undefined;
  rssMb?: number | undefined;
  /** One request at a time: latency and time to the first body byte (ms). */
  lightP50: number;
  lightP99: number;
  ttfb50?: number | undefined;
  ttfb99?: number | undefined;
  errors: number;
}

/** A target: where its calls go, with which keys, served by which process (pid) and PostgreSQL role. */
export interface Target {
  label: string;
  url: string;
  headers?: Record<string, string>;
  keys?: string[];
  pid?: number | undefined;
  role?: string | undefined;
}

interface Reading {
  ns: number;
  user: number;
  system: number;
}

/** CPU used so far by each of these processes that still runs. */
function read(pids: number[]): Map<number, Reading> {
  const out = new Map<number, Reading>();
  for (const pid of pids) {
    try {
      out.set(pid, { ns: cpuNanosOf(pid), ...cpuTimeOf(pid) });
    } catch {
      // gone (or no /proc): not counted
    }
  }
  return out;
}

/**
 * CPU µs per call between two readings (all of it, and its user-space part): the processes present at both, and
 * with `countNew` those present only at the second whole (a PostgreSQL backend the pool opened meanwhile).
 */
function perCall(before: Map<number, Reading>, after: Map<number, Reading>, calls: number, countNew = false) {
  if (!after.size || !calls) return undefined;
  let ns = 0;
  let user = 0;
  let ticks = 0;
  for (const [pid, a] of after) {
    const b = before.get(pid) ?? (countNew ? { ns: 0, user: 0, system: 0 } : undefined);
    if (!b) continue;
    ns += a.ns - b.ns;
    user += a.user - b.user;
    ticks += a.user - b.user + a.system - b.system;
  }
  const all = ns / 1e3 / calls;
  return { all, user: ticks > 0 ? (all * user) / ticks : undefined };
}

/** The backends of PostgreSQL role `role` now (each Nexus process connects as its own). */
async function backendsOf(admin: pg.Client, role: string | undefined): Promise<number[]> {
  if (!role) return [];
  const { rows } = await admin.query<{ pid: number }>('select pid from pg_stat_activity where usename = $1', [role]);
  return rows.map((r) => r.pid);
}

/**
 * Load for `duration` s: at `rate` requests/s offered, evenly paced over a pool of `connections` (openLoop), or in
 * bursts with BENCH_PACING=bursts (config.ts's PACING says why the two differ); without a rate, at saturation.
 */
async function cannon(t: Target, body: string, connections: number, duration: number, rate?: number) {
  if (rate && PACING === 'even') {
    const url = new URL(t.url);
    const pool = new Pool(url.origin, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
    try {
      const load = await openLoop(pool, url.pathname + url.search, t.keys ?? [], rate, duration, body, t.headers);
      return { rps: load.calls / duration, calls: load.calls, p50: load.p50, p99: load.p99, errors: load.non2xx };
    } finally {
      await pool.close();
    }
  }
  let next = 0;
  const keys = t.keys ?? [];
  const requests = keys.length
    ? [{ setupRequest: (r: any) => ({ ...r, headers: { ...r.headers, authorization: `Bearer ${keys[next++ % keys.length]}` } }) }]
    : undefined;
  const result = await autocannon({
    url: t.url,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...t.headers },
    body,
    connections,
    duration,
    pipelining: 1,
    ...(requests ? { requests } : {}),
    ...(rate ? { overallRate: rate } : {}),
  });
  return {
    rps: result.requests.total / duration,
    calls: result.requests.total,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx + result.timeouts,
  };
}

/** Nexus's statement counters so far (its /metrics): record statements, the calls they wrote, lease statements. */
async function statementsOf(t: Target): Promise<{ records: number; recorded: number; lease: number } | undefined> {
  if (!t.role) return undefined;
  const res = await request(new URL('/metrics', t.url));
  const text = await res.body.text();
  const sum = (pattern: RegExp) => [...text.matchAll(pattern)].reduce((n, m) => n + Number(m[1]), 0);
  return {
    records: sum(/^nexus_recorder_batch_size_count (\S+)$/gm),
    recorded: sum(/^nexus_recorder_batch_size_sum (\S+)$/gm),
    lease: sum(/^nexus_quota_lease_statements_total\{[^}]*\} (\S+)$/gm),
  };
}

/** One load phase: autocannon, with the CPU of the target's process and PostgreSQL backends read around it. */
async function phase(admin: pg.Client, t: Target, body: string, connections: number, duration: number, rate?: number) {
  const pids = t.pid ? [t.pid] : [];
  const counted = await statementsOf(t);
  const pgBefore = rate ? await statementsNow(admin, t.role) : undefined;
  const before = [read(pids), read(await backendsOf(admin, t.role))];
  const load = await cannon(t, body, connections, duration, rate);
  const after = [read(pids), read(await backendsOf(admin, t.role))];
  const mode = body.includes('"stream":true') ? 'stream' : 'json';
  addStatements(`${t.label} ${mode}`, pgBefore, rate ? await statementsNow(admin, t.role) : undefined, load.calls);
  const proxy = perCall(before[0]!, after[0]!, load.calls);
  const counts = await statementsOf(t);
  return {
    load,
    proxy,
    statements:
      counted && counts && counts.records > counted.records
        ? {
            callsPerRecord: (counts.recorded - counted.recorded) / (counts.records - counted.records),
            leasePer1k: ((counts.lease - counted.lease) * 1000) / load.calls,
          }
        : undefined,
    pg: t.role ? perCall(before[1]!, after[1]!, load.calls, true) : undefined,
    newBackends: t.role ? [...after[1]!.keys()].filter((pid) => !before[1]!.has(pid)).length : undefined,
    rss: t.pid ? rssMbOf(t.pid) : undefined,
  };
}

/** One request at a time (precise timings): total latency and time to the first body byte. */
async function sequential(t: Target, body: string, seconds: number) {
  const headers = {
    'content-type': 'application/json',
    ...t.headers,
    ...(t.keys?.length ? { authorization: `Bearer ${t.keys[0]}` } : {}),
  };
  const totals: number[] = [];
  const firsts: number[] = [];
  let errors = 0;
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    const t0 = process.hrtime.bigint();
    const res = await request(t.url, { method: 'POST', headers, body });
    let first: bigint | undefined;
    for await (const _ of res.body) first ??= process.hrtime.bigint();
    const end = process.hrtime.bigint();
    if (res.statusCode !== 200) errors++;
    totals.push(Number(end - t0) / 1e6);
    firsts.push(Number((first ?? end) - t0) / 1e6);
  }
  const pct = (xs: number[], p: number) => xs.sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
  return { p50: pct(totals, 0.5), p99: pct(totals, 0.99), ttfb50: pct(firsts, 0.5), ttfb99: pct(firsts, 0.99), errors };
}

/**
 * A target, JSON then streamed: a warm-up at saturation; BENCH_RATE requests/s offered (CPU per call, RSS); saturation
 * (requests/s, latency under load); one request at a time (latency, time to first byte).
 */
export async function measure(admin: pg.Client, t: Target): Promise<Row[]> {
  const rows: Row[] = [];
  for (const stream of [false, true]) {
    const body = benchRequestBody(stream);
    if (WARMUP > 0) await cannon(t, body, CONNECTIONS, WARMUP);
    const fixed = RATE ? await phase(admin, t, body, CONNECTIONS, RATE_DURATION, RATE) : undefined;
    const max = await phase(admin, t, body, CONNECTIONS, DURATION);
    const light = await sequential(t, body, LIGHT_DURATION);
    const cpu = fixed ?? max;
    rows.push({
      target: t.label,
      mode: stream ? 'stream' : 'json',
      rps: max.load.rps,
      p50: max.load.p50,
      p99: max.load.p99,
      cpuMax: max.proxy?.all,
      pgMax: max.pg?.all,
      cpuProxy: cpu.proxy?.all,
      answered: cpu.load.rps,
      cpuProxyUser: cpu.proxy?.user,
      cpuPg: cpu.pg?.all,
      callsPerRecord: cpu.statements?.callsPerRecord,
      leasePer1k: cpu.statements?.leasePer1k,
      newBackends: cpu.newBackends,
      rssMb: cpu.rss,
      lightP50: light.p50,
      lightP99: light.p99,
      ttfb50: stream ? light.ttfb50 : undefined,
      ttfb99: stream ? light.ttfb99 : undefined,
      errors: (fixed?.load.errors ?? 0) + max.load.errors + light.errors,
    });
    process.stderr.write(
      `  ${t.label} ${stream ? 'stream' : 'json'}: ${Math.round(max.load.rps)} req/s${cpu.proxy ? `, ${Math.round(cpu.proxy.all)} µs/call` : ''}\n`,
    );
  }
  return rows;
}

/**
 * BENCH_TOGETHER: the Nexus processes loaded at the same time, each at its share of BENCH_RATE (or at saturation
 * with BENCH_RATE=0), so the host's moment (another tenant, a slower core) weighs on each alike; their CPU per call
 * compares within each round. No light phase (its latencies would measure the other build's load).
 */
export async function measureTogether(admin: pg.Client, targets: Target[]): Promise<Row[]> {
  const rows: Row[] = [];
  const connections = Math.max(1, Math.floor(CONNECTIONS / targets.length));
  const rate = RATE ? RATE / targets.length : undefined;
  const duration = RATE ? RATE_DURATION : DURATION;
  for (const stream of [false, true]) {
    const body = benchRequestBody(stream);
    await Promise.all(targets.map((t) => cannon(t, body, connections, Math.max(1, WARMUP))));
    const phases = await Promise.all(targets.map((t) => phase(admin, t, body, connections, duration, rate)));
    for (const [i, t] of targets.entries()) {
      const { load, proxy, pg, rss, statements, newBackends } = phases[i]!;
      rows.push({
        target: t.label,
        mode: stream ? 'stream' : 'json',
        rps: load.rps,
        p50: load.p50,
        p99: load.p99,
        cpuProxy: proxy?.all,
        answered: rate ? load.rps : undefined,
        cpuProxyUser: proxy?.user,
        cpuPg: pg?.all,
        callsPerRecord: statements?.callsPerRecord,
        leasePer1k: statements?.leasePer1k,
        newBackends,
        rssMb: rss,
        lightP50: NaN,
        lightP99: NaN,
        errors: load.errors,
      });
    }
  }
  return rows;
}

/**
 * Runs measurements one after the other, in the reverse order every other round: the host's noise drifts, and
 * the one measured second tends to come out slower. Their results keep the given order.
 */
export async function inTurn<T>(round: number, runs: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array(runs.length);
  const order = runs.map((_, i) => i);
  if (round % 2) order.reverse();
  for (const i of order) results[i] = await runs[i]!();
  return results;
}

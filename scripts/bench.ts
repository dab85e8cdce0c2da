/**
 * `npm run bench`: what the gateway costs. One run starts, each in its own process,
 *   - an upstream that answers at once (a chat completion, JSON or SSE, with usage),
 *   - the floor: a bare undici passthrough written for this benchmark (keep-alive pool, piped body),
 *   - Nexus on PostgreSQL with auth, reservation and metering on,
 * then measures each for a fixed duration with autocannon: direct to the upstream, through the
 * floor, through Nexus; non-streaming and streaming. Two phases per target: under load
 * (BENCH_CONNECTIONS connections: requests/s) and light (1 connection: p50/p99 latency and, for
 * streams, time to first byte). It prints requests/s, p50 and p99 and the ratios Nexus/floor, and
 * for the load phase the CPU time per request of the proxy's process (and how much of it is user space:
 * JavaScript, the HTTP parsers and V8's GC; the rest is the kernel's socket work) and of PostgreSQL's processes
 * (from /proc, so Linux only; PostgreSQL's figure counts the backends present before and after).
 *
 *   BENCH_DURATION=10 BENCH_CONNECTIONS=32 BENCH_PROFILE=1 npm run bench
 *
 * BENCH_ROUNDS=3 repeats the whole measurement and prints each figure's median over the rounds, and the
 * throughput ratio of each target's best round (the host's noise only slows a target down).
 * BENCH_TARGETS='floor;nexus' measures only those targets, separated by ';' (their names: direct, floor,
 * nexus, 'nexus, 1 user', 'nexus, unmetered'); the ratios need floor and nexus.
 * BENCH_PROFILE=1 writes a V8 CPU profile of the Nexus process to bench-profiles/;
 * BENCH_NODE_FLAGS='--max-semi-space-size=32' passes node/V8 flags to the Nexus process (to compare them);
 * NEXUS_GATEWAY_ASYNC_COMMIT=true is passed on to Nexus (to compare that durability trade).
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): Nexus runs in a fresh
 * schema, dropped at the end.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { Pool, request } from 'undici';

const role = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** End users (inference keys) the Nexus load is spread over; a second Nexus row runs with one. */
const USERS = Number(process.env.BENCH_USERS ?? 64);
/** Rounds of the whole measurement; each figure printed is its median over them (the machine's noise is large). */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 1));
const TARGETS = process.env.BENCH_TARGETS?.split(';').map((t) => t.trim());
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROOT_KEY = 'nx-mgmt-bench-root-0123456789abcdefghijklmnop';
const PROVIDER_KEY = 'sk-bench-upstream-0123456789';

function announce(port: number): void {
  process.stdout.write(JSON.stringify({ port }) + '\n');
}

// ---- upstream: answers at once -------------------------------------------------------------
const usage = { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17, prompt_tokens_details: { cached_tokens: 0 } };
const JSON_ANSWER = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: 'bench-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'alpha beta gamma delta epsilon' }, finish_reason: 'stop' }],
  usage,
});
const chunk = (choices: unknown[], extra: object = {}) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'bench-model', choices, usage: null, ...extra })}\n\n`;
const SSE_ANSWER =
  chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]) +
  ['alpha', ' beta', ' gamma', ' delta', ' epsilon'].map((w) => chunk([{ index: 0, delta: { content: w }, finish_reason: null }])).join('') +
  chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]) +
  chunk([], { usage }) +
  'data: [DONE]\n\n';

function runUpstream(): void {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const stream = Buffer.concat(chunks).includes('"stream":true');
      if (stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'req_bench' });
        res.end(SSE_ANSWER);
      } else {
        res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req_bench', 'content-length': Buffer.byteLength(JSON_ANSWER) });
        res.end(JSON_ANSWER);
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => announce((server.address() as AddressInfo).port));
}

// ---- floor: a bare undici passthrough ------------------------------------------------------
function runFloor(upstreamUrl: string): void {
  const pool = new Pool(upstreamUrl, { connections: 256, keepAliveTimeout: 30_000 });
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = Buffer.concat(chunks);
      const upstream = await pool.request({
        method: req.method as 'POST',
        path: req.url!.replace(/^\/providers\/[^/]+/, ''),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${PROVIDER_KEY}`, 'content-length': String(body.length) },
        body,
      });
      res.statusCode = upstream.statusCode;
      res.setHeader('content-type', String(upstream.headers['content-type']));
      for await (const c of upstream.body) if (!res.write(c)) await new Promise((r) => res.once('drain', r));
      res.end();
    } catch {
      res.statusCode = 502;
      res.end();
    }
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => announce((server.address() as AddressInfo).port));
}

// ---- nexus ---------------------------------------------------------------------------------
async function runNexus(schema: string): Promise<void> {
  const { buildApp, listen } = await import('../src/app.js');
  const { loadConfig } = await import('../src/config.js');
  const config = loadConfig({
    NODE_ENV: 'production',
    PORT: '0',
    DATABASE_URL,
    NEXUS_DATABASE_SCHEMA: schema,
    NEXUS_MANAGEMENT_KEY: ROOT_KEY,
    NEXUS_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
    NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
    NEXUS_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    // The one durability knob, to compare (off by default, as in production).
    ...(process.env.NEXUS_GATEWAY_ASYNC_COMMIT ? { NEXUS_GATEWAY_ASYNC_COMMIT: process.env.NEXUS_GATEWAY_ASYNC_COMMIT } : {}),
  });
  const nexus = await buildApp(config, { skipRootKey: false });
  const running = await listen(nexus, 0, '127.0.0.1', 2000);
  announce(Number(new URL(running.url).port));
  const stop = async () => {
    await running.shutdown();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

// ---- the driver ----------------------------------------------------------------------------
function start(name: string, args: string[], env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string }> {
  const self = fileURLToPath(import.meta.url);
  const nodeArgs = [...(name === 'nexus' && process.env.BENCH_NODE_FLAGS ? process.env.BENCH_NODE_FLAGS.split(' ') : []), '--import', 'tsx'];
  if (name === 'nexus' && process.env.BENCH_PROFILE) nodeArgs.push('--cpu-prof', '--cpu-prof-dir=bench-profiles');
  const child = spawn(process.execPath, [...nodeArgs, self, `--role=${name}`, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let buffer = '';
    const onData = (d: Buffer) => {
      buffer += d.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop()!;
      for (const line of lines) {
        let port: number | undefined;
        try {
          port = (JSON.parse(line) as { port?: number }).port;
        } catch {
          // not our line
        }
        if (!port) {
          process.stderr.write(line + '\n');
          continue;
        }
        // What the process prints from now on (its warnings, a node flag's trace) goes to stderr, as it comes.
        child.stdout!.off('data', onData);
        child.stdout!.pipe(process.stderr);
        return resolve({ child, url: `http://127.0.0.1:${port}` });
      }
    };
    child.stdout!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
  });
}

async function admin<T>(base: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await request(`${base}/admin/v1${path}`, {
    method: method as 'POST',
    headers: { authorization: `Bearer ${ROOT_KEY}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${text}`);
  return JSON.parse(text) as T;
}

/** A tenant with USERS end users on a plan with a huge quota, through the Admin API. */
async function provision(nexusUrl: string, upstreamUrl: string): Promise<{ gatewayBaseUrl: string; apiKeys: string[] }> {
  const ws = await admin<{ id: string }>(nexusUrl, 'POST', '/workspaces', { name: 'bench', allowUnmeteredPassthrough: true });
  const conn = await admin<{ id: string; gatewayBaseUrl: string }>(nexusUrl, 'POST', `/workspaces/${ws.id}/provider-connections`, {
    name: 'bench upstream',
    protocolProfile: 'openai',
    baseUrl: upstreamUrl,
    apiKey: PROVIDER_KEY,
  });
  const plan = await admin<{ id: string }>(nexusUrl, 'POST', `/workspaces/${ws.id}/plans`, { key: 'bench', name: 'Bench', billingInterval: 'MONTH' });
  const strategy = await admin<{ id: string }>(nexusUrl, 'POST', `/workspaces/${ws.id}/plan-strategies/quota`, {
    key: 'bench',
    resetInterval: 'MONTH',
    quotaUnits: '1000000000000000',
    inputMultiplierPpm: '1000000',
    outputMultiplierPpm: '2000000',
    cachedInputMultiplierPpm: '500000',
    maxOutputTokens: 4096,
  });
  await admin(nexusUrl, 'POST', `/plan-strategies/${strategy.id}/publish`);
  await admin(nexusUrl, 'POST', `/plans/${plan.id}/strategy-bindings`, { strategyId: strategy.id, effectiveFrom: new Date(Date.now() - 60_000).toISOString() });
  await admin(nexusUrl, 'POST', `/plans/${plan.id}/publish`);
  const apiKeys: string[] = [];
  for (let i = 0; i < USERS; i++) {
    const user = await admin<{ apiKey: string }>(nexusUrl, 'POST', `/workspaces/${ws.id}/users`, {
      externalUserId: `bench-user-${i}`,
      email: `bench${i}@example.com`,
      planId: plan.id,
      issueInferenceKey: true,
    });
    apiKeys.push(user.apiKey);
  }
  return { gatewayBaseUrl: conn.gatewayBaseUrl, apiKeys };
}

interface Row {
  target: string;
  mode: string;
  rps: number;
  p50: number;
  p99: number;
  lightP50: number;
  lightP99: number;
  ttfb50?: number | undefined;
  errors: number;
  /** CPU time per request under load, in microseconds: the proxy's process (and its user-space part), and PostgreSQL's processes. */
  cpuProxy?: number | undefined;
  cpuProxyUser?: number | undefined;
  cpuPg?: number | undefined;
}

interface CpuTime {
  user: number;
  system: number;
}

/** Each figure of each (target, mode) row: the median over the rounds (the errors: their sum). */
function medianRows(rounds: Row[][]): Row[] {
  const median = (xs: (number | undefined)[]): number | undefined => {
    const known = xs.filter((x): x is number => x !== undefined).sort((p, q) => p - q);
    if (!known.length) return undefined;
    const mid = known.length >> 1;
    return known.length % 2 ? known[mid] : (known[mid - 1]! + known[mid]!) / 2;
  };
  return rounds[0]!.map((first, i) => {
    const same = rounds.map((r) => r[i]!);
    const pick = (k: keyof Row) => median(same.map((r) => r[k] as number | undefined));
    return {
      target: first.target,
      mode: first.mode,
      rps: pick('rps')!,
      p50: pick('p50')!,
      p99: pick('p99')!,
      lightP50: pick('lightP50')!,
      lightP99: pick('lightP99')!,
      ttfb50: pick('ttfb50'),
      errors: same.reduce((n, r) => n + r.errors, 0),
      cpuProxy: pick('cpuProxy'),
      cpuProxyUser: pick('cpuProxyUser'),
      cpuPg: pick('cpuPg'),
    };
  });
}

/** CPU seconds (user, system) used so far by each of these processes that still runs (Linux /proc). */
function cpuByPid(pids: number[]): Map<number, CpuTime> {
  const out = new Map<number, CpuTime>();
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(pid, { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 }); // USER_HZ
    } catch {
      // gone (or no /proc): not counted
    }
  }
  return out;
}

/** CPU seconds the processes present at both readings used between them; undefined without /proc. */
function cpuBetween(before: Map<number, CpuTime>, after: Map<number, CpuTime>): CpuTime | undefined {
  if (!before.size || !after.size) return undefined;
  const used = { user: 0, system: 0 };
  for (const [pid, t] of after) {
    const b = before.get(pid);
    if (!b) continue;
    used.user += t.user - b.user;
    used.system += t.system - b.system;
  }
  return used;
}

function postgresPids(): number[] {
  try {
    return readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .filter((d) => {
        try {
          return readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'postgres';
        } catch {
          return false;
        }
      })
      .map(Number);
  } catch {
    return [];
  }
}

async function cannon(url: string, headers: Record<string, string>, body: string, connections: number, duration: number, keys: string[] = []) {
  let next = 0;
  const requests = keys.length
    ? [{ setupRequest: (r: any) => ({ ...r, headers: { ...r.headers, authorization: `Bearer ${keys[next++ % keys.length]}` } }) }]
    : undefined;
  const result = await autocannon({ url, method: 'POST', headers, body, connections, duration, pipelining: 1, ...(requests ? { requests } : {}) } as autocannon.Options);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.non2xx + result.timeouts };
}

/** One request at a time (precise timings): total latency and time to the first body byte. */
async function sequential(url: string, headers: Record<string, string>, body: string, seconds: number) {
  const totals: number[] = [];
  const firsts: number[] = [];
  let errors = 0;
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    const t0 = process.hrtime.bigint();
    const res = await request(url, { method: 'POST', headers, body });
    let first: bigint | undefined;
    for await (const _ of res.body) first ??= process.hrtime.bigint();
    const end = process.hrtime.bigint();
    if (res.statusCode !== 200) errors++;
    totals.push(Number(end - t0) / 1e6);
    firsts.push(Number((first ?? end) - t0) / 1e6);
  }
  const pct = (xs: number[], p: number) => xs.sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
  return { p50: pct(totals, 0.5), p99: pct(totals, 0.99), ttfb50: pct(firsts, 0.5), errors };
}

async function measure(target: string, url: string, headers: Record<string, string>, keys: string[] = [], pid?: number): Promise<Row[]> {
  const rows: Row[] = [];
  if (TARGETS && !TARGETS.includes(target)) return rows;
  for (const stream of [false, true]) {
    const body = JSON.stringify({
      model: 'bench-model',
      messages: [{ role: 'user', content: 'Say five words.' }],
      max_tokens: 16,
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    });
    const h = { 'content-type': 'application/json', ...headers };
    await cannon(url, h, body, CONNECTIONS, 2, keys); // warm-up
    const pgPids = postgresPids();
    const before = [cpuByPid(pid ? [pid] : []), cpuByPid(pgPids)];
    const load = await cannon(url, h, body, CONNECTIONS, DURATION, keys);
    const after = [cpuByPid(pid ? [pid] : []), cpuByPid(pgPids)];
    const perRequest = (i: number, part: 'all' | 'user' = 'all') => {
      const used = cpuBetween(before[i]!, after[i]!);
      if (!used) return undefined;
      const seconds = part === 'user' ? used.user : used.user + used.system;
      return (seconds * 1e6) / (load.rps * DURATION);
    };
    const light = await sequential(url, keys.length ? { ...h, authorization: `Bearer ${keys[0]}` } : h, body, Math.max(3, Math.round(DURATION / 2)));
    rows.push({
      target,
      mode: stream ? 'stream' : 'json',
      rps: load.rps,
      p50: load.p50,
      p99: load.p99,
      lightP50: light.p50,
      lightP99: light.p99,
      ttfb50: stream ? light.ttfb50 : undefined,
      errors: load.errors + light.errors,
      cpuProxy: perRequest(0),
      cpuProxyUser: perRequest(0, 'user'),
      cpuPg: perRequest(1),
    });
    process.stderr.write(`  ${target} ${stream ? 'stream' : 'json'}: ${Math.round(load.rps)} req/s\n`);
  }
  return rows;
}

async function main(): Promise<void> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const children: ChildProcess[] = [];
  try {
    const upstream = await start('upstream', []);
    children.push(upstream.child);
    const floor = await start('floor', [upstream.url]);
    children.push(floor.child);
    const nexus = await start('nexus', [schema]);
    children.push(nexus.child);
    const tenant = await provision(nexus.url, upstream.url);
    process.stderr.write(`Measuring ${DURATION}s per phase, ${CONNECTIONS} connections under load...\n`);
    const path = '/v1/chat/completions';
    const rounds: Row[][] = [];
    for (let round = 0; round < ROUNDS; round++) {
      if (ROUNDS > 1) process.stderr.write(`Round ${round + 1} of ${ROUNDS}\n`);
      rounds.push([
        ...(await measure('direct', `${upstream.url}${path}`, { authorization: `Bearer ${PROVIDER_KEY}` })),
        ...(await measure('floor', `${floor.url}/providers/x${path}`, {}, [], floor.child.pid)),
        ...(await measure(`nexus`, `${tenant.gatewayBaseUrl}${path}`, {}, tenant.apiKeys, nexus.child.pid)),
        ...(await measure('nexus, 1 user', `${tenant.gatewayBaseUrl}${path}`, { authorization: `Bearer ${tenant.apiKeys[0]}` }, [], nexus.child.pid)),
        // Diagnostic: the same proxy without metering (an endpoint with no usage inspector, passthrough allowed).
        ...(await measure('nexus, unmetered', `${tenant.gatewayBaseUrl}/v1/unmetered`, {}, tenant.apiKeys, nexus.child.pid)),
      ]);
    }
    const rows = medianRows(rounds);
    const f = (n: number | undefined, d = 2) => (n === undefined ? '-' : n.toFixed(d));
    console.log(`\nGateway overhead (${new Date().toISOString()}; ${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; PostgreSQL at ${new URL(DATABASE_URL).host})`);
    if (ROUNDS > 1) console.log(`each figure: the median of ${ROUNDS} rounds, the targets measured in turn in each`);
    console.log(`load: autocannon, ${CONNECTIONS} connections for ${DURATION}s (latencies in whole ms); light: one request at a time (latencies in ms, hrtime); nexus: calls spread over ${USERS} users (inference keys), 'nexus, 1 user': every call on one key\n`);
    console.log('| target | mode | req/s (load) | p50 (load) | p99 (load) | p50 (light) | p99 (light) | TTFB p50 | CPU µs/req (proxy) | of which user | CPU µs/req (PostgreSQL) | errors |');
    console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) {
      console.log(
        `| ${r.target} | ${r.mode} | ${Math.round(r.rps)} | ${f(r.p50)} | ${f(r.p99)} | ${f(r.lightP50)} | ${f(r.lightP99)} | ${f(r.ttfb50)} | ${f(r.cpuProxy, 0)} | ${f(r.cpuProxyUser, 0)} | ${f(r.cpuPg, 0)} | ${r.errors} |`,
      );
    }
    // The host's noise only ever slows a target down, and it hit the floor and Nexus in different rounds: the
    // best round of each is the closest to what each can do, so the ratio of the best rounds is printed too.
    const best = (target: string, mode: string) =>
      Math.max(...rounds.map((round) => round.find((r) => r.target === target && r.mode === mode)?.rps ?? 0));
    console.log('\n| mode | Nexus/floor req/s | (1 user) | best round of each | added p50 (light) | added p99 (light) | added TTFB p50 |');
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    for (const mode of ['json', 'stream']) {
      const fl = rows.find((r) => r.target === 'floor' && r.mode === mode);
      const nx = rows.find((r) => r.target === 'nexus' && r.mode === mode);
      if (!fl || !nx) continue;
      const one = rows.find((r) => r.target === 'nexus, 1 user' && r.mode === mode);
      const share = (r: Row | undefined) => (r ? `${((100 * r.rps) / fl.rps).toFixed(1)}%` : '-');
      const bestShare = `${((100 * best('nexus', mode)) / best('floor', mode)).toFixed(1)}%`;
      const ttfbDelta = nx.ttfb50 !== undefined && fl.ttfb50 !== undefined ? f(nx.ttfb50 - fl.ttfb50) : '-';
      console.log(`| ${mode} | ${share(nx)} | ${share(one)} | ${bestShare} | ${f(nx.lightP50 - fl.lightP50)} | ${f(nx.lightP99 - fl.lightP99)} | ${ttfbDelta} |`);
    }
  } finally {
    for (const child of children.reverse()) child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 1500));
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect().then(
      () => client.query(`drop schema if exists "${schema}" cascade`).finally(() => client.end()),
      () => {},
    );
  }
}

if (role === 'upstream') runUpstream();
else if (role === 'floor') runFloor(process.argv.at(-1)!);
else if (role === 'nexus') void runNexus(process.argv.at(-1)!);
else
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });

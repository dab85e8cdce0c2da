/**
 * `npm run bench`: what the gateway costs. One run starts, each in its own process,
 *   - an upstream that answers at once (a chat completion, JSON or SSE, with usage: test/support/upstreams/openai.ts,
 *     startFixedOpenAiUpstream),
 *   - the floor: a bare undici passthrough written for this benchmark (keep-alive pool, piped body),
 *   - Nexus on PostgreSQL with auth, quota leases and metering on, started as `npm start` starts it (the compiled
 *     dist/server.js; BENCH_NEXUS='compiled;tsx' adds the same server run from source through tsx, measured in
 *     turn with the other targets in each round, so the two compare within one run),
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
 * nexus, 'nexus, 1 user', 'nexus, unmetered', the optional ones below, and those of the tsx build below); the
 * ratios need floor and nexus.
 * BENCH_RATE=1500 holds the load phase to that many requests a second, below what every target answers: each
 * process then does the same work in each round, whatever the others' speed, and its CPU per call is steadier than
 * at saturation (the figure to compare builds by; the req/s shares then say nothing).
 * BENCH_TOGETHER=1 loads the Nexus builds of BENCH_NEXUS at the same time in each round (with BENCH_RATE, each at
 * its share of it; with BENCH_FEATURES=1, the tenant with rules and limits in a process of its own beside each),
 * so the host's moment weighs on each alike: the way to tell two builds' CPU per call apart (measureTogether).
 * BENCH_NEXUS='compiled;compiled' is then the method's own noise: one build against itself.
 * BENCH_PROFILE=1 writes a V8 CPU profile of the Nexus process to bench-profiles/;
 * BENCH_NODE_FLAGS='--max-semi-space-size=32' passes node/V8 flags to the Nexus process (to compare them);
 * NEXUS_GATEWAY_ASYNC_COMMIT=true is passed on to Nexus (to compare that durability trade).
 * BENCH_NEXUS: which builds of Nexus to run, separated by ';': compiled (the default: `npm start`'s command,
 * after `npm run build:server`) and tsx (src/server.ts through tsx, as `npm run dev`); the targets of the tsx
 * build are named 'nexus (tsx)', 'nexus (tsx), 1 user', 'nexus (tsx), unmetered'; and checkout=<dir>, the compiled
 * build of another checkout of Nexus (a git worktree of an earlier commit, say), built and started with that
 * checkout's own scripts and migrations, its targets named 'nexus (<dir's last name>)'. Builds are measured in turn in
 * each round, their order reversed every other round, so two commits compare within one run:
 *   git worktree add --detach ../before HEAD~1 && (cd ../before && ln -s ../<this checkout>/node_modules .)
 *   BENCH_NEXUS='compiled;checkout=../before' BENCH_ROUNDS=6 BENCH_TARGETS='floor;nexus;nexus (before)' npm run bench
 * BENCH_FEATURES=1 adds the target 'nexus, rules and limits': the same load on end users whose strategy has
 * per-model pricing (docs/pricing.md: 24 model rules, the benchmark's model matched by the last, and an allow-list
 * of 12 patterns with it last) and whose plan has generous rate limits (docs/rate-limits.md: requests and tokens
 * per minute, concurrent calls, none reached), and whose workspace prices every model (docs/pricing.md, the price
 * book), measured beside 'nexus' in each round, first and second in turn (inTurn); it prints that target's
 * throughput as a share of the plain one's. With BENCH_TOGETHER=1 it has a process of its own, loaded at the same
 * time as the plain one's (BENCH_FEATURED_FIRST=1 starts it first).
 * BENCH_ROUTE=1 adds the target 'nexus, route': the same load through a route (docs/routes.md) whose one target is
 * the plain target's connection, measured beside 'nexus' in each round, first and second in turn (inTurn); it
 * prints that target's throughput as a share of the connection's (the route's cost: at most 5% is the goal).
 * BENCH_EVENTS=1 adds the target 'nexus, events': the same load on a tenant whose workspace has a webhook endpoint
 * subscribed to quota.threshold_crossed (docs/events.md), answered 204 by a receiver process of the benchmark. The
 * plain target's settlements run the threshold CTEs too (every period has thresholds: 80 and 100 by default) but
 * never reach one; this one measures what crossing them adds: the marks, events and webhook messages its settlement
 * statements write, and the delivery worker that sends them, in the same process. Its end
 * users are spread over 16 plans with thresholds at 1, 2, 3, 4 and 5% and grants from 4,000,000 to 80,000,000 units
 * (a threshold every 2,000 to 40,000 calls of the benchmark's 20 units): the users of the smaller plans cross
 * theirs at different points of the run, so the outbox is written now and then under load, and none runs out of
 * quota (a call reserves its bound, about 8,200 units with the plans' output cap, and a process's lease holds many
 * calls' bounds: smaller grants ran out within three rounds). It is measured beside
 * 'nexus' in each round, first and second in turn (inTurn), and its throughput printed as a share of the plain
 * one's (at most 3% less is the goal), with the deliveries the receiver got.
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): Nexus runs in a fresh
 * schema, dropped at the end.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, totalmem } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { Pool, request } from 'undici';
import { activePlan, adminClient, provisionTenant, type TenantSpec } from '../test/support/tenant.js';
import { createModelPrice, createRoute, createWebhookEndpoint, provisionWorkspaceUser } from '../test/support/sdk.js';
import { startFixedOpenAiUpstream } from '../test/support/upstreams/openai.js';
import { benchRequestBody } from './lib/bench-request.js';
import { cpuTimeOf, type CpuTime } from './lib/proc-cpu.js';

const role = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** End users (inference keys) the Nexus load is spread over; a second Nexus row runs with one. */
const USERS = Number(process.env.BENCH_USERS ?? 64);
/** Rounds of the whole measurement; each figure printed is its median over them (the machine's noise is large). */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 1));
const TARGETS = process.env.BENCH_TARGETS?.split(';').map((t) => t.trim());
const BUILDS = (process.env.BENCH_NEXUS ?? 'compiled').split(';').map((b) => b.trim());
for (const build of BUILDS)
  if (build !== 'compiled' && build !== 'tsx' && !build.startsWith('checkout='))
    throw new Error(`BENCH_NEXUS: unknown build '${build}' (compiled, tsx, checkout=<dir>)`);
/** Requests per second the load phase holds to (autocannon's overallRate); unset: as many as the target answers. */
const RATE = process.env.BENCH_RATE ? Number(process.env.BENCH_RATE) : undefined;
/** BENCH_TOGETHER=1: the Nexus builds under load at the same time (measureTogether). */
const TOGETHER = process.env.BENCH_TOGETHER === '1';
const FEATURES = process.env.BENCH_FEATURES === '1';
/** The suffix of the targets with rules and limits (BENCH_FEATURES). */
const FEATURED = ', rules and limits';
const ROUTE = process.env.BENCH_ROUTE === '1';
const EVENTS = process.env.BENCH_EVENTS === '1';
/** BENCH_EVENTS: the plans the events tenant's users are spread over, their thresholds, and the smallest grant. */
const EVENT_PLANS = 16;
const EVENT_THRESHOLDS = [1, 2, 3, 4, 5];
const EVENT_SMALLEST_GRANT = 4_000_000;
/** The largest grant, as a multiple of the smallest; the plans' grants grow geometrically between them. */
const EVENT_GRANT_SPREAD = 20;
/** Limits no bench load reaches: what admitting against them costs, not a refusal. */
const GENEROUS_LIMITS = { requestsPerMinute: 100_000_000, tokensPerMinute: 2_000_000_000, concurrentCalls: 100_000 };
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ROOT_KEY = 'nx-mgmt-bench-root-0123456789abcdefghijklmnop';
const PROVIDER_KEY = 'sk-bench-upstream-0123456789';

function announce(port: number): void {
  process.stdout.write(JSON.stringify({ port }) + '\n');
}

// ---- upstream: answers at once -------------------------------------------------------------
async function runUpstream(): Promise<void> {
  const upstream = await startFixedOpenAiUpstream();
  announce(Number(new URL(upstream.url).port));
}

// ---- receiver: a webhook endpoint that answers 204 (BENCH_EVENTS) --------------------------
function runReceiver(): void {
  let received = 0;
  const server = createServer((req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ received }));
      return;
    }
    req.resume();
    req.on('end', () => {
      received++;
      res.writeHead(204);
      res.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => announce((server.address() as AddressInfo).port));
}

// ---- floor: a bare undici passthrough ------------------------------------------------------
function runFloor(upstreamUrl: string): void {
  const pool = new Pool(upstreamUrl, { connections: 256, keepAliveTimeout: 30_000 });
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- the body is one try/catch: a failure answers 502
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
const projectRoot = join(fileURLToPath(import.meta.url), '..', '..');

/** A port free now (the server binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** The checkout a build runs from: this one, or another's for checkout=<dir>. */
function checkoutRoot(build: string): string {
  return build.startsWith('checkout=') ? resolve(build.slice('checkout='.length)) : projectRoot;
}

function buildLabel(build: string): string {
  if (build === 'compiled') return 'nexus';
  if (build === 'tsx') return 'nexus (tsx)';
  return `nexus (${basename(checkoutRoot(build))})`;
}

/**
 * Nexus through its real entry point: the compiled build with `npm start`'s own command line, or
 * src/server.ts through tsx. Ready when /readyz answers 200.
 */
async function startNexus(build: string, schema: string, databaseUrl = DATABASE_URL): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const flags = process.env.BENCH_NODE_FLAGS ? process.env.BENCH_NODE_FLAGS.split(' ') : [];
  if (process.env.BENCH_PROFILE) flags.push('--cpu-prof', '--cpu-prof-dir=bench-profiles');
  const root = checkoutRoot(build);
  let args: string[];
  if (build !== 'tsx') {
    const start = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start.split(' ');
    if (start[0] !== 'node') throw new Error(`npm start is not a node command line: ${start.join(' ')}`);
    args = [...flags, ...start.slice(1)];
  } else {
    args = [...flags, '--import', 'tsx', 'src/server.ts'];
  }
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      NEXUS_PUBLIC_URL: url,
      DATABASE_URL: databaseUrl,
      NEXUS_DATABASE_SCHEMA: schema,
      NEXUS_MANAGEMENT_KEY: ROOT_KEY,
      NEXUS_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
      NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
      NEXUS_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      NEXUS_SHUTDOWN_TIMEOUT_MS: '2000',
      // The one durability knob, to compare (off by default, as in production).
      ...(process.env.NEXUS_GATEWAY_ASYNC_COMMIT ? { NEXUS_GATEWAY_ASYNC_COMMIT: process.env.NEXUS_GATEWAY_ASYNC_COMMIT } : {}),
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nexus (${build}) exited with ${child.exitCode}`);
    const status = await request(`${url}/readyz`).then(
      async (res) => (await res.body.dump(), res.statusCode),
      () => 0,
    );
    if (status === 200) return { child, url };
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---- the driver ----------------------------------------------------------------------------
function start(name: string, args: string[], env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string }> {
  const self = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, ['--import', 'tsx', self, `--role=${name}`, ...args], {
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
        child.stdout.off('data', onData);
        child.stdout.pipe(process.stderr);
        return resolve({ child, url: `http://127.0.0.1:${port}` });
      }
    };
    child.stdout.on('data', onData);
    child.on('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
  });
}

/**
 * Runs measurements one after the other, in the reverse order every other round: the host's noise drifts, and
 * the one measured second tends to come out slower. Their results keep the given order (medianRows needs it).
 */
async function inTurn<T>(round: number, runs: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array(runs.length);
  const order = runs.map((_, i) => i);
  if (round % 2) order.reverse();
  for (const i of order) results[i] = await runs[i]!();
  return results;
}

/** BENCH_FEATURES: rules and an allow-list that the benchmark's model (`bench-model`) matches last. */
function modelPricing(): Pick<TenantSpec, 'modelRules' | 'allowedModels' | 'outputCapPolicy'> {
  const families = [
    'gpt-4o-mini',
    'gpt-4o',
    'gpt-4.1-nano',
    'gpt-4.1-mini',
    'gpt-4.1',
    'o1',
    'o3-mini',
    'o4-mini',
    'claude-3-5-haiku',
    'claude-3-7-sonnet',
    'claude-sonnet-4',
    'claude-opus-4',
  ];
  const ppm = (n: number) => `${BigInt(n * 250_000)}` as const;
  const modelRules = families.flatMap((f, i) => [
    { pattern: f, inputMultiplierPpm: ppm(i + 1), cachedInputMultiplierPpm: ppm(1), outputMultiplierPpm: ppm(4 * (i + 1)) },
    { pattern: `${f}-*`, inputMultiplierPpm: ppm(i + 1), cachedInputMultiplierPpm: ppm(1), outputMultiplierPpm: ppm(4 * (i + 1)) },
  ]);
  modelRules[modelRules.length - 1] = {
    pattern: 'bench-*',
    inputMultiplierPpm: '1000000',
    cachedInputMultiplierPpm: '500000',
    outputMultiplierPpm: '2000000',
  };
  return { modelRules, allowedModels: [...families.slice(0, 11).map((f) => `${f}*`), 'bench-model'], outputCapPolicy: 'clamp' };
}

/**
 * A tenant with USERS end users on a plan with a huge quota, through the Admin API; with `features`, its
 * strategy prices per model and its plan has rate limits (BENCH_FEATURES).
 */
async function provision(
  nexusUrl: string,
  upstreamUrl: string,
  features = false,
): Promise<{ gatewayBaseUrl: string; apiKeys: string[]; workspaceId: string; connectionId: string }> {
  const tenant = await provisionTenant(adminClient(nexusUrl, ROOT_KEY), {
    name: features ? 'bench-rules-and-limits' : 'bench',
    baseUrl: upstreamUrl,
    providerKey: PROVIDER_KEY,
    users: USERS,
    quotaUnits: 1_000_000_000_000_000n,
    maxOutputTokens: 4096,
    allowUnmeteredPassthrough: true,
    ...(features ? { rateLimits: GENEROUS_LIMITS, ...modelPricing() } : {}),
  });
  if (features) {
    // Cost: every call of this tenant is priced (docs/pricing.md), the plain one's are not.
    const price = await createModelPrice({
      client: adminClient(nexusUrl, ROOT_KEY),
      path: { workspaceId: tenant.workspaceId },
      body: {
        modelPattern: '*',
        inputPerMillion: '2.50',
        cachedInputPerMillion: '1.25',
        outputPerMillion: '10',
        effectiveFrom: new Date(Date.now() - 60_000).toISOString(),
      },
    });
    if (price.response.status !== 201) throw new Error(`createModelPrice: ${price.response.status}`);
  }
  return {
    gatewayBaseUrl: tenant.gatewayBaseUrl,
    apiKeys: tenant.users.map((u) => u.apiKey),
    workspaceId: tenant.workspaceId,
    connectionId: tenant.connectionId,
  };
}

/**
 * BENCH_EVENTS: a tenant whose USERS end users are spread over EVENT_PLANS plans (thresholds at EVENT_THRESHOLDS,
 * grants growing geometrically from EVENT_SMALLEST_GRANT), and whose workspace has a webhook endpoint subscribed to
 * quota.threshold_crossed at the receiver.
 */
async function provisionEvents(
  nexusUrl: string,
  upstreamUrl: string,
  receiverUrl: string,
): Promise<{ gatewayBaseUrl: string; apiKeys: string[] }> {
  const client = adminClient(nexusUrl, ROOT_KEY);
  const tenant = await provisionTenant(client, {
    name: 'bench-events',
    baseUrl: upstreamUrl,
    providerKey: PROVIDER_KEY,
    users: 0,
    allowUnmeteredPassthrough: true,
  });
  const plans: string[] = [];
  for (let j = 0; j < EVENT_PLANS; j++) {
    const grant = Math.round(EVENT_SMALLEST_GRANT * EVENT_GRANT_SPREAD ** (j / (EVENT_PLANS - 1)));
    const { plan } = await activePlan(client, tenant.workspaceId, {
      key: `bench-events-${j}`,
      quotaUnits: `${BigInt(grant)}`,
      inputMultiplierPpm: '1000000',
      outputMultiplierPpm: '2000000',
      cachedInputMultiplierPpm: '500000',
      maxOutputTokens: 4096,
      eventThresholds: EVENT_THRESHOLDS,
    });
    plans.push(plan.id);
  }
  const apiKeys: string[] = [];
  for (let i = 0; i < USERS; i++) {
    const user = await provisionWorkspaceUser({
      client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        externalUserId: `bench-events-user-${i}`,
        email: `bench-events-${i}@example.com`,
        planId: plans[i % EVENT_PLANS]!,
        issueInferenceKey: true,
      },
    });
    if (user.response.status !== 201) throw new Error(`provisionWorkspaceUser: ${user.response.status} ${JSON.stringify(user.error)}`);
    apiKeys.push(user.data!.apiKey!);
  }
  const endpoint = await createWebhookEndpoint({
    client,
    path: { workspaceId: tenant.workspaceId },
    body: { url: `${receiverUrl}/hooks`, description: 'bench receiver', eventTypes: ['quota.threshold_crossed'] },
  });
  if (endpoint.response.status !== 201)
    throw new Error(`createWebhookEndpoint: ${endpoint.response.status} ${JSON.stringify(endpoint.error)}`);
  return { gatewayBaseUrl: tenant.gatewayBaseUrl, apiKeys };
}

/** BENCH_ROUTE: a route whose one target is the tenant's connection; its base URL (called as the connection's is). */
async function routeOver(nexusUrl: string, tenant: { workspaceId: string; connectionId: string; gatewayBaseUrl: string }): Promise<string> {
  const made = await createRoute({
    client: adminClient(nexusUrl, ROOT_KEY),
    path: { workspaceId: tenant.workspaceId },
    body: { name: 'bench', targets: [{ providerConnectionId: tenant.connectionId }] },
  });
  if (made.response.status !== 201) throw new Error(`createRoute: ${made.response.status} ${JSON.stringify(made.error)}`);
  // The process reads its routes every 250 ms.
  await new Promise((r) => setTimeout(r, 500));
  return made.data!.gatewayBaseUrl;
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

/** The median of the figures known (undefined: none). */
function median(xs: (number | undefined)[]): number | undefined {
  const known = xs.filter((x): x is number => x !== undefined).sort((p, q) => p - q);
  if (!known.length) return undefined;
  const mid = known.length >> 1;
  return known.length % 2 ? known[mid] : (known[mid - 1]! + known[mid]!) / 2;
}

/** Each figure of each (target, mode) row: the median over the rounds (the errors: their sum). */
function medianRows(rounds: Row[][]): Row[] {
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
      out.set(pid, cpuTimeOf(pid));
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

/** CPU µs per call of these processes between two readings: user and system, and user alone. */
function cpuPerCall(before: Map<number, CpuTime>, after: Map<number, CpuTime>, calls: number): { all: number; user: number } | undefined {
  const used = cpuBetween(before, after);
  return used && { all: ((used.user + used.system) * 1e6) / calls, user: (used.user * 1e6) / calls };
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

async function cannon(
  url: string,
  headers: Record<string, string>,
  body: string,
  connections: number,
  duration: number,
  keys: string[] = [],
  rate = RATE,
) {
  let next = 0;
  const requests = keys.length
    ? [{ setupRequest: (r: any) => ({ ...r, headers: { ...r.headers, authorization: `Bearer ${keys[next++ % keys.length]}` } }) }]
    : undefined;
  const result = await autocannon({
    url,
    method: 'POST',
    headers,
    body,
    connections,
    duration,
    pipelining: 1,
    ...(requests ? { requests } : {}),
    ...(rate ? { overallRate: rate } : {}),
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx + result.timeouts,
  };
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

/**
 * BENCH_TOGETHER: each Nexus process connects as a PostgreSQL role of its own (trust auth, dropped at the end), so
 * the backends that serve it, and their CPU, are told apart from the other's.
 */
function asRole(role: string): string {
  const url = new URL(DATABASE_URL);
  url.username = role;
  return url.toString();
}

async function backendsOf(admin: pg.Client, role: string | undefined): Promise<number[]> {
  if (!role) return [];
  const { rows } = await admin.query<{ pid: number }>('select pid from pg_stat_activity where usename = $1', [role]);
  return rows.map((r) => r.pid);
}

/** A Nexus under load in measureTogether: its process, and its PostgreSQL role. */
interface TogetherTarget {
  label: string;
  url: string;
  keys: string[];
  pid: number | undefined;
  role: string | undefined;
}

/**
 * BENCH_TOGETHER: the Nexus processes loaded at the same time, each at its share of BENCH_RATE, so the
 * host's moment (another tenant, a slower core) weighs on each alike; their CPU per call compares within each
 * round. No light phase (its latencies would measure the other build's load).
 */
async function measureTogether(admin: pg.Client, targets: TogetherTarget[]): Promise<Row[]> {
  const rows: Row[] = [];
  for (const stream of [false, true]) {
    const body = benchRequestBody(stream);
    const h = { 'content-type': 'application/json' };
    const connections = Math.max(1, Math.floor(CONNECTIONS / targets.length));
    const rate = RATE && RATE / targets.length;
    await Promise.all(targets.map((t) => cannon(t.url, h, body, connections, 2, t.keys, rate)));
    const pids = targets.map((t) => (t.pid ? [t.pid] : []));
    const pgPids: number[][] = [];
    for (const t of targets) pgPids.push(await backendsOf(admin, t.role));
    const before = [pids.map(cpuByPid), pgPids.map(cpuByPid)];
    const loads = await Promise.all(targets.map((t) => cannon(t.url, h, body, connections, DURATION, t.keys, rate)));
    const after = [pids.map(cpuByPid), pgPids.map(cpuByPid)];
    for (const [i, t] of targets.entries()) {
      const calls = loads[i]!.rps * DURATION;
      const proxy = cpuPerCall(before[0]![i]!, after[0]![i]!, calls);
      const postgres = cpuPerCall(before[1]![i]!, after[1]![i]!, calls);
      rows.push({
        target: t.label,
        mode: stream ? 'stream' : 'json',
        rps: loads[i]!.rps,
        p50: loads[i]!.p50,
        p99: loads[i]!.p99,
        lightP50: NaN,
        lightP99: NaN,
        errors: loads[i]!.errors,
        cpuProxy: proxy?.all,
        cpuProxyUser: proxy?.user,
        cpuPg: postgres?.all,
      });
    }
  }
  return rows;
}

async function measure(target: string, url: string, headers: Record<string, string>, keys: string[] = [], pid?: number): Promise<Row[]> {
  const rows: Row[] = [];
  if (TARGETS && !TARGETS.includes(target)) return rows;
  for (const stream of [false, true]) {
    const body = benchRequestBody(stream);
    const h = { 'content-type': 'application/json', ...headers };
    await cannon(url, h, body, CONNECTIONS, 2, keys); // warm-up
    const pgPids = postgresPids();
    const before = [cpuByPid(pid ? [pid] : []), cpuByPid(pgPids)];
    const load = await cannon(url, h, body, CONNECTIONS, DURATION, keys);
    const after = [cpuByPid(pid ? [pid] : []), cpuByPid(pgPids)];
    const proxy = cpuPerCall(before[0]!, after[0]!, load.rps * DURATION);
    const light = await sequential(
      url,
      keys.length ? { ...h, authorization: `Bearer ${keys[0]}` } : h,
      body,
      Math.max(3, Math.round(DURATION / 2)),
    );
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
      cpuProxy: proxy?.all,
      cpuProxyUser: proxy?.user,
      cpuPg: cpuPerCall(before[1]!, after[1]!, load.rps * DURATION)?.all,
    });
    process.stderr.write(`  ${target} ${stream ? 'stream' : 'json'}: ${Math.round(load.rps)} req/s\n`);
  }
  return rows;
}

async function main(): Promise<void> {
  const schemas: string[] = [];
  const roles: string[] = [];
  const children: ChildProcess[] = [];
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  /** A Nexus of `build` in a schema of its own (BENCH_TOGETHER: as a role of its own too). */
  const startOne = async (build: string) => {
    const schema = `bench_${randomBytes(4).toString('hex')}`;
    schemas.push(schema);
    let role: string | undefined;
    if (TOGETHER) {
      role = schema;
      await admin.query(`create role ${role} login superuser`);
      roles.push(role);
    }
    const nexus = await startNexus(build, schema, role ? asRole(role) : DATABASE_URL);
    children.push(nexus.child);
    return { ...nexus, role };
  };
  try {
    for (const build of BUILDS)
      if (build !== 'tsx')
        execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: checkoutRoot(build), stdio: ['ignore', 'ignore', 'inherit'] });
    const upstream = await start('upstream', []);
    children.push(upstream.child);
    const floor = await start('floor', [upstream.url]);
    children.push(floor.child);
    const receiver = EVENTS ? await start('receiver', []) : undefined;
    if (receiver) children.push(receiver.child);
    const nexuses: {
      label: string;
      pid: number | undefined;
      role: string | undefined;
      gatewayBaseUrl: string;
      apiKeys: string[];
      /** BENCH_TOGETHER: in a process of its own (pid, role), loaded at the same time as the plain one. */
      featured?: { gatewayBaseUrl: string; apiKeys: string[]; pid?: number | undefined; role?: string | undefined };
      routeBaseUrl?: string;
      evented?: { gatewayBaseUrl: string; apiKeys: string[] };
    }[] = [];
    for (const [i, build] of BUILDS.entries()) {
      // BENCH_FEATURED_FIRST=1 starts the featured tenant's process first: where a process starts weighs on its CPU
      // per call (docs/performance.md), and a run each way cancels it.
      const featuredFirst = FEATURES && TOGETHER && process.env.BENCH_FEATURED_FIRST === '1' ? await startOne(build) : undefined;
      const nexus = await startOne(build);
      const tenant = await provision(nexus.url, upstream.url);
      let featured: (typeof nexuses)[number]['featured'];
      if (FEATURES && TOGETHER) {
        const own = featuredFirst ?? (await startOne(build));
        featured = { ...(await provision(own.url, upstream.url, true)), pid: own.child.pid, role: own.role };
      } else if (FEATURES) {
        featured = await provision(nexus.url, upstream.url, true);
      }
      const routeBaseUrl = ROUTE ? await routeOver(nexus.url, tenant) : undefined;
      const evented = receiver ? await provisionEvents(nexus.url, upstream.url, receiver.url) : undefined;
      nexuses.push({
        // The same build twice (the method's noise) is told apart by its place.
        label: BUILDS.indexOf(build) === i ? buildLabel(build) : `${buildLabel(build)} #${i + 1}`,
        pid: nexus.child.pid,
        role: nexus.role,
        ...tenant,
        ...(featured ? { featured } : {}),
        ...(routeBaseUrl ? { routeBaseUrl } : {}),
        ...(evented ? { evented } : {}),
      });
    }
    process.stderr.write(`Measuring ${DURATION}s per phase, ${CONNECTIONS} connections under load...\n`);
    const path = '/v1/chat/completions';
    const rounds: Row[][] = [];
    for (let round = 0; round < ROUNDS; round++) {
      if (ROUNDS > 1) process.stderr.write(`Round ${round + 1} of ${ROUNDS}\n`);
      const rows = [
        ...(await measure('direct', `${upstream.url}${path}`, { authorization: `Bearer ${PROVIDER_KEY}` })),
        ...(await measure('floor', `${floor.url}/providers/x${path}`, {}, [], floor.child.pid)),
      ];
      if (TOGETHER) {
        rows.push(
          ...(await measureTogether(
            admin,
            nexuses.flatMap((n): TogetherTarget[] => [
              { label: n.label, url: `${n.gatewayBaseUrl}${path}`, keys: n.apiKeys, pid: n.pid, role: n.role },
              ...(n.featured
                ? [
                    {
                      label: `${n.label}${FEATURED}`,
                      url: `${n.featured.gatewayBaseUrl}${path}`,
                      keys: n.featured.apiKeys,
                      pid: n.featured.pid,
                      role: n.featured.role,
                    },
                  ]
                : []),
            ]),
          )),
        );
        rounds.push(rows);
        continue;
      }
      const builds = await inTurn(
        round,
        nexuses.map((nexus) => async () => {
          const featured = nexus.featured;
          const routeBaseUrl = nexus.routeBaseUrl;
          const evented = nexus.evented;
          const [plainRows, featuredRows, routeRows, eventRows] = await inTurn(round, [
            () => measure(nexus.label, `${nexus.gatewayBaseUrl}${path}`, {}, nexus.apiKeys, nexus.pid),
            () =>
              featured
                ? measure(`${nexus.label}, rules and limits`, `${featured.gatewayBaseUrl}${path}`, {}, featured.apiKeys, nexus.pid)
                : Promise.resolve([]),
            () =>
              routeBaseUrl ? measure(`${nexus.label}, route`, `${routeBaseUrl}${path}`, {}, nexus.apiKeys, nexus.pid) : Promise.resolve([]),
            () =>
              evented
                ? measure(`${nexus.label}, events`, `${evented.gatewayBaseUrl}${path}`, {}, evented.apiKeys, nexus.pid)
                : Promise.resolve([]),
          ]);
          return [
            ...plainRows!,
            ...featuredRows!,
            ...routeRows!,
            ...eventRows!,
            ...(await measure(
              `${nexus.label}, 1 user`,
              `${nexus.gatewayBaseUrl}${path}`,
              { authorization: `Bearer ${nexus.apiKeys[0]}` },
              [],
              nexus.pid,
            )),
            // Diagnostic: the same proxy without metering (an endpoint with no usage inspector, passthrough allowed).
            ...(await measure(`${nexus.label}, unmetered`, `${nexus.gatewayBaseUrl}/v1/unmetered`, {}, nexus.apiKeys, nexus.pid)),
          ];
        }),
      );
      rows.push(...builds.flat());
      rounds.push(rows);
    }
    const rows = medianRows(rounds);
    const f = (n: number | undefined, d = 2) => (n === undefined || Number.isNaN(n) ? '-' : n.toFixed(d));
    console.log(
      `\nGateway overhead (${new Date().toISOString()}; ${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Node ${process.version}; PostgreSQL at ${new URL(DATABASE_URL).host})`,
    );
    if (ROUNDS > 1) console.log(`each figure: the median of ${ROUNDS} rounds, the targets measured in turn in each`);
    console.log(
      `load: autocannon, ${CONNECTIONS} connections for ${DURATION}s (latencies in whole ms); light: one request at a time (latencies in ms, hrtime); nexus: calls spread over ${USERS} users (inference keys), 'nexus, 1 user': every call on one key\n`,
    );
    console.log(
      '| target | mode | req/s (load) | p50 (load) | p99 (load) | p50 (light) | p99 (light) | TTFB p50 | CPU µs/req (proxy) | of which user | CPU µs/req (PostgreSQL) | errors |',
    );
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
    console.log(
      '\n| target | mode | Nexus/floor req/s | (1 user) | best round of each | added p50 (light) | added p99 (light) | added TTFB p50 |',
    );
    console.log('|---|---|---:|---:|---:|---:|---:|---:|');
    for (const { label } of nexuses) {
      for (const mode of ['json', 'stream']) {
        const fl = rows.find((r) => r.target === 'floor' && r.mode === mode);
        const nx = rows.find((r) => r.target === label && r.mode === mode);
        if (!fl || !nx) continue;
        const one = rows.find((r) => r.target === `${label}, 1 user` && r.mode === mode);
        const share = (r: Row | undefined) => (r ? `${((100 * r.rps) / fl.rps).toFixed(1)}%` : '-');
        const bestShare = `${((100 * best(label, mode)) / best('floor', mode)).toFixed(1)}%`;
        const ttfbDelta = nx.ttfb50 !== undefined && fl.ttfb50 !== undefined ? f(nx.ttfb50 - fl.ttfb50) : '-';
        console.log(
          `| ${label} | ${mode} | ${share(nx)} | ${share(one)} | ${bestShare} | ${f(nx.lightP50 - fl.lightP50)} | ${f(nx.lightP99 - fl.lightP99)} | ${ttfbDelta} |`,
        );
      }
    }
    // Each Nexus target against the first build's plain one: with BENCH_TOGETHER every target loaded with it (other
    // builds, the tenant with rules and limits in its own process), otherwise the other builds. The CPU per call's
    // ratio is taken in each round, where the targets ran together or back to back, and its median printed: the
    // host's moment weighs on both figures of a round alike. With BENCH_TOGETHER, PostgreSQL's is the CPU of the
    // backends serving each process, and the sum is what bounds throughput on a host that runs both.
    const compared = TOGETHER ? [...new Set(rows.map((r) => r.target).filter((t) => t.startsWith('nexus')))] : nexuses.map((n) => n.label);
    if (compared.length > 1) {
      const first = compared[0]!;
      const pct = (x: number | undefined) => (x === undefined ? '-' : `${x.toFixed(1)}%`);
      // A tenant with rules and limits is compared with the plain tenant of its own build.
      const baseOf = (label: string) => (label.endsWith(FEATURED) ? label.slice(0, -FEATURED.length) : first);
      const ratioEachRound = (label: string, mode: string, figure: (r: Row) => number | undefined) =>
        rounds.map((round) => {
          const b = round.find((r) => r.target === baseOf(label) && r.mode === mode);
          const o = round.find((r) => r.target === label && r.mode === mode);
          const bf = b && figure(b);
          const of = o && figure(o);
          return bf && of ? (100 * of) / bf : undefined;
        });
      const withPg = (r: Row) => (r.cpuProxy !== undefined && r.cpuPg !== undefined ? r.cpuProxy + r.cpuPg : undefined);
      console.log(
        `\n| target | against | mode | req/s / its | CPU µs/req (proxy), its | PostgreSQL, its | CPU per call (proxy) / its, median of the rounds | (proxy and PostgreSQL) | proxy's, each round |`,
      );
      console.log('|---|---|---|---:|---:|---:|---:|---:|---|');
      for (const label of compared.slice(1)) {
        for (const mode of ['json', 'stream']) {
          const base = rows.find((r) => r.target === baseOf(label) && r.mode === mode);
          const other = rows.find((r) => r.target === label && r.mode === mode);
          if (!base || !other) continue;
          const proxy = ratioEachRound(label, mode, (r) => r.cpuProxy);
          const both = ratioEachRound(label, mode, withPg);
          console.log(
            `| ${label} | ${baseOf(label)} | ${mode} | ${((100 * other.rps) / base.rps).toFixed(1)}% | ${f(other.cpuProxy, 0)} (${f(base.cpuProxy, 0)}) | ${f(other.cpuPg, 0)} (${f(base.cpuPg, 0)}) | ${pct(median(proxy))} | ${pct(median(both))} | ${proxy.map(pct).join(' ')} |`,
          );
        }
      }
    }
    if (FEATURES) {
      console.log(
        '\n| target | mode | with rules and limits / without, req/s | best round of each | added p50 (light) | added p99 (light) |',
      );
      console.log('|---|---|---:|---:|---:|---:|');
      for (const { label } of nexuses) {
        for (const mode of ['json', 'stream']) {
          const plain = rows.find((r) => r.target === label && r.mode === mode);
          const featured = rows.find((r) => r.target === `${label}, rules and limits` && r.mode === mode);
          if (!plain || !featured) continue;
          const bestShare = `${((100 * best(`${label}, rules and limits`, mode)) / best(label, mode)).toFixed(1)}%`;
          console.log(
            `| ${label}, rules and limits | ${mode} | ${((100 * featured.rps) / plain.rps).toFixed(1)}% | ${bestShare} | ${f(featured.lightP50 - plain.lightP50)} | ${f(featured.lightP99 - plain.lightP99)} |`,
          );
        }
      }
    }
    if (ROUTE) {
      console.log(
        '\n| target | mode | through a route / the connection, req/s | best round of each | added p50 (light) | added p99 (light) |',
      );
      console.log('|---|---|---:|---:|---:|---:|');
      for (const { label } of nexuses) {
        for (const mode of ['json', 'stream']) {
          const plain = rows.find((r) => r.target === label && r.mode === mode);
          const routed = rows.find((r) => r.target === `${label}, route` && r.mode === mode);
          if (!plain || !routed) continue;
          const bestShare = `${((100 * best(`${label}, route`, mode)) / best(label, mode)).toFixed(1)}%`;
          console.log(
            `| ${label}, route | ${mode} | ${((100 * routed.rps) / plain.rps).toFixed(1)}% | ${bestShare} | ${f(routed.lightP50 - plain.lightP50)} | ${f(routed.lightP99 - plain.lightP99)} |`,
          );
        }
      }
    }
    if (receiver) {
      console.log(
        '\n| target | mode | with an endpoint subscribed to thresholds / without, req/s | best round of each | added p50 (light) | added p99 (light) |',
      );
      console.log('|---|---|---:|---:|---:|---:|');
      for (const { label } of nexuses) {
        for (const mode of ['json', 'stream']) {
          const plain = rows.find((r) => r.target === label && r.mode === mode);
          const evented = rows.find((r) => r.target === `${label}, events` && r.mode === mode);
          if (!plain || !evented) continue;
          const bestShare = `${((100 * best(`${label}, events`, mode)) / best(label, mode)).toFixed(1)}%`;
          console.log(
            `| ${label}, events | ${mode} | ${((100 * evented.rps) / plain.rps).toFixed(1)}% | ${bestShare} | ${f(evented.lightP50 - plain.lightP50)} | ${f(evented.lightP99 - plain.lightP99)} |`,
          );
        }
      }
      const { received } = (await (await request(`${receiver.url}/count`)).body.json()) as { received: number };
      console.log(`quota.threshold_crossed deliveries the receiver answered: ${received}`);
    }
  } finally {
    for (const child of children.reverse()) child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 1500));
    for (const schema of schemas) await admin.query(`drop schema if exists "${schema}" cascade`);
    for (const role of roles) await admin.query(`drop owned by ${role}; drop role ${role}`);
    await admin.end();
  }
}

if (role === 'upstream') void runUpstream();
else if (role === 'floor') runFloor(process.argv.at(-1)!);
else if (role === 'receiver') runReceiver();
else
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });

/**
 * `npm run bench`: what the gateway costs. One run starts, each in its own process,
 *   - an upstream that answers at once (a chat completion, JSON or SSE, with usage: test/support/upstreams/openai.ts,
 *     startFixedOpenAiUpstream),
 *   - the floor: a bare undici passthrough written for this benchmark (keep-alive pool, piped body; scripts/bench/roles.ts),
 *   - Nexus on PostgreSQL with auth, quota leases and metering on, started as `npm start` starts it (the compiled
 *     dist/server.js), connected as a PostgreSQL role of its own so the backends serving it are told apart from
 *     whatever else the cluster serves,
 * then measures the floor and Nexus in turn, BENCH_ROUNDS rounds (default 10), their order reversed every other round
 * (the host's noise drifts; the one measured second tends to come out slower). Per target, JSON then streamed:
 *   1. a warm-up at saturation (BENCH_WARMUP s, default 1);
 *   2. BENCH_RATE requests/s offered (default 800, below what every target answers; 0 skips it), evenly paced
 *      (openLoop, scripts/lib/scale-load.ts; BENCH_PACING=bursts: autocannon's overallRate, which sends each second's share at its
 *      start), for BENCH_RATE_DURATION s (default 5): the CPU per call of the proxy's process (all its threads, from
 *      /proc/<pid>/task/<tid>/schedstat; and the user-space part: JavaScript, the HTTP parsers, V8's GC; the rest is
 *      the kernel's socket work), of the PostgreSQL backends serving it, and its RSS at the phase's end. Each process
 *      does the same work whatever the others' speed, so this is the figure to compare builds by;
 *   3. saturation, BENCH_CONNECTIONS connections (default 32) for BENCH_DURATION s (default 3): requests/s, latency under
 *      load, CPU per call (the process's and PostgreSQL's) at saturation;
 *   4. one request at a time for BENCH_LIGHT_DURATION s (default 3): p50 and p99 latency and time to first byte.
 * It prints each figure as the median of the rounds with its interquartile range, and against the floor the ratios
 * (CPU per call, throughput) and added latencies taken within each round, then their median and interquartile range.
 * A default run takes about 9 minutes on the busy 2-core host; Linux only (/proc).
 *
 *   BENCH_ROUNDS=4 BENCH_RATE_DURATION=3 npm run bench     a shorter run
 *
 * BENCH_TARGETS='floor;nexus' measures only those targets, separated by ';'; 'all' measures every one. Their names:
 * direct (the upstream itself), floor, nexus, and the diagnostic ones 'nexus, 1 user' (every call on one key) and
 * 'nexus, unmetered' (an endpoint with no usage inspector, passthrough allowed: the proxy without metering), then the
 * optional ones below and those of other builds. Unset: the floor, each build's plain target and the optional targets
 * turned on below.
 * BENCH_USERS (default 64): the end users (inference keys) the Nexus load is spread over.
 * BENCH_TOGETHER=1 loads the Nexus builds of BENCH_NEXUS at the same time in each round, each at its share of
 * BENCH_RATE (with BENCH_FEATURES=1, the tenant with rules and limits in a process of its own beside each), so the
 * host's moment weighs on each alike (scripts/bench/measure.ts, measureTogether). BENCH_NEXUS='compiled;compiled' is
 * then the method's own noise: one build against itself.
 * BENCH_PROFILE=1 writes a V8 CPU profile of the Nexus process to bench-profiles/;
 * BENCH_NODE_FLAGS='--max-semi-space-size=32' passes node/V8 flags to the Nexus process (to compare them);
 * NEXUS_GATEWAY_ASYNC_COMMIT=true is passed on to Nexus (to compare that durability trade).
 * BENCH_NEXUS: which builds of Nexus to run, separated by ';': compiled (the default: `npm start`'s command, after
 * `npm run build:server`) and tsx (src/server.ts through tsx, as `npm run dev`; its targets are named 'nexus (tsx)'...);
 * and checkout=<dir>, the compiled build of another checkout of Nexus (a git worktree of an earlier commit, say), built
 * and started with that checkout's own scripts and migrations, its targets named 'nexus (<dir's last name>)'. Builds
 * are measured in turn with the floor in each round, so two commits compare within one run; each build's CPU per call
 * is printed against the first's, the ratio taken in each round:
 *   git worktree add --detach ../before HEAD~1 && (cd ../before && ln -s ../<this checkout>/node_modules .)
 *   BENCH_NEXUS='compiled;checkout=../before' npm run bench
 * BENCH_FEATURES=1 adds the target 'nexus, rules and limits': the same load on end users whose strategy has per-model
 * pricing (docs/pricing.md: 24 model rules, the benchmark's model matched by the last, and an allow-list of 12
 * patterns with it last), whose plan has generous rate limits (docs/rate-limits.md: requests and tokens per minute,
 * concurrent calls, none reached), and whose workspace prices every model (the price book), measured beside 'nexus' in
 * each round, first and second in turn; its throughput and CPU per call are printed as a share of the plain one's.
 * With BENCH_TOGETHER=1 it has a process of its own, loaded at the same time as the plain one's
 * (BENCH_FEATURED_FIRST=1 starts it first: where a process starts weighs on its CPU per call).
 * BENCH_ROUTE=1 adds the target 'nexus, route': the same load through a route (docs/routes.md) whose one target is the
 * plain target's connection, measured beside 'nexus' in each round, first and second in turn; it prints that target's
 * throughput as a share of the connection's (the route's cost: at most 5% is the goal).
 * BENCH_EVENTS=1 adds the target 'nexus, events': the same load on a tenant whose workspace has a webhook endpoint
 * subscribed to quota.threshold_crossed (docs/events.md), answered 204 by a receiver process of the benchmark. The
 * plain target's settlements run the threshold CTEs too (every period has thresholds: 80 and 100 by default) but never
 * reach one; this one measures what crossing them adds: the marks, events and webhook messages its settlement
 * statements write, and the delivery worker that sends them, in the same process. Its end users are spread over 16
 * plans with thresholds at 1, 2, 3, 4 and 5% and grants from 4,000,000 to 80,000,000 units (a threshold every 2,000 to
 * 40,000 calls of the benchmark's 20 units: scripts/bench/tenants.ts), so the outbox is written now and then under
 * load, and none runs out of quota. It is measured beside 'nexus' in each round, first and second in turn, and its
 * throughput printed as a share of the plain one's (at most 3% less is the goal), with the deliveries the receiver got.
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): Nexus runs in a fresh schema, dropped at the
 * end, as a fresh role, dropped too.
 * BENCH_PG_STATEMENTS=1 prints, per target, the statements that took PostgreSQL the most time in the fixed-rate
 * phases (calls per 1,000 gateway calls, µs a call, share), from pg_stat_statements: it has to be loaded in
 * DATABASE_URL's cluster (shared_preload_libraries) and created in its database (scripts/bench/pg-statements.ts).
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { request } from 'undici';
import {
  BUILDS,
  CHAT_PATH,
  DATABASE_URL,
  DURATION,
  EVENTS,
  FEATURED,
  FEATURES,
  PROVIDER_KEY,
  RATE,
  ROUNDS,
  ROUTE,
  TOGETHER,
  wanted,
} from './bench/config.js';
import { inTurn, measure, measureTogether, type Row, type Target } from './bench/measure.js';
import { asRole, buildLabel, checkoutRoot, startNexus, startRole } from './bench/processes.js';
import { printStatements } from './bench/pg-statements.js';
import { report } from './bench/report.js';
import { runFloor, runReceiver, runUpstream } from './bench/roles.js';
import { provision, provisionEvents, routeOver } from './bench/tenants.js';

/** A Nexus build under test: its process, its PostgreSQL role, its tenant, and the optional tenants beside it. */
interface Nexus {
  label: string;
  pid: number | undefined;
  role: string;
  gatewayBaseUrl: string;
  apiKeys: string[];
  /** BENCH_FEATURES; with BENCH_TOGETHER in a process of its own (pid, role), loaded at the same time as the plain one. */
  featured?: { gatewayBaseUrl: string; apiKeys: string[]; pid?: number | undefined; role?: string | undefined };
  routeBaseUrl?: string;
  evented?: { gatewayBaseUrl: string; apiKeys: string[] };
}

/** What main starts, to stop and drop at the end. */
interface Started {
  admin: pg.Client;
  schemas: string[];
  roles: string[];
  children: ChildProcess[];
}

/** A Nexus of `build` in a schema and as a PostgreSQL role of its own. */
async function startOne(s: Started, build: string): Promise<{ child: ChildProcess; url: string; role: string }> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  s.schemas.push(schema);
  const role = schema;
  await s.admin.query(`create role ${role} login superuser`);
  s.roles.push(role);
  const nexus = await startNexus(build, schema, asRole(role));
  s.children.push(nexus.child);
  return { ...nexus, role };
}

/** Each build of BENCH_NEXUS started and provisioned (with the optional tenants its flags ask for). */
async function startBuilds(s: Started, upstreamUrl: string, receiverUrl: string | undefined): Promise<Nexus[]> {
  const nexuses: Nexus[] = [];
  for (const [i, build] of BUILDS.entries()) {
    const featuredFirst = FEATURES && TOGETHER && process.env.BENCH_FEATURED_FIRST === '1' ? await startOne(s, build) : undefined;
    const nexus = await startOne(s, build);
    const tenant = await provision(nexus.url, upstreamUrl);
    let featured: Nexus['featured'];
    if (FEATURES && TOGETHER) {
      const own = featuredFirst ?? (await startOne(s, build));
      featured = { ...(await provision(own.url, upstreamUrl, true)), pid: own.child.pid, role: own.role };
    } else if (FEATURES) {
      featured = await provision(nexus.url, upstreamUrl, true);
    }
    const routeBaseUrl = ROUTE ? await routeOver(nexus.url, tenant) : undefined;
    const evented = receiverUrl ? await provisionEvents(nexus.url, upstreamUrl, receiverUrl) : undefined;
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
  return nexuses;
}

/** Measures `t` if it is wanted (config.ts); `optional`: measured only when BENCH_TARGETS names it. */
const maybe = (admin: pg.Client, t: Target, optional = false) => (wanted(t.label, optional) ? measure(admin, t) : Promise.resolve([]));

/** One build's targets in a round: the plain one and those beside it in turn, then the diagnostic ones. */
async function measureNexus(admin: pg.Client, round: number, n: Nexus): Promise<Row[]> {
  const own = { pid: n.pid, role: n.role };
  const url = (base: string, path = CHAT_PATH) => `${base}${path}`;
  const beside = await inTurn(round, [
    () => maybe(admin, { label: n.label, url: url(n.gatewayBaseUrl), keys: n.apiKeys, ...own }),
    () =>
      n.featured
        ? maybe(admin, { label: `${n.label}${FEATURED}`, url: url(n.featured.gatewayBaseUrl), keys: n.featured.apiKeys, ...own })
        : Promise.resolve([]),
    () =>
      n.routeBaseUrl
        ? maybe(admin, { label: `${n.label}, route`, url: url(n.routeBaseUrl), keys: n.apiKeys, ...own })
        : Promise.resolve([]),
    () =>
      n.evented
        ? maybe(admin, { label: `${n.label}, events`, url: url(n.evented.gatewayBaseUrl), keys: n.evented.apiKeys, ...own })
        : Promise.resolve([]),
  ]);
  return [
    ...beside.flat(),
    ...(await maybe(
      admin,
      { label: `${n.label}, 1 user`, url: url(n.gatewayBaseUrl), headers: { authorization: `Bearer ${n.apiKeys[0]}` }, ...own },
      true,
    )),
    ...(await maybe(admin, { label: `${n.label}, unmetered`, url: url(n.gatewayBaseUrl, '/v1/unmetered'), keys: n.apiKeys, ...own }, true)),
  ];
}

/** BENCH_TOGETHER: the builds' plain targets (and their featured ones, in processes of their own), loaded at once. */
function togetherTargets(nexuses: Nexus[]): Target[] {
  return nexuses
    .flatMap((n): Target[] => [
      { label: n.label, url: `${n.gatewayBaseUrl}${CHAT_PATH}`, keys: n.apiKeys, pid: n.pid, role: n.role },
      ...(n.featured
        ? [
            {
              label: `${n.label}${FEATURED}`,
              url: `${n.featured.gatewayBaseUrl}${CHAT_PATH}`,
              keys: n.featured.apiKeys,
              pid: n.featured.pid,
              role: n.featured.role,
            },
          ]
        : []),
    ])
    .filter((t) => wanted(t.label, false));
}

/** One round: the upstream itself (if wanted), the floor and each build in turn, their order reversed every other round. */
async function runRound(
  admin: pg.Client,
  round: number,
  upstreamUrl: string,
  floor: { url: string; pid: number | undefined },
  nexuses: Nexus[],
) {
  const slots: (() => Promise<Row[]>)[] = [
    () => maybe(admin, { label: 'direct', url: `${upstreamUrl}${CHAT_PATH}`, headers: { authorization: `Bearer ${PROVIDER_KEY}` } }, true),
    () => maybe(admin, { label: 'floor', url: `${floor.url}/providers/x${CHAT_PATH}`, pid: floor.pid }),
  ];
  if (TOGETHER) slots.push(() => measureTogether(admin, togetherTargets(nexuses)));
  else for (const n of nexuses) slots.push(() => measureNexus(admin, round, n));
  return (await inTurn(round, slots)).flat();
}

async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  const s: Started = { admin, schemas: [], roles: [], children: [] };
  try {
    for (const build of BUILDS)
      if (build !== 'tsx')
        execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: checkoutRoot(build), stdio: ['ignore', 'ignore', 'inherit'] });
    const upstream = await startRole('upstream', []);
    s.children.push(upstream.child);
    const floor = await startRole('floor', [upstream.url]);
    s.children.push(floor.child);
    const receiver = EVENTS ? await startRole('receiver', []) : undefined;
    if (receiver) s.children.push(receiver.child);
    const nexuses = await startBuilds(s, upstream.url, receiver?.url);
    process.stderr.write(`Measuring ${ROUNDS} rounds${RATE ? `, ${RATE} req/s offered then` : ''} saturation for ${DURATION}s...\n`);
    const rounds: Row[][] = [];
    for (let round = 0; round < ROUNDS; round++) {
      process.stderr.write(`Round ${round + 1} of ${ROUNDS}\n`);
      rounds.push(await runRound(admin, round, upstream.url, { url: floor.url, pid: floor.child.pid }, nexuses));
    }
    report(
      rounds,
      nexuses.map((n) => n.label),
    );
    printStatements();
    if (receiver) {
      const { received } = (await (await request(`${receiver.url}/count`)).body.json()) as { received: number };
      console.log(`quota.threshold_crossed deliveries the receiver answered: ${received}`);
    }
  } finally {
    for (const child of s.children.reverse()) child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 1500));
    for (const schema of s.schemas) await admin.query(`drop schema if exists "${schema}" cascade`);
    for (const role of s.roles) await admin.query(`drop owned by ${role}; drop role ${role}`);
    await admin.end();
  }
}

const role = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length);
if (role === 'upstream') void runUpstream();
else if (role === 'floor') runFloor(process.argv.at(-1)!);
else if (role === 'receiver') runReceiver();
else
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });

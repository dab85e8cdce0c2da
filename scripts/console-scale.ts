/**
 * `npm run bench:console`: what the console's invocations and usage pages (and a connection's health) cost on a busy
 * workspace, against their target of 300 ms an answer. A fresh database gets BENCH_CONSOLE_INVOCATIONS (default 1,000,000) invocations in one
 * workspace over BENCH_CONSOLE_DAYS (default 30) days, as the gateway writes them (time-ordered ids), written with COPY:
 * BENCH_CONSOLE_USERS (default 2,000) end users with their emails, external ids and accesses, six models, 2%
 * refused and 1% failed upstream, a USAGE event for each charged call, each call's attempt on one connection; then the
 * rollups (hourly and daily) computed by the recording statements' SQL. A Nexus listens on it in this process, and each page the console
 * asks for (the first page, a search by request id, by email, by external id, a model prefix common and rare, a
 * user's refused calls, an invocation's detail; the usage page's summaries this month by model and by user, the last
 * 30 days (a month at its end: every seeded day) by user (every user, and the top 9) and by model, the last 24 hours
 * by hour, the CSVs; the connection's health, and the health of a route's targets) is asked through HTTP
 * BENCH_CONSOLE_RUNS times (default 30, after 3 to warm up), in rounds of every page in turn; it prints p50, p95 and p99
 * (until the answer's last byte), and beside them each page's first answer (the first warm-up's: the process had read
 * none of its days, usage-days.ts). By user, the console asks for its chart's 9 largest users and "Other" (`top`),
 * and the next 9 a page at a time (`offset`); every user's every day is asked too, beside it (the CSV holds them).
 *
 * BENCH_CONSOLE_AGAINST=<dir>: another checkout of Nexus (a git worktree of the base, say) is asked too, on the same
 * database: this checkout and that one each run as a process of their own (through tsx), every page asked of both in
 * turn in each round; each page's p50, p95 and p99 of both are printed, and the ratio of their p50s.
 *
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres): the server the fresh database is made on;
 * it is dropped at the end (kept with BENCH_KEEP_DATABASE=1). BENCH_CONSOLE_DB=<name>: a database kept so is measured
 * again instead (nothing seeded, its workspace found by name, migrated to the latest by Nexus's start, and kept); its
 * calls end when it was seeded, so the last 24 hours hold fewer of them as it ages.
 */
import { randomUUID } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import pg from 'pg';
import { rebuildWorkspaceRollupsSql, ROLLUP_TABLES } from '../src/domain/recording/rollup-sql.js';
import { copyRows, USAGE_EVENT_SEED_COLUMNS, uuidAt } from './lib/copy-rows.js';
import { freshNexusEnv, percentile, withFreshNexus } from './lib/fresh-nexus.js';
import { startNexusProcess, type NexusProcess } from './lib/nexus-process.js';

const INVOCATIONS = Number(process.env.BENCH_CONSOLE_INVOCATIONS ?? 1_000_000);
const USERS = Number(process.env.BENCH_CONSOLE_USERS ?? 2_000);
const DAYS = Number(process.env.BENCH_CONSOLE_DAYS ?? 30);
const RUNS = Number(process.env.BENCH_CONSOLE_RUNS ?? 30);
const AGAINST = process.env.BENCH_CONSOLE_AGAINST;
const KEPT = process.env.BENCH_CONSOLE_DB;
const TARGET_MS = 300;
const MODELS = ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'claude-sonnet-4-5', 'claude-haiku-4-5', 'o3-mini'];

/** A well-mixed 32-bit hash of `n` (murmur3's finalizer): which calls are refused and failed, spread over the users. */
function mix(n: number): number {
  let h = n + 1;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

const INVOCATION_COLUMNS = [
  'id',
  'workspace_id',
  'workspace_access_id',
  'provider_connection_id',
  'inference_key_id',
  'plan_id',
  'request_id',
  'method',
  'endpoint',
  'requested_model',
  'status',
  'metering_status',
  'quota_units',
  'error_code',
  'error_message',
  'started_at',
  'completed_at',
  'total_latency_ms',
  'attempt_id',
  'attempt_upstream_model',
  'attempt_status',
  'attempt_http_status',
  'attempt_started_at',
  'attempt_first_token_at',
  'attempt_completed_at',
  'attempt_duration_ms',
];

/** What an answer holds: a list's items, a summary's buckets, a CSV's lines (less its header), else 1. */
function rowsOf(text: string): number {
  if (!text.startsWith('[') && !text.startsWith('{')) return text.trimEnd().split('\n').length - 1;
  const body = JSON.parse(text) as unknown;
  if (Array.isArray(body)) return body.length;
  const buckets = (body as { buckets?: unknown[] }).buckets;
  return buckets ? buckets.length : 1;
}

/**
 * The workspace's users, accesses, calls, usage events and rollups seeded on a connection of its own; resolves with an
 * invocation from the middle of the range (what the searches look for).
 */
async function seedCalls(
  databaseUrl: string,
  workspaceId: string,
  planId: string,
  connectionId: string,
): Promise<{ id: string; request_id: string }> {
  const until = new Date();
  const since = new Date(until.getTime() - DAYS * 86_400_000);
  const seedStarted = Date.now();
  const seed = new pg.Client({ connectionString: databaseUrl });
  await seed.connect();
  await seed.query(
    `insert into workspace_users (id, workspace_id, external_user_id, email, name, created_at)
     select ('00000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid, $1, 'user-' || n, 'user' || n || '@example.com',
            'User ' || n, now()
       from generate_series(0, $2 - 1) as n`,
    [workspaceId, USERS],
  );
  await seed.query(
    `insert into workspace_accesses (id, workspace_id, user_id, plan_id, status, access_starts_at, created_at, updated_at)
     select ('00000000-0000-4000-9000-' || lpad(n::text, 12, '0'))::uuid, $1, ('00000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid,
            $3, 'ACTIVE', now() - interval '90 days', now(), now()
       from generate_series(0, $2 - 1) as n`,
    [workspaceId, USERS, planId],
  );
  // The calls and their events, made here and written with COPY, as a bulk load writes them. Ids as the gateway mints
  // them (UUID v7: the start's milliseconds first), so id order is time order.
  const span = until.getTime() - since.getTime();
  const calls = (n: number) => {
    const at = since.getTime() + Math.floor((n / INVOCATIONS) * span);
    const roll = mix(n) % 100;
    return {
      at,
      // The same id each time a call is made (its invocation's, then its event's reference to it).
      id: uuidAt(at, n),
      user: String(n % USERS).padStart(12, '0'),
      model: MODELS[n % MODELS.length]!,
      status: roll < 2 ? 'REJECTED' : roll === 2 ? 'UPSTREAM_ERROR' : 'SUCCEEDED',
      input: (n % 500) + 20,
      output: (n % 300) + 5,
    };
  };
  const iso = (ms: number) => new Date(ms).toISOString();
  const N = '\\N';
  await copyRows(seed, 'invocations', INVOCATION_COLUMNS, 0, INVOCATIONS, (n) => {
    const c = calls(n);
    const ok = c.status === 'SUCCEEDED';
    const reached = c.status !== 'REJECTED';
    // A refused call reached no provider: no attempt.
    const attempt = reached
      ? [
          uuidAt(c.at),
          c.model,
          c.status,
          ok ? 200 : 500,
          iso(c.at + 5),
          ok ? iso(c.at + 100 + (n % 400)) : N,
          iso(c.at + 790),
          600 + (n % 400),
        ]
      : [N, N, N, N, N, N, N, N];
    return `${[
      c.id,
      workspaceId,
      `00000000-0000-4000-9000-${c.user}`,
      connectionId,
      `00000000-0000-4000-b000-${c.user}`,
      planId,
      randomUUID(),
      'POST',
      'v1/chat/completions',
      c.model,
      c.status,
      'metered',
      ok ? c.input + 2 * c.output : 0,
      c.status === 'REJECTED' ? 'quota_insufficient' : N,
      c.status === 'REJECTED' ? 'The access has no quota left' : c.status === 'UPSTREAM_ERROR' ? 'The server had an error' : N,
      iso(c.at),
      iso(c.at + 800),
      800,
      ...attempt,
    ].join('\t')}\n`;
  });
  await copyRows(seed, 'usage_events', USAGE_EVENT_SEED_COLUMNS, 0, INVOCATIONS, (n) => {
    const c = calls(n);
    if (c.status !== 'SUCCEEDED') return '';
    return `${[
      uuidAt(c.at),
      workspaceId,
      `00000000-0000-4000-9000-${c.user}`,
      randomUUID(),
      c.id,
      'USAGE',
      c.input + 2 * c.output,
      c.input,
      0,
      c.output,
      c.model,
      iso(c.at),
    ].join('\t')}\n`;
  });
  // Analyzed before the rollups are computed from them (without their statistics the planner may spill to disk).
  await seed.query('vacuum analyze invocations');
  await seed.query('vacuum analyze usage_events');
  // The sums the recording statements keep (rollup-sql.ts), computed by the same SQL: what the usage page reads.
  await seed.query(rebuildWorkspaceRollupsSql('$1'), [workspaceId]);
  for (const table of ['workspace_users', 'workspace_accesses', ...ROLLUP_TABLES]) {
    await seed.query(`vacuum analyze ${table}`);
  }
  // What the searches look for: a request id and an invocation id from the middle of the range.
  const middle = (
    await seed.query(`select id, request_id from invocations where workspace_id = $1 order by id offset $2 limit 1`, [
      workspaceId,
      Math.floor(INVOCATIONS / 2),
    ])
  ).rows[0] as { id: string; request_id: string };
  await seed.end();
  console.log(
    `seeded ${INVOCATIONS.toLocaleString('en')} invocations of ${USERS.toLocaleString('en')} users over ${DAYS} days in ${((Date.now() - seedStarted) / 1000).toFixed(1)} s\n`,
  );
  return middle;
}

/** One GET of a page until its last byte: its time in ms and its text (an error unless 200). */
async function timedPage(serverUrl: string, path: string, headers: Record<string, string>, label: string) {
  const started = performance.now();
  const res = await fetch(`${serverUrl}${path}`, { headers });
  const text = await res.text();
  const took = performance.now() - started;
  if (res.status !== 200) throw new Error(`${label}: ${res.status} ${text}`);
  return { took, text };
}

/**
 * BENCH_CONSOLE_AGAINST: this checkout and the one at `against`, each a process of its own on the seeded database,
 * every page asked of each in turn (the order swapped every other round); each page's p50, p95 and p99 of both, and
 * the ratio of their p50s.
 */
async function compareBuilds(databaseUrl: string, headers: Record<string, string>, pages: [string, string][], against: string) {
  const env = { ...freshNexusEnv(databaseUrl), NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true' };
  const builds: { label: string; nexus: NexusProcess }[] = [
    { label: 'this', nexus: await startNexusProcess(env) },
    { label: 'against', nexus: await startNexusProcess(env, { root: against }) },
  ];
  try {
    const times = pages.map(() => builds.map((): number[] => []));
    const firsts = pages.map(() => builds.map(() => 0));
    const rows = pages.map(() => builds.map(() => 0));
    const refused = pages.map(() => builds.map((): string | undefined => undefined));
    for (let i = 0; i < RUNS + 3; i++) {
      for (const [p, [label, path]] of pages.entries()) {
        const order = i % 2 ? [1, 0] : [0, 1];
        for (const b of order) {
          // A page the other build does not answer (a parameter it does not know) is left out of its column.
          if (refused[p]![b]) continue;
          const answer = await timedPage(builds[b]!.nexus.url, path, headers, label).catch((err: Error) => {
            if (b === 0) throw err;
            refused[p]![b] = err.message;
          });
          if (!answer) continue;
          if (i >= 3) times[p]![b]!.push(answer.took);
          if (i === 0) firsts[p]![b] = answer.took;
          rows[p]![b] = rowsOf(answer.text);
        }
      }
    }
    console.log(
      `against: ${against}; load average now ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}\n`,
    );
    console.log(
      `${'page'.padEnd(40)} ${'rows'.padStart(11)} ${'this p50/p95/p99'.padStart(22)} ${'against p50/p95/p99'.padStart(22)}  this/against p50  first answer, this/against`,
    );
    for (const [p, [label]] of pages.entries()) {
      const [mine, theirs] = times[p]!.map((xs) => xs.sort((a, b) => a - b));
      const cell = (xs: number[]) =>
        xs.length ? `${percentile(xs, 50).toFixed(1)}/${percentile(xs, 95).toFixed(1)}/${percentile(xs, 99).toFixed(1)}` : 'refused';
      console.log(
        `${label.padEnd(40)} ${rows[p]!.join('/').padStart(11)} ${cell(mine!).padStart(22)} ${cell(theirs!).padStart(22)}  ${(theirs!.length ? (percentile(mine!, 50) / percentile(theirs!, 50)).toFixed(2) : '-').padStart(16)}  ${firsts[p]!.map((ms) => ms.toFixed(1)).join('/')}`,
      );
    }
  } finally {
    for (const { nexus } of builds) await nexus.stop();
  }
}

/** The ids the pages ask for: a workspace made, its calls seeded (seedCalls). */
async function seedWorkspace(post: (path: string, body: unknown) => Promise<{ id: string }>, databaseUrl: string): Promise<Seeded> {
  const workspaceId = (await post('/workspaces', { name: 'bench-console' })).id;
  const planId = (await post(`/workspaces/${workspaceId}/plans`, { key: 'bench', name: 'Bench', billingInterval: 'MONTH' })).id;
  // The connection the calls were made on (never called: the rows are seeded; a closed local port, allowed below).
  const connectionId = (
    await post(`/workspaces/${workspaceId}/provider-connections`, {
      name: 'bench upstream',
      protocolProfile: 'openai',
      baseUrl: 'http://127.0.0.1:9',
      apiKey: 'sk-bench-0123456789abcdefghijklmnopqrstuvwxyz',
    })
  ).id;

  // A route over the connection: the routes page asks for its targets' health.
  const routeId = (
    await post(`/workspaces/${workspaceId}/routes`, { name: 'bench-route', targets: [{ providerConnectionId: connectionId }] })
  ).id;

  const middle = await seedCalls(databaseUrl, workspaceId, planId, connectionId);
  return { workspaceId, connectionId, routeId, middle };
}

/** The ids the pages ask for, found in a kept database (BENCH_CONSOLE_DB) by the workspace's name. */
async function keptWorkspace(databaseUrl: string): Promise<Seeded> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const one = async (sql: string, params: unknown[]) => ((await client.query(sql, params)).rows[0] ?? {}) as Record<string, string>;
    const workspaceId = (await one(`select id from workspaces where name = 'bench-console'`, [])).id!;
    const connectionId = (await one(`select id from provider_connections where workspace_id = $1`, [workspaceId])).id!;
    const routeId = (await one(`select id from routes where workspace_id = $1`, [workspaceId])).id!;
    const middle = (await one(`select id, request_id from invocations where workspace_id = $1 order by id offset $2 limit 1`, [
      workspaceId,
      Math.floor(INVOCATIONS / 2),
    ])) as { id: string; request_id: string };
    return { workspaceId, connectionId, routeId, middle };
  } finally {
    await client.end();
  }
}

interface Seeded {
  workspaceId: string;
  connectionId: string;
  routeId: string;
  /** An invocation from the middle of the range (what the searches look for). */
  middle: { id: string; request_id: string };
}

await withFreshNexus(
  'console',
  async ({ url: serverUrl, databaseUrl, headers }) => {
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${serverUrl}/admin/v1${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
      if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string };
    };
    const { workspaceId, connectionId, routeId, middle } = KEPT ? await keptWorkspace(databaseUrl) : await seedWorkspace(post, databaseUrl);

    const list = `/admin/v1/workspaces/${workspaceId}/invocations`;
    // The usage page's asks: this month from its first midnight (UTC here), the last 30 days (a month at its end:
    // every seeded day), or the last 24 hours.
    const now = new Date();
    const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
    const summary = (
      range: 'month' | '30d' | '24h',
      granularity: 'day' | 'hour',
      groupBy: string,
      suffix = '',
      more: Record<string, string> = {},
    ) => {
      const since = range === 'month' ? monthStart : new Date(now.getTime() - (range === '30d' ? 30 : 1) * 86_400_000).toISOString();
      const query = new URLSearchParams({ since, until: now.toISOString(), granularity, groupBy, timeZone: 'UTC', ...more });
      return `/admin/v1/workspaces/${workspaceId}/usage-summary${suffix}?${query}`;
    };
    const pages: [string, string][] = [
      ['first page', `${list}?limit=20`],
      ['by request id', `${list}?q=${middle.request_id}`],
      ['by invocation id', `${list}?q=${middle.id}`],
      ['by email (any case)', `${list}?q=${encodeURIComponent(`USER${Math.floor(USERS * 0.6)}@example.com`)}`],
      ['by external id', `${list}?q=user-77`],
      ['by model prefix, common (gpt-4o)', `${list}?model=gpt-4o`],
      ['by model prefix, none matches', `${list}?model=mistral`],
      ['a user, refused calls', `${list}?q=user-77&status=REJECTED`],
      ['first page, refused calls', `${list}?status=REJECTED`],
      ['detail (getInvocation)', `/admin/v1/invocations/${middle.id}`],
      ['usage: this month by model, by day', summary('month', 'day', 'model')],
      ['usage: this month by user, by day', summary('month', 'day', 'access')],
      // What the console's by-user view asks: its chart's 9 largest users and one "Other" series.
      ['usage: this month by user, top 9 + other', summary('month', 'day', 'access', '', { top: '9' })],
      // Its next page: the 10th to the 18th by spend.
      ['usage: by user, users 10-18 + other', summary('month', 'day', 'access', '', { top: '9', offset: '9' })],
      // The same at a month's end, when "this month" holds every seeded day.
      ['usage: last 30 days by user, top 9 + other', summary('30d', 'day', 'access', '', { top: '9' })],
      // Every user's every day at a month's end (62,000 buckets), whatever the day of the month.
      ['usage: last 30 days by user, by day', summary('30d', 'day', 'access')],
      ['usage: last 30 days by model, by day', summary('30d', 'day', 'model')],
      ['usage: last 24 hours by model, by hour', summary('24h', 'hour', 'model')],
      ['usage: this month by user, CSV', summary('month', 'day', 'access', '/export')],
      ['usage: last 30 days by user, CSV', summary('30d', 'day', 'access', '/export')],
      ['connection health (5 min, hour, day)', `/admin/v1/provider-connections/${connectionId}/health`],
      ['route health (its targets)', `/admin/v1/routes/${routeId}/health`],
    ];
    // The figures scale with how busy the host is: say it.
    console.log(
      `host: ${cpus().length} CPUs, load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} (1, 5, 15 min)\n`,
    );
    if (AGAINST) {
      await compareBuilds(databaseUrl, headers, pages, AGAINST);
      return;
    }
    console.log(
      `${'page'.padEnd(40)} ${'rows'.padStart(5)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)} ${'p99 ms'.padStart(8)}  target ${TARGET_MS} ms  first answer ms`,
    );
    let missed = 0;
    // Rounds of every page in turn, so that the host's load swings weigh on each page alike.
    const times = pages.map((): number[] => []);
    const firsts = pages.map(() => 0);
    const rows = pages.map(() => 0);
    for (let i = 0; i < RUNS + 3; i++) {
      for (const [p, [label, path]] of pages.entries()) {
        const { took, text } = await timedPage(serverUrl, path, headers, label);
        if (i >= 3) times[p]!.push(took);
        if (i === 0) firsts[p] = took;
        rows[p] = rowsOf(text);
      }
    }
    for (const [p, [label]] of pages.entries()) {
      const taken = times[p]!.sort((a, b) => a - b);
      const p99 = percentile(taken, 99);
      if (p99 > TARGET_MS) missed++;
      console.log(
        `${label.padEnd(40)} ${String(rows[p]).padStart(5)} ${percentile(taken, 50).toFixed(1).padStart(8)} ${percentile(taken, 95).toFixed(1).padStart(8)} ${p99.toFixed(1).padStart(8)}  ${(p99 <= TARGET_MS ? 'ok' : 'OVER').padEnd(19)}  ${firsts[p]!.toFixed(1)}`,
      );
    }
    console.log(missed ? `\n${missed} page(s) over ${TARGET_MS} ms at p99` : `\nevery page within ${TARGET_MS} ms at p99`);
    process.exitCode = missed ? 1 : 0;
  },
  { NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true' },
  KEPT ? { name: KEPT, existing: true } : {},
);

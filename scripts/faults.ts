/**
 * `npm run faults`: what Nexus keeps when production bites. It starts
 * PostgreSQL-backed Nexus processes (a fresh schema of DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres, dropped at the end) and an
 * upstream of its own, then runs four scenarios and prints one table:
 *
 *   1. kill      SIGKILL a process at a random moment while streams start
 *                through it, one every 50 ms (some within their first second);
 *                another process reclaims its lease; a new process starts. Three
 *                rounds (FAULTS_KILL_ROUNDS). Reports the calls delivered but
 *                never charged, and how many of them were younger than the
 *                snapshot's 500 ms window at the kill.
 *   2. outage    PostgreSQL away for about 10 s under load: through a TCP proxy
 *                the script cuts, or, with FAULTS_PG_CONTROL=1, the local cluster
 *                itself stopped and started (pg_ctlcluster).
 *      drain     PostgreSQL away 10 s (a proxy cut); a process gets SIGTERM 3 s
 *                into it and leaves its spool; how soon another process on the
 *                same data dir writes it once PostgreSQL is back.
 *      replace   the same drain, its replacement started on its data dir during
 *                the outage: how soon after PostgreSQL's return the replacement
 *                is ready, and has written the drained process's spool.
 *   3. two       two processes under concurrent load against a small quota.
 *   4. runaway   an upstream that ignores max_tokens (500 tokens for 20), streamed
 *                and JSON, against a small quota; then 200 JSON calls (2000 tokens
 *                for 20) in 10 waves of 20, each wave after the previous one ended:
 *                the overspend of all the waves against the first wave's.
 *   7. first-wave 2,000 JSON calls, 200 at a time over 2 processes, on a quota of 100,000, answered
 *                with 2,000 output tokens for max_tokens 20, for an OpenAI and an Anthropic
 *                connection and a model no process has seen yet: what the period consumed past
 *                its grant, and the units charged beyond the calls' admitted bounds (the first
 *                wave is admitted before any answer has taught the learned bound); then again
 *                with NEXUS_FIRST_WAVE_CALLS=10000, the first wave unbounded.
 *   6. route     a route over two targets (the same fake upstream, one of them through a TCP proxy),
 *                loadbalanced under load; the proxied one is cut for 10 s and restored: the calls
 *                that failed (none expected: the other target answers), the charges, and how soon
 *                after the restore its breaker closed again (docs/routes.md).
 *   5. changes   an access suspended and activated on one process while another
 *                serves its calls with a 5 s auth cache: how soon the other applies
 *                each change (LISTEN/NOTIFY), printed as a second table.
 *
 * Columns: calls the clients got an answer from (delivered), those of them
 * recorded, and lost (delivered and not recorded; for kill, delivered and never charged); units charged and units the charge rule
 * expects for what was delivered; overspend (consumed beyond granted); units
 * left reserved once it settled, and how long a dead process's units stayed
 * held; the statuses the clients saw. Like the bench it reports and asserts
 * nothing; the regular suite tests each rule (test/reliability).
 *
 *   FAULTS_ONLY='kill;outage' npm run faults     only those scenarios
 *   NEXUS_LEASE_TTL_MS=10000               the lease TTL the processes run with (default theirs)
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startAnthropicUpstream } from '../test/support/upstreams/anthropic.js';
import { startOpenAiUpstream } from '../test/support/upstreams/openai.js';
import { startNexusProcess, type NexusProcess } from './lib/nexus-process.js';
import { activateWorkspaceAccess, createProviderConnection, createRoute, suspendWorkspaceAccess } from '../test/support/sdk.js';
import { adminClient, provisionTenant } from '../test/support/tenant.js';
import { startTcpProxy } from './lib/tcp-proxy.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const PG_CONTROL = process.env.FAULTS_PG_CONTROL === '1';
const ONLY = process.env.FAULTS_ONLY?.split(';').map((s) => s.trim());
const ROOT_KEY = `nx-mgmt-faults-${randomBytes(16).toString('hex')}`;
const ENCRYPTION_KEY = randomBytes(32).toString('base64');
const PROVIDER_KEY = 'sk-faults-upstream-0123456789';
const SCHEMA = `faults_${randomBytes(5).toString('hex')}`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- the upstream ---------------------------------------------------------------------------
/**
 * The headers that make the fake OpenAI upstream (test/support/upstreams/openai.ts) answer `tokens` output tokens
 * and 10 input tokens, whatever max_tokens asks: a stream one token an event, `delayMs` apart; a JSON answer
 * after `delayMs`.
 */
const produce = (tokens: number, delayMs = 0): Record<string, string> => ({
  'x-fake-fault': 'runaway',
  'x-fake-usage': `10,${tokens},0`,
  ...(delayMs ? { 'x-fake-delay-ms': String(delayMs) } : {}),
});

// ---- Nexus processes and their tenants ------------------------------------------------------
const dataRoot = mkdtempSync(join(tmpdir(), 'nexus-faults-'));
const running: NexusProcess[] = [];

async function nexus(databaseUrl = DATABASE_URL, env: Record<string, string> = {}): Promise<NexusProcess> {
  const process_ = await startNexusProcess({
    DATABASE_URL: databaseUrl,
    NEXUS_DATABASE_SCHEMA: SCHEMA,
    NEXUS_DATA_DIR: mkdtempSync(join(dataRoot, 'nexus-')),
    NEXUS_MANAGEMENT_KEY: ROOT_KEY,
    NEXUS_ENCRYPTION_KEY: ENCRYPTION_KEY,
    NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
    NEXUS_LOG_LEVEL: 'warn',
    ...(process.env.NEXUS_LEASE_TTL_MS ? { NEXUS_LEASE_TTL_MS: process.env.NEXUS_LEASE_TTL_MS } : {}),
    ...env,
  });
  running.push(process_);
  return process_;
}

interface Tenant {
  workspaceId: string;
  accessId: string;
  connectionId: string;
  apiKey: string;
  gateway(nexus: NexusProcess): string;
}

let tenants = 0;
async function tenant(
  via: NexusProcess,
  upstreamUrl: string,
  quotaUnits: number,
  maxOutputTokens = 1000,
  profile: 'openai' | 'anthropic' = 'openai',
): Promise<Tenant> {
  const made = await provisionTenant(adminClient(via.url, ROOT_KEY), {
    name: `faults-${++tenants}`,
    profile,
    baseUrl: upstreamUrl,
    providerKey: PROVIDER_KEY,
    quotaUnits: BigInt(quotaUnits),
    inputPpm: 1_000_000n,
    outputPpm: 1_000_000n,
    cachedPpm: 1_000_000n,
    maxOutputTokens,
  });
  const connectionId = made.connectionId;
  return {
    workspaceId: made.workspaceId,
    accessId: made.accessId,
    connectionId,
    apiKey: made.apiKey,
    gateway: (through) => `${through.url}/providers/${connectionId}/v1/${profile === 'openai' ? 'chat/completions' : 'messages'}`,
  };
}

// ---- the database's view ----------------------------------------------------------------------
const db = new pg.Pool({ connectionString: DATABASE_URL, max: 4, options: `-c search_path=${SCHEMA}` });
// The outage ends this pool's idle connections too: the pool drops them, and the next query opens new ones.
db.on('error', () => {});

async function period(accessId: string) {
  const { rows } = await db.query(
    'select granted_units, reserved_units, consumed_units from quota_periods where workspace_access_id = $1 order by period_start desc limit 1',
    [accessId],
  );
  const r = rows[0] as { granted_units: string; reserved_units: string; consumed_units: string };
  return { granted: BigInt(r.granted_units), reserved: BigInt(r.reserved_units), consumed: BigInt(r.consumed_units) };
}

async function recorded(accessId: string) {
  const { rows } = await db.query('select request_id, status, error_code, quota_units from invocations where workspace_access_id = $1', [
    accessId,
  ]);
  return rows as { request_id: string; status: string; error_code: string | null; quota_units: string }[];
}

async function until(check: () => Promise<boolean>, ms: number): Promise<number | null> {
  const started = Date.now();
  while (Date.now() - started < ms) {
    if (await check()) return Date.now() - started;
    await sleep(100);
  }
  return null;
}

// ---- calls ----------------------------------------------------------------------------------
const BODY = (o: { stream?: boolean; maxTokens?: number } = {}) =>
  JSON.stringify({
    model: 'faults-model',
    messages: [{ role: 'user', content: 'faults' }],
    max_tokens: o.maxTokens ?? 50,
    stream: o.stream ?? false,
  });

interface Answer {
  status: number;
  requestId: string | null;
  /** Output tokens the client received (stream events with content, or the JSON's usage). */
  tokens: number;
  /** When its answer's headers arrived (Date.now()), if they did. */
  headersAt?: number;
}

/** An Anthropic Messages call's headers and body (a JSON answer only). */
const ANTHROPIC = (key: string, maxTokens: number) => ({
  headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  body: JSON.stringify({ model: 'faults-model', messages: [{ role: 'user', content: 'faults' }], max_tokens: maxTokens }),
});

async function callOnce(
  url: string,
  key: string,
  o: { stream?: boolean; maxTokens?: number; headers?: Record<string, string>; anthropic?: boolean } = {},
): Promise<Answer> {
  try {
    const messages = o.anthropic ? ANTHROPIC(key, o.maxTokens ?? 50) : undefined;
    const res = await fetch(url, {
      method: 'POST',
      headers: { ...(messages?.headers ?? { authorization: `Bearer ${key}` }), 'content-type': 'application/json', ...o.headers },
      body: messages?.body ?? BODY(o),
    });
    const requestId = res.headers.get('x-nexus-request-id');
    const headersAt = Date.now();
    if (res.status !== 200 || !o.stream) {
      const text = await res.text().catch(() => '');
      let tokens = 0;
      try {
        const usage = (JSON.parse(text) as { usage?: { completion_tokens?: number; output_tokens?: number } }).usage;
        tokens = usage?.completion_tokens ?? usage?.output_tokens ?? 0;
      } catch {
        // not JSON
      }
      return { status: res.status, requestId, tokens, headersAt };
    }
    let tokens = 0;
    try {
      for await (const chunk of res.body! as unknown as AsyncIterable<Uint8Array>)
        tokens += (
          Buffer.from(chunk)
            .toString('utf8')
            .match(/"delta":\{"content":"/g) ?? []
        ).length;
    } catch {
      // cut off
    }
    return { status: res.status, requestId, tokens, headersAt };
  } catch {
    return { status: 0, requestId: null, tokens: 0 };
  }
}

function statusLine(answers: Answer[]): string {
  const counts = new Map<number, number>();
  for (const a of answers) counts.set(a.status, (counts.get(a.status) ?? 0) + 1);
  return [...counts]
    .sort(([a], [b]) => a - b)
    .map(([s, n]) => `${s === 0 ? 'no answer' : s}×${n}`)
    .join(' ');
}

interface Row {
  scenario: string;
  delivered: number;
  recorded: number;
  lost: number;
  charged: bigint;
  expected: string;
  overspend: bigint;
  reservedLeft: bigint;
  freedAfter: string;
  statuses: string;
}

/**
 * The calls a scenario delivered (their request ids), each meant to be charged 20 units: how many were
 * recorded, how many lost, what the period was charged against that, past its grant, and still reserved.
 */
async function accountOf(
  accessId: string,
  delivered: string[],
): Promise<Pick<Row, 'delivered' | 'recorded' | 'lost' | 'charged' | 'expected' | 'overspend' | 'reservedLeft'>> {
  const ids = new Set((await recorded(accessId)).map((r) => r.request_id));
  const p = await period(accessId);
  const kept = delivered.filter((id) => ids.has(id)).length;
  return {
    delivered: delivered.length,
    recorded: kept,
    lost: delivered.length - kept,
    charged: p.consumed,
    expected: String(20n * BigInt(delivered.length)),
    overspend: p.consumed > p.granted ? p.consumed - p.granted : 0n,
    reservedLeft: p.reserved,
  };
}

const BODY_BYTES = (o: { stream?: boolean; maxTokens?: number }) => BigInt(Buffer.byteLength(BODY(o)));

// ---- 1. kill ----------------------------------------------------------------------------------
const KILL_ROUNDS = Number(process.env.FAULTS_KILL_ROUNDS ?? 3);
/** Where a round's kill falls, after the first stream started. */
const KILL_BANDS_MS: [number, number][] = [
  [500, 1000],
  [1000, 2000],
  [2000, 3500],
];
/** The snapshot's documented window: a call younger than this at the kill may go uncharged. */
const LOSS_WINDOW_MS = 500;

/**
 * KILL_ROUNDS rounds: streams start on process A, one every 50 ms; A is killed at a random moment
 * after the first one started (0.5 to 1 s, 1 to 2 s, 2 to 3.5 s in turn), so at the kill the
 * youngest streams are a few ms old, many are within their first second, others older. Process B reclaims A's lease; then A's data
 * dir gets a new process, which charges nothing again.
 */
async function killScenario(upstream: string): Promise<Row> {
  const b = await nexus();
  const t = await tenant(b, upstream, 100_000_000);
  const stream = { stream: true, maxTokens: 400, headers: produce(400, 20) };
  const answers: Answer[] = [];
  const ages: number[] = [];
  const killMoments: string[] = [];
  let charged = 0n;
  let again = 0n;
  let freedAfterMs = 0;
  for (let round = 0; round < KILL_ROUNDS; round++) {
    const a = await nexus();
    const started = Date.now();
    const calls: Promise<Answer>[] = [];
    // Random within a band per round: the first second of the first calls, then later ones.
    const [from, to] = KILL_BANDS_MS[round % KILL_BANDS_MS.length]!;
    const killAfter = from + Math.floor(Math.random() * (to - from));
    killMoments.push(`${(killAfter / 1000).toFixed(1)} s`);
    const starting = (async () => {
      for (let i = 0; i < 60 && Date.now() - started < killAfter; i++) {
        calls.push(callOnce(t.gateway(a), t.apiKey, stream));
        await sleep(50);
      }
    })();
    await sleep(killAfter);
    await a.kill();
    const killedAt = Date.now();
    await starting;
    const round_ = await Promise.all(calls);
    for (const x of round_) ages.push(x.headersAt === undefined ? -1 : killedAt - x.headersAt);
    answers.push(...round_);
    const freed = await until(async () => (await period(t.accessId)).reserved === 0n, 120_000);
    freedAfterMs = Math.max(freedAfterMs, freed === null ? Infinity : Date.now() - killedAt);
    charged = (await period(t.accessId)).consumed;
    // A process starts on the killed one's database again: nothing of its calls is charged twice.
    const restarted = await nexus();
    await sleep(2000);
    again += (await period(t.accessId)).consumed - charged;
    await restarted.stop();
  }
  const after = await period(t.accessId);
  const records = new Map((await recorded(t.accessId)).map((r) => [r.request_id, r]));
  const isDelivered = (x: Answer) => x.status === 200 && x.tokens > 0;
  const delivered = answers.filter(isDelivered);
  const uncharged = answers
    .map((x, i) => ({ x, age: ages[i]! }))
    .filter(({ x }) => isDelivered(x) && !(BigInt(records.get(x.requestId!)?.quota_units ?? 0) > 0n));
  const inWindow = uncharged.filter(({ age }) => age < LOSS_WINDOW_MS).length;
  const received = delivered.reduce((sum, x) => sum + BigInt(x.tokens), 0n);
  const deliveredAges = answers.flatMap((x, i) => (isDelivered(x) ? [ages[i]!] : []));
  const youngest = Math.min(...deliveredAges);
  // The rule for a call cut by its process's death: its input bound and the output it delivered, less what
  // it streamed after the last snapshot (at most its window).
  const expected = BODY_BYTES(stream) * BigInt(delivered.length) + received;
  await b.stop();
  return {
    scenario: `kill: SIGKILL at a random moment (${killMoments.join(', ')} after the first of 60 streams began, one every 50 ms; ${KILL_ROUNDS} rounds), restart`,
    delivered: delivered.length,
    recorded: delivered.filter((x) => records.has(x.requestId!)).length,
    lost: uncharged.length,
    charged: after.consumed,
    expected: `${expected} (delivered; ${expected - charged} streamed after the last snapshot)`,
    overspend: after.consumed > after.granted ? after.consumed - after.granted : 0n,
    reservedLeft: after.reserved,
    freedAfter: freedAfterMs === Infinity ? '>120 s' : `${(freedAfterMs / 1000).toFixed(1)} s`,
    statuses:
      `${statusLine(answers)}; delivered but never charged: ${uncharged.length} (${uncharged.length - inWindow} answering for ${LOSS_WINDOW_MS} ms or more at the kill, ` +
      `${inWindow} younger${inWindow ? `: ${uncharged.map(({ age }) => `${age} ms`).join(', ')}` : ''}); ${deliveredAges.filter((age) => age < 1000).length} of the delivered were in their first second at the kill, the youngest ${youngest} ms; ` +
      `${[...records.values()].filter((r) => r.error_code === 'gateway_lost').length} gateway_lost; charged again after restarts: ${again}`,
  };
}

// ---- 2. outage --------------------------------------------------------------------------------
async function outageScenario(upstream: string): Promise<Row> {
  const url = new URL(DATABASE_URL);
  const proxy = PG_CONTROL ? undefined : await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
  const through = new URL(DATABASE_URL);
  if (proxy) through.port = String(proxy.port);
  const c = await nexus(through.toString());
  const t = await tenant(c, upstream, 100_000_000);
  const answers: { phase: 'before' | 'during' | 'after'; answer: Answer }[] = [];
  let phase: 'before' | 'during' | 'after' = 'before';
  let stop = false;
  const clients = Array.from({ length: 8 }, async () => {
    while (!stop) {
      const answer = await callOnce(t.gateway(c), t.apiKey, { headers: produce(10) });
      answers.push({ phase, answer });
      if (answer.status !== 200) await sleep(50);
    }
  });
  await sleep(3000);
  phase = 'during';
  if (proxy) {
    await proxy.cut();
    await sleep(10_000);
    await proxy.restore();
  } else {
    execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', clusterVersion(), 'main', 'stop', '-m', 'fast']);
    try {
      await sleep(10_000);
    } finally {
      execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', clusterVersion(), 'main', 'start']);
    }
  }
  phase = 'after';
  await sleep(5000);
  stop = true;
  await Promise.all(clients);
  const delivered = answers.filter((x) => x.answer.status === 200);
  await until(async () => (await recorded(t.accessId)).length >= delivered.length, 60_000);
  await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.answer.requestId!),
  );
  await c.stop();
  await proxy?.close();
  const during = answers.filter((x) => x.phase === 'during').map((x) => x.answer);
  return {
    scenario: `outage: PostgreSQL away 10 s under load (${proxy ? 'connection cut by a proxy' : 'cluster stopped'})`,
    ...account,
    freedAfter: '-',
    statuses: `during: ${statusLine(during)}; all: ${statusLine(answers.map((x) => x.answer))}`,
  };
}

// ---- 2b. a draining process's spool -------------------------------------------------------------
/**
 * Processes G and H share one data dir and reach PostgreSQL through a proxy. G serves calls; the proxy
 * is cut; 3 s later G gets SIGTERM and drains into its spool file; PostgreSQL comes back 10 s after the
 * cut. H, running all along, writes G's spool: how long after PostgreSQL's return every call G delivered
 * is recorded (10 s wanted).
 */
async function drainScenario(upstream: string): Promise<Row> {
  const url = new URL(DATABASE_URL);
  const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
  const through = new URL(DATABASE_URL);
  through.port = String(proxy.port);
  const dir = mkdtempSync(join(dataRoot, 'shared-'));
  const g = await nexus(through.toString(), { NEXUS_DATA_DIR: dir });
  const h = await nexus(through.toString(), { NEXUS_DATA_DIR: dir });
  const t = await tenant(g, upstream, 100_000_000);
  const answers: Answer[] = [];
  let stop = false;
  const clients = Array.from({ length: 8 }, async () => {
    while (!stop) {
      const answer = await callOnce(t.gateway(g), t.apiKey, { headers: produce(10) });
      answers.push(answer);
      if (answer.status !== 200) await sleep(50);
    }
  });
  await sleep(2000);
  await proxy.cut();
  const cutAt = Date.now();
  await sleep(3000);
  const stopped = g.stop();
  await sleep(500);
  stop = true;
  await Promise.all(clients);
  await stopped;
  const files = readdirSync(join(dir, 'spool')).length;
  await sleep(Math.max(0, cutAt + 10_000 - Date.now()));
  await proxy.restore();
  const delivered = answers.filter((x) => x.status === 200);
  const written = await until(async () => {
    const ids = new Set((await recorded(t.accessId)).map((r) => r.request_id));
    return delivered.every((x) => ids.has(x.requestId!));
  }, 60_000);
  await until(async () => (await period(t.accessId)).reserved === 0n, 60_000);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.requestId!),
  );
  await h.stop();
  await proxy.close();
  return {
    scenario: 'drain: PostgreSQL away 10 s (proxy cut), SIGTERM after 3 s, its spool written by a live process on the data dir',
    ...account,
    freedAfter: '-',
    statuses:
      `${statusLine(answers)}; spool files left by the drain: ${files}; ` +
      `a draining process's spool written within ${written === null ? '>60' : (written / 1000).toFixed(1)} s of PostgreSQL's return`,
  };
}

// ---- 2c. a drained process replaced during the outage ------------------------------------------
/**
 * G serves calls through a proxy to PostgreSQL; the proxy is cut; 3 s later G gets SIGTERM and drains into its
 * spool file; once it has exited, R starts on G's data dir, as a supervisor replacing G would, while PostgreSQL is
 * still away: R waits for it (/healthz 200, /readyz 503). PostgreSQL comes back 10 s after the cut: how long until
 * R is ready, and until every call G delivered is recorded.
 */
async function replaceScenario(upstream: string): Promise<Row> {
  const url = new URL(DATABASE_URL);
  const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
  const through = new URL(DATABASE_URL);
  through.port = String(proxy.port);
  const dir = mkdtempSync(join(dataRoot, 'replaced-'));
  const g = await nexus(through.toString(), { NEXUS_DATA_DIR: dir });
  const t = await tenant(g, upstream, 100_000_000);
  const answers: Answer[] = [];
  let stop = false;
  const clients = Array.from({ length: 8 }, async () => {
    while (!stop) {
      const answer = await callOnce(t.gateway(g), t.apiKey, { headers: produce(10) });
      answers.push(answer);
      if (answer.status !== 200) await sleep(50);
    }
  });
  await sleep(2000);
  await proxy.cut();
  const cutAt = Date.now();
  await sleep(3000);
  const stopped = g.stop();
  await sleep(500);
  stop = true;
  await Promise.all(clients);
  await stopped;
  const files = readdirSync(join(dir, 'spool')).length;
  const r = await nexus(through.toString(), { NEXUS_DATA_DIR: dir });
  const waiting = (await fetch(`${r.url}/readyz`)).status;
  await sleep(Math.max(0, cutAt + 10_000 - Date.now()));
  await proxy.restore();
  const back = Date.now();
  let readyMs: number | null = null;
  while (Date.now() - back < 60_000) {
    if (
      (await fetch(`${r.url}/readyz`).then(
        (res) => res.status,
        () => 0,
      )) === 200
    ) {
      readyMs = Date.now() - back;
      break;
    }
    await sleep(20);
  }
  const delivered = answers.filter((x) => x.status === 200);
  const written = await until(async () => {
    const ids = new Set((await recorded(t.accessId)).map((row) => row.request_id));
    return delivered.every((x) => ids.has(x.requestId!));
  }, 60_000);
  await until(async () => (await period(t.accessId)).reserved === 0n, 60_000);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.requestId!),
  );
  await r.stop();
  await proxy.close();
  const seconds = (ms: number | null) => (ms === null ? '>60' : (ms / 1000).toFixed(1));
  return {
    scenario: 'replace: PostgreSQL away 10 s (proxy cut), SIGTERM after 3 s, a replacement started on its data dir during the outage',
    ...account,
    freedAfter: '-',
    statuses:
      `${statusLine(answers)}; spool files left by the drain: ${files}; the replacement's /readyz during the outage: ${waiting}; ` +
      `ready ${seconds(readyMs)} s and the drained process's spool written within ${seconds(written === null ? null : written + (readyMs ?? 0))} s of PostgreSQL's return`,
  };
}

function clusterVersion(): string {
  return execFileSync('ls', ['/etc/postgresql'], { encoding: 'utf8' }).trim().split('\n')[0]!;
}

// ---- 3. two processes, small quota --------------------------------------------------------------
async function twoScenario(upstream: string): Promise<Row> {
  const d = await nexus();
  const e = await nexus();
  const granted = 3000;
  const t = await tenant(d, upstream, granted);
  const answers: Answer[] = [];
  await Promise.all(
    Array.from({ length: 32 }, async (_v, i) => {
      for (let n = 0; n < 12; n++)
        answers.push(await callOnce(t.gateway(i % 2 ? e : d), t.apiKey, { maxTokens: 20, headers: produce(10) }));
    }),
  );
  await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
  const delivered = answers.filter((x) => x.status === 200);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.requestId!),
  );
  await d.stop();
  await e.stop();
  return {
    scenario: `two: 2 processes, 384 calls against ${granted} units`,
    ...account,
    freedAfter: '-',
    statuses: statusLine(answers),
  };
}

// ---- 4. an upstream that ignores max_tokens -----------------------------------------------------
async function runawayScenario(upstream: string): Promise<Row[]> {
  const f = await nexus();
  const rows: Row[] = [];
  for (const stream of [true, false]) {
    const granted = 2000;
    const t = await tenant(f, upstream, granted);
    const o = { stream, maxTokens: 20, headers: produce(500) };
    const answers: Answer[] = [];
    for (let i = 0; i < 8; i++) answers.push(await callOnce(t.gateway(f), t.apiKey, o));
    await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
    const delivered = answers.filter((x) => x.status === 200);
    const records = await recorded(t.accessId);
    const ids = new Set(records.map((r) => r.request_id));
    const p = await period(t.accessId);
    const bound = BODY_BYTES(o) + 20n;
    rows.push({
      scenario: `runaway: upstream sends 500 tokens for max_tokens 20 (${stream ? 'stream' : 'JSON'}), ${granted} units`,
      delivered: delivered.length,
      recorded: delivered.filter((x) => ids.has(x.requestId!)).length,
      lost: delivered.filter((x) => !ids.has(x.requestId!)).length,
      charged: p.consumed,
      expected: stream ? `${bound * BigInt(delivered.length)} (the bound, cut there)` : `${510n * BigInt(delivered.length)} (as reported)`,
      overspend: p.consumed > p.granted ? p.consumed - p.granted : 0n,
      reservedLeft: p.reserved,
      freedAfter: '-',
      statuses: `${statusLine(answers)}; tokens received per call: ${[...new Set(delivered.map((x) => x.tokens))].join(', ')}`,
    });
  }
  rows.push(await runawayWaves(f, upstream));
  await f.stop();
  return rows;
}

/**
 * 200 JSON calls answered with 2000 output tokens for max_tokens 20, in 10 waves of 20 (each after the previous
 * one ended), on a quota of 100,000. Overspend is counted two ways: units charged beyond the calls' admitted
 * bounds (their ADJUSTMENT events), per wave; and units consumed beyond the grant.
 */
async function runawayWaves(f: NexusProcess, upstream: string): Promise<Row> {
  const granted = 100_000;
  const t = await tenant(f, upstream, granted);
  const o = { maxTokens: 20, headers: produce(2000, 200) };
  const answers: Answer[] = [];
  const beyondBounds: bigint[] = [];
  let before = 0n;
  for (let wave = 0; wave < 10; wave++) {
    answers.push(...(await Promise.all(Array.from({ length: 20 }, () => callOnce(t.gateway(f), t.apiKey, o)))));
    await until(async () => (await period(t.accessId)).reserved === 0n && (await recorded(t.accessId)).length === answers.length, 30_000);
    const { rows: sum } = await db.query(
      `select coalesce(sum(units), 0) as units from usage_events where workspace_access_id = $1 and kind = 'ADJUSTMENT'`,
      [t.accessId],
    );
    const adjusted = BigInt((sum[0] as { units: string }).units);
    beyondBounds.push(adjusted - before);
    before = adjusted;
  }
  const delivered = answers.filter((x) => x.status === 200);
  const ids = new Set((await recorded(t.accessId)).map((r) => r.request_id));
  const p = await period(t.accessId);
  const later = beyondBounds.slice(1).reduce((a, b) => a + b, 0n);
  return {
    scenario: `runaway JSON in 10 waves of 20: 2000 tokens for max_tokens 20, ${granted} units`,
    delivered: delivered.length,
    recorded: delivered.filter((x) => ids.has(x.requestId!)).length,
    lost: delivered.filter((x) => !ids.has(x.requestId!)).length,
    charged: p.consumed,
    expected: `${2010n * BigInt(delivered.length)} (as reported)`,
    overspend: p.consumed > p.granted ? p.consumed - p.granted : 0n,
    reservedLeft: p.reserved,
    freedAfter: '-',
    statuses: `${statusLine(answers)}; units beyond the calls' bounds: first wave ${beyondBounds[0]}, waves 2 to 10 ${later} (${beyondBounds.slice(1).join(', ')}); answered per wave ${Array.from({ length: 10 }, (_, w) => answers.slice(w * 20, w * 20 + 20).filter((x) => x.status === 200).length).join(', ')}`,
  };
}

// ---- 7. the first wave on a model no process has seen ------------------------------------------------
/**
 * 2,000 JSON calls, 200 at a time (each of 200 clients calls again as soon as it has its answer), spread over two
 * processes, on a quota of 100,000 units (one unit a token), answered with 2,000 output tokens for max_tokens 20
 * after 200 ms. No answer has come back when the first 200 are admitted: the learned bound does not exist yet.
 * Reports what the period consumed, past its grant and as a share of it, and what calls were charged beyond the
 * bounds they were admitted at (the first wave's excess, whether or not the grant absorbed it).
 */
async function firstWaveScenario(profile: 'openai' | 'anthropic', upstream: string, unbounded = false): Promise<Row> {
  // Unbounded: more places in the first wave than calls at a time, as if nothing held it.
  const env: Record<string, string> = unbounded ? { NEXUS_FIRST_WAVE_CALLS: '10000' } : {};
  const p = await nexus(DATABASE_URL, env);
  const q = await nexus(DATABASE_URL, env);
  const granted = 100_000;
  const t = await tenant(p, upstream, granted, 1000, profile);
  const o = { maxTokens: 20, headers: produce(2000, 200), anthropic: profile === 'anthropic' };
  const answers: Answer[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 200 }, async (_v, client) => {
      while (next < 2000) {
        next++;
        answers.push(await callOnce(t.gateway(client % 2 ? q : p), t.apiKey, o));
      }
    }),
  );
  await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
  const delivered = answers.filter((x) => x.status === 200);
  const ids = new Set((await recorded(t.accessId)).map((r) => r.request_id));
  const after = await period(t.accessId);
  const over = after.consumed > after.granted ? after.consumed - after.granted : 0n;
  // Charged beyond what the calls were admitted at (their ADJUSTMENT events): the calls admitted before any answer.
  const { rows: beyond } = await db.query(
    `select count(*) as calls, coalesce(sum(units), 0) as units from usage_events where workspace_access_id = $1 and kind = 'ADJUSTMENT'`,
    [t.accessId],
  );
  const past = beyond[0] as { calls: string; units: string };
  await p.stop();
  await q.stop();
  return {
    scenario: `first wave (${profile}${unbounded ? ', NEXUS_FIRST_WAVE_CALLS=10000' : ''}): 2000 JSON calls 200 at a time over 2 processes, 2000 tokens for max_tokens 20, ${granted} units`,
    delivered: delivered.length,
    recorded: delivered.filter((x) => ids.has(x.requestId!)).length,
    lost: delivered.filter((x) => !ids.has(x.requestId!)).length,
    charged: after.consumed,
    expected: `${2010n * BigInt(delivered.length)} (as reported)`,
    overspend: over,
    reservedLeft: after.reserved,
    freedAfter: '-',
    statuses:
      `${statusLine(answers)}; consumed past the grant: ${over} units (+${((Number(over) * 100) / granted).toFixed(1)}%); ` +
      `charged beyond their admitted bounds: ${past.units} units, by ${past.calls} calls`,
  };
}

// ---- 6. a route's target killed and restarted under load ------------------------------------------
async function routeScenario(upstream: string): Promise<Row> {
  const target = new URL(upstream);
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
  const r = await nexus();
  const t = await tenant(r, upstream, 100_000_000);
  const client = adminClient(r.url, ROOT_KEY);
  const proxied = await createProviderConnection({
    client,
    path: { workspaceId: t.workspaceId },
    body: { name: 'through the proxy', protocolProfile: 'openai', baseUrl: `http://127.0.0.1:${proxy.port}`, apiKey: PROVIDER_KEY },
  });
  const cooldownMs = 2000;
  const route = await createRoute({
    client,
    path: { workspaceId: t.workspaceId },
    body: {
      name: 'faults',
      strategy: 'loadbalance',
      targets: [
        { providerConnectionId: proxied.data!.id, timeoutMs: 2000 },
        { providerConnectionId: t.connectionId, timeoutMs: 2000 },
      ],
      breaker: { consecutiveFailures: 3, cooldownMs },
    },
  });
  if (route.response.status !== 201) throw new Error(`createRoute: ${route.response.status} ${JSON.stringify(route.error)}`);
  const url = `${r.url}/providers/${route.data!.id}/v1/chat/completions`;
  const breakerOf = async () => {
    const { rows } = await db.query('select state from route_breakers where route_id = $1 and provider_connection_id = $2', [
      route.data!.id,
      proxied.data!.id,
    ]);
    return (rows[0] as { state: string } | undefined)?.state ?? 'closed';
  };
  await sleep(500); // the process reads its routes every 250 ms
  const answers: { phase: 'before' | 'during' | 'after'; answer: Answer }[] = [];
  let phase: 'before' | 'during' | 'after' = 'before';
  let stop = false;
  const clients = Array.from({ length: 8 }, async () => {
    while (!stop) {
      const answer = await callOnce(url, t.apiKey, { headers: produce(10) });
      answers.push({ phase, answer });
      if (answer.status !== 200) await sleep(50);
    }
  });
  await sleep(3000);
  phase = 'during';
  await proxy.cut();
  await sleep(10_000);
  const opened = await breakerOf();
  await proxy.restore();
  phase = 'after';
  const closedAfter = await until(async () => (await breakerOf()) === 'closed', 30_000);
  await sleep(1000);
  stop = true;
  await Promise.all(clients);
  const delivered = answers.filter((x) => x.answer.status === 200);
  await until(async () => (await recorded(t.accessId)).length >= answers.length, 60_000);
  await until(async () => (await period(t.accessId)).reserved === 0n, 30_000);
  const account = await accountOf(
    t.accessId,
    delivered.map((x) => x.answer.requestId!),
  );
  await r.stop();
  await proxy.close();
  const failed = answers.filter((x) => x.answer.status !== 200).length;
  return {
    scenario: `route: loadbalanced over 2 targets under load (8 clients), one cut 10 s and restored (cooldown ${cooldownMs} ms)`,
    ...account,
    freedAfter:
      closedAfter === null
        ? 'breaker still open after 30 s'
        : `breaker (${opened} during the cut) closed ${closedAfter} ms after the restore`,
    statuses: `failed calls: ${failed}; during: ${statusLine(answers.filter((x) => x.phase === 'during').map((x) => x.answer))}; all: ${statusLine(answers.map((x) => x.answer))}`,
  };
}

// ---- 5. a change made on one process, applied by another -----------------------------------------
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;

/**
 * The access is suspended, then activated, 20 times in all, through process D's Admin API, while process E
 * (its lookup cached, for up to 5 s) is sent a call every 2 ms, without waiting for the answers. E applied
 * the change between the start of the last call that did not show it and the start of the first that did:
 * both are reported, in milliseconds from D's answer. D's own next call is checked too.
 */
async function changesScenario(upstream: string): Promise<string> {
  const env = { NEXUS_AUTH_CACHE_TTL_MS: '5000' };
  const d = await nexus(DATABASE_URL, env);
  const e = await nexus(DATABASE_URL, env);
  const t = await tenant(d, upstream, 1_000_000_000);
  const call = (through: NexusProcess) => callOnce(t.gateway(through), t.apiKey, { maxTokens: 5, headers: produce(1) });
  /** Per change: [last call not showing it started, first call showing it started], ms after D's answer. */
  const applied: [number, number][] = [];
  const callMs: number[] = [];
  let sameProcessSaw = 0;
  const rounds = 20;
  for (let round = 0; round < rounds; round++) {
    const want = round % 2 === 0 ? 403 : 200;
    const before = performance.now();
    await call(e);
    callMs.push(performance.now() - before);
    const change = want === 403 ? suspendWorkspaceAccess : activateWorkspaceAccess;
    const changed = await change({ client: adminClient(d.url, ROOT_KEY), path: { accessId: t.accessId } });
    if (changed.response.status !== 200) throw new Error(`access change: ${changed.response.status} ${JSON.stringify(changed.error)}`);
    const answeredAt = performance.now();
    const [own] = await Promise.all([
      call(d),
      (async () => {
        const calls: Promise<{ started: number; shows: boolean }>[] = [];
        let shown = false;
        while (!shown) {
          const started = performance.now() - answeredAt;
          if (started > 10_000) throw new Error('the other process did not apply the change within 10 s');
          calls.push(call(e).then((a) => ((shown ||= a.status === want), { started, shows: a.status === want })));
          await sleep(2);
        }
        const answers = await Promise.all(calls);
        const first = Math.min(...answers.filter((a) => a.shows).map((a) => a.started));
        applied.push([Math.max(0, ...answers.filter((a) => !a.shows && a.started < first).map((a) => a.started)), first]);
      })(),
    ]);
    if (own.status === want) sameProcessSaw++;
  }
  await d.stop();
  await e.stop();
  const ms = (v: number) => v.toFixed(1);
  const range = (p: number | 'max') => {
    const pick = (values: number[]) => (values.sort((a, b) => a - b), p === 'max' ? values.at(-1)! : percentile(values, p));
    return `${ms(pick(applied.map(([from]) => from)))} to ${ms(pick(applied.map(([, to]) => to)))}`;
  };
  callMs.sort((a, b) => a - b);
  return `| ${rounds} (suspend, activate) | ${sameProcessSaw}/${rounds} | ${range(0.5)} | ${range(0.9)} | ${range('max')} | ${ms(percentile(callMs, 0.5))} |`;
}

// ---- the run --------------------------------------------------------------------------------------
async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  await admin.query(`create schema ${SCHEMA}`);
  await admin.end();
  const upstream = await startOpenAiUpstream({ apiKey: PROVIDER_KEY });
  const anthropicUpstream = await startAnthropicUpstream({ apiKey: PROVIDER_KEY });
  const rows: Row[] = [];
  let changes: string | undefined;
  const wanted = (name: string) => !ONLY || ONLY.includes(name);
  try {
    if (wanted('kill')) rows.push(await killScenario(upstream.url));
    if (wanted('outage')) rows.push(await outageScenario(upstream.url));
    if (wanted('drain')) rows.push(await drainScenario(upstream.url));
    if (wanted('replace')) rows.push(await replaceScenario(upstream.url));
    if (wanted('two')) rows.push(await twoScenario(upstream.url));
    if (wanted('runaway')) rows.push(...(await runawayScenario(upstream.url)));
    if (wanted('route')) rows.push(await routeScenario(upstream.url));
    if (wanted('first-wave')) {
      rows.push(await firstWaveScenario('openai', upstream.url));
      rows.push(await firstWaveScenario('anthropic', anthropicUpstream.url));
      rows.push(await firstWaveScenario('openai', upstream.url, true));
      rows.push(await firstWaveScenario('anthropic', anthropicUpstream.url, true));
    }
    if (wanted('changes')) changes = await changesScenario(upstream.url);
  } finally {
    for (const p of running) await p.kill();
    await upstream.close();
    await anthropicUpstream.close();
    await db.query(`drop schema if exists ${SCHEMA} cascade`).catch(() => {});
    await db.end();
    rmSync(dataRoot, { recursive: true, force: true });
  }
  console.log(
    `\nFault campaign (${new Date().toISOString()}; PostgreSQL at ${new URL(DATABASE_URL).host}; FAULTS_PG_CONTROL=${PG_CONTROL ? 1 : 0})`,
  );
  if (rows.length) {
    console.log(
      '| scenario | delivered | recorded | lost | units charged | units expected | overspend | reserved left | dead units freed after | statuses |',
    );
    console.log('|---|---:|---:|---:|---:|---|---:|---:|---:|---|');
  }
  for (const r of rows) {
    console.log(
      `| ${r.scenario} | ${r.delivered} | ${r.recorded} | ${r.lost} | ${r.charged} | ${r.expected} | ${r.overspend} | ${r.reservedLeft} | ${r.freedAfter} | ${r.statuses} |`,
    );
  }
  if (changes) {
    console.log(
      '\nChanges on one process, applied by another (auth cache TTL 5 s; ms after the Admin API answered, between the start of the last call that did not show it and the first that did)',
    );
    console.log(
      '| changes | seen by the next call on the same process | other process p50 ms | p90 ms | max ms | one gateway call, p50 ms |',
    );
    console.log('|---|---:|---:|---:|---:|---:|');
    console.log(changes);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);

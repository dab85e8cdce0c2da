/**
 * `npm run bench:stages`: what the protocol's part of one metered call costs, in this process, stage by stage: the
 * gateway URL's parse, the inference key's read, the route's lookup in the connection's protocol table, the request's
 * read for its bounds (prepareCall: the JSON parse, the caps, the input estimate), the upstream's headers, and the
 * answer's read for its usage (a JSON answer, and the SSE events of a stream with its usage chunk: the bench's
 * upstream's answers, test/support/upstreams/openai.ts); and, apart from these, the call's rows as the recorder queues
 * them, with its share of its batch's arrays (not in the totals). No socket, no database: each stage's own CPU (the process's
 * CPU time, not the wall clock, which counts the waits for a core on a shared host), in nanoseconds per call, the
 * median of BENCH_STAGES_ROUNDS rounds (default 15) of BENCH_STAGES_CALLS calls each (default 20,000).
 *
 * BENCH_STAGES_AGAINST=<dir> measures another checkout's same stages beside this one's (a git worktree of an earlier
 * commit whose gateway has these functions), alternating the two in each round, and prints the difference: what a
 * change to the hot path's per-call code costs, free of the host's noise that blurs `npm run bench`'s end-to-end CPU
 * per call by several percent (docs/performance.md).
 *
 *   git worktree add --detach ../before HEAD~1 && (cd ../before && ln -s ../<this checkout>/node_modules .)
 *   BENCH_STAGES_AGAINST=../before npm run bench:stages
 */
import { existsSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { fixedOpenAiAnswers } from '../test/support/upstreams/openai.js';
import { benchRequestBody } from './lib/bench-request.js';

const ROUNDS = Number(process.env.BENCH_STAGES_ROUNDS ?? 15);
const CALLS = Number(process.env.BENCH_STAGES_CALLS ?? 20_000);
const projectRoot = join(fileURLToPath(import.meta.url), '..', '..');
const roots = [projectRoot, ...(process.env.BENCH_STAGES_AGAINST ? [resolve(process.env.BENCH_STAGES_AGAINST)] : [])];

/** The bench's request (scripts/bench.ts): its URL, its headers as autocannon sends them, and its bodies. */
const URL_PATH = '/providers/0a1b2c3d-0000-4000-8000-000000000000/v1/chat/completions';
const RAW_HEADERS = [
  'host',
  '127.0.0.1:8080',
  'content-type',
  'application/json',
  'authorization',
  'Bearer nx-key-0123456789abcdefghijklmnopqrstuvwxyz',
  'content-length',
  '120',
  'user-agent',
  'autocannon',
  'connection',
  'keep-alive',
];
const body = (stream: boolean) => Buffer.from(benchRequestBody(stream));
const { answer, events } = fixedOpenAiAnswers();
const EVENTS = Buffer.from(events);
const CAPS = { maxOutputTokens: 4096, clamp: true };

type Stage = () => unknown;

/** One checkout's stages, read from its own source (the signatures every gateway since the protocol tables has). */
async function stagesOf(root: string): Promise<Record<string, Stage>> {
  const from = (file: string) => import(pathToFileURL(join(root, 'src', file)).href);
  // The tables are src/protocols/ (a layer of their own), src/gateway/protocols/ in a checkout before it.
  const tables = existsSync(join(root, 'src', 'protocols')) ? 'protocols/index.ts' : 'gateway/protocols/index.ts';
  // Their reading of a request and a JSON answer is src/protocols/inspectors.ts, src/gateway/inspectors.ts before.
  const inspectors = existsSync(join(root, 'src', 'protocols', 'inspectors.ts')) ? 'protocols/inspectors.ts' : 'gateway/inspectors.ts';
  const [{ parseGatewayUrl }, { credentialOf }, { protocolOf }, reading, { upstreamHeaders }, { SseMeter }] = await Promise.all(
    ['gateway/path-safety.ts', 'gateway/client-request.ts', tables, inspectors, 'gateway/headers.ts', 'gateway/sse-meter.ts'].map(from),
  );
  const { prepareCall, usageFromJson } = reading;
  // What admission calls: prepareRequest (a whole body or an upload's form, by its endpoint), prepareCall before it.
  const prepare: typeof prepareCall = reading.prepareRequest ?? prepareCall;
  const req = { url: URL_PATH, rawHeaders: RAW_HEADERS, headers: {} } as unknown as IncomingMessage;
  const protocol = protocolOf('openai');
  const { route } = parseGatewayUrl(URL_PATH);
  const inspector = protocol.inspectorFor('POST', route);
  if (!inspector) throw new Error(`${root}: no inspector for POST ${route}`);
  const json = body(false);
  const stream = body(true);
  const bounds = prepareCall(inspector, stream, CAPS);
  return {
    'gateway URL': () => parseGatewayUrl(URL_PATH),
    'inference key': () => credentialOf(req),
    'route lookup': () => protocol.inspectorFor('POST', route),
    'request read, JSON': () => prepare(inspector, json, CAPS),
    'request read, stream': () => prepare(inspector, stream, CAPS),
    'upstream headers': () => upstreamHeaders(RAW_HEADERS, protocol, 'sk-provider-key', json.length),
    // Whether the answer is read for its usage (its endpoint's answerRead; a media Content-Type's test before it), and its read.
    'answer read, JSON': () => (answerRead(inspector, 'application/json') ? usageFromJson(inspector, answer) : undefined),
    'answer read, stream': () => {
      const meter = new SseMeter(inspector, bounds);
      meter.push(EVENTS);
      return meter.usage;
    },
    ...(await recordStageOf(root)),
  };
}

/**
 * The call's rows as the recorder queues them (callRows: its invocation and its settlement, as the record statement's
 * array elements) and its share of its batch's two arrays, for a streamed call that succeeded; a checkout without src/records/call-rows.ts has no such stage.
 * Not the protocol's part: left out of the totals.
 */
async function recordStageOf(root: string): Promise<Record<string, Stage>> {
  const file = join(root, 'src', 'records', 'call-rows.ts');
  if (!existsSync(file)) return {};
  const [{ callRows }, { invocationRecord }, { newId }] = await Promise.all(
    [file, join(root, 'src', 'records', 'invocation-record.ts'), join(root, 'src', 'ids.ts')].map((f) => import(pathToFileURL(f).href)),
  );
  const ms = (ns: bigint) => Number(ns) / 1e6;
  const at = new Date();
  const ids = Array.from({ length: 9 }, () => newId() as string);
  const invocation = invocationRecord(
    {
      id: ids[0],
      workspaceId: ids[1],
      accessId: ids[2],
      connectionId: ids[3],
      keyId: ids[4],
      planId: ids[5],
      requestId: `req_${ids[8]}`,
      traceId: null,
      method: 'POST',
      endpoint: 'v1/chat/completions',
      startedAt: at,
      metered: true,
    },
    { requestedModel: 'bench-model', streamed: true, leaseId: ids[6] },
    {
      upstream: true,
      status: 'SUCCEEDED',
      errorCode: null,
      errorMessage: null,
      quotaUnits: 20n,
      completedAt: at,
      totalLatencyMs: ms(1_037_036n),
      upstreamResponseId: null,
      attemptId: ids[7],
      attemptStatus: 'SUCCEEDED',
      upstreamModel: 'fake-model-2026-01-01',
      httpStatus: 200,
      attemptStartedAt: at,
      attemptDurationMs: ms(912_345n),
      providerLatencyMs: ms(912_345n),
      providerTtftMs: ms(800_001n),
      totalTtftMs: ms(1_035_802n),
    },
  );
  const pricing = { rule: null, inputMultiplierPpm: 1_000_000n, cachedInputMultiplierPpm: 1_000_000n, outputMultiplierPpm: 1_000_000n };
  const consumed = { units: 20n, inputTokens: 10n, cachedInputTokens: 0n, outputTokens: 5n, model: 'bench-model', pricing };
  const { recordArray } = await import(pathToFileURL(join(root, 'src', 'db', 'row-record.ts')).href);
  // The call's share of its batch's parameters too: the recorder writes the rows of about 40 calls as two arrays.
  const batch: { invocation: string; leaseCall: string | null }[] = [];
  return {
    [RECORD_ROWS]: () => {
      batch.push(callRows({ invocation, lease: { id: ids[6], bound: 4106n, take: 4086n }, consumed }));
      if (batch.length < BATCH_CALLS) return batch.length;
      const arrays = [recordArray(batch.map((r) => r.leaseCall)), recordArray(batch.map((r) => r.invocation))];
      batch.length = 0;
      return arrays;
    },
  };
}

/** Calls per record statement in the record rows' stage (what `npm run bench` sees at 800 requests/s: 40-80). */
const BATCH_CALLS = 40;
/** The stage of the call's rows (not the protocol's part: not in the totals). */
const RECORD_ROWS = 'record rows (not in the totals)';

/** The relay's test of a JSON answer: read for usage unless media (its endpoint's answerRead; the relay's own test before it). */
const MEDIA_ANSWER = /^\s*(?:audio|image|video)\/|^\s*application\/octet-stream/i;
const answerRead = (inspector: { answerRead?: (contentType: string) => boolean }, contentType: string): boolean =>
  inspector.answerRead ? inspector.answerRead(contentType) : !MEDIA_ANSWER.test(contentType);

/** Nanoseconds per call of `stage` over CALLS calls. */
function time(stage: Stage): number {
  let sink: unknown;
  // The process's CPU time (getrusage: its thread's and V8's helper threads'), not the wall clock, which on a shared
  // host counts the waits for a core; getrusage for this thread alone counts in scheduler ticks here.
  const before = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) sink = stage();
  const used = process.cpuUsage(before);
  const ns = ((used.user + used.system) * 1000) / CALLS;
  if (sink === Symbol.for('never')) console.log(sink);
  return ns;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

const builds = await Promise.all(roots.map(async (root) => ({ name: basename(root), stages: await stagesOf(root) })));
const names = Object.keys(builds[0]!.stages);
/** Per build, per stage: the figure of each round. */
const figures = builds.map(() => new Map(names.map((n) => [n, [] as number[]])));
for (let round = 0; round < ROUNDS + 1; round++) {
  // Builds in turn, their order reversed every other round; round 0 warms the JIT up and is not kept.
  const order = builds.map((_, i) => i);
  if (round % 2) order.reverse();
  for (const i of order) {
    for (const name of names) {
      const ns = time(builds[i]!.stages[name]!);
      if (round > 0) figures[i]!.get(name)!.push(ns);
    }
  }
}

console.log(
  `The protocol's part of one metered call, in process (Node ${process.version}): ns of CPU per call, the median of ${ROUNDS} rounds of ${CALLS.toLocaleString('en')} calls\n`,
);
const header = ['stage', ...builds.map((b) => b.name), ...(builds.length > 1 ? [`${builds[0]!.name} - ${builds[1]!.name}`] : [])];
console.log(`| ${header.join(' | ')} |`);
console.log(
  `|---|${header
    .slice(1)
    .map(() => '---:')
    .join('|')}|`,
);
const totals = builds.map(() => ({ json: 0, stream: 0 }));
for (const name of names) {
  const meds = figures.map((f) => median(f.get(name)!));
  meds.forEach((m, i) => {
    if (name === RECORD_ROWS) return;
    if (!name.endsWith(', stream')) totals[i]!.json += m;
    if (!name.endsWith(', JSON')) totals[i]!.stream += m;
  });
  const cells = [name, ...meds.map((m) => m.toFixed(0)), ...(meds.length > 1 ? [(meds[0]! - meds[1]!).toFixed(0)] : [])];
  console.log(`| ${cells.join(' | ')} |`);
}
for (const mode of ['json', 'stream'] as const) {
  const t = totals.map((x) => x[mode]);
  const cells = [
    `**a ${mode === 'json' ? 'JSON' : 'streamed'} call**`,
    ...t.map((x) => x.toFixed(0)),
    ...(t.length > 1 ? [(t[0]! - t[1]!).toFixed(0)] : []),
  ];
  console.log(`| ${cells.join(' | ')} |`);
}

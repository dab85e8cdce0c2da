/**
 * What the fake upstreams share (test/support/fake-upstreams.ts says what they do): the server,
 * its per-server and per-request behaviour (faults, delays, usage), JSON and SSE answers, and
 * the models they list. A protocol's module (openai.ts, anthropic.ts) adds its routes and its
 * answers' shapes.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import { closeServer, listenLocal } from '../local-server.js';

interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface FakeUpstream {
  url: string;
  requests: SeenRequest[];
  /** The keys it accepts. */
  keys: Set<string>;
  /** When set, every answer waits this long (timeout tests). */
  delayMs: number;
  /** When set, every request gets this status (unexpected answers). */
  forceStatus: number | undefined;
  /** When set, every request gets a 200 with this content type and body (not a provider). */
  forceBody: { contentType: string; body: string } | undefined;
  /** Requests currently being answered (streams included). */
  open(): number;
  close(): Promise<void>;
}

/** The key it accepts (`apiKey`), or several (`apiKeys`, none: it refuses every key). */
export interface UpstreamKeys {
  apiKey?: string;
  apiKeys?: string[];
}

export const keysOf = (options: UpstreamKeys) => new Set(options.apiKeys ?? (options.apiKey !== undefined ? [options.apiKey] : []));

interface UsageSpec {
  input: number;
  output: number;
  cached: number;
}

const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa'];

/** The answer's words: one a token of its output (at most 10, unless the upstream runs away). */
export function wordsOf(req: IncomingMessage, output: number): string[] {
  if (req.headers['x-fake-fault'] === 'runaway') return Array.from({ length: output }, (_, i) => WORDS[i % WORDS.length]!);
  return WORDS.slice(0, Math.min(output, WORDS.length));
}

export function usageOf(req: IncomingMessage): UsageSpec {
  const raw = String(req.headers['x-fake-usage'] ?? '10,5,0')
    .split(',')
    .map(Number);
  return { input: raw[0] ?? 10, output: raw[1] ?? 5, cached: raw[2] ?? 0 };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let counter = 0;

/** The number of the last answer given (ids made from it differ between answers). */
export const answerNumber = () => counter;

function commonHeaders(): Record<string, string> {
  counter++;
  return {
    'x-request-id': `req_fake_${counter}`,
    'x-ratelimit-remaining-requests': '999',
    'openai-processing-ms': '1',
    // Never to be passed to the client:
    'set-cookie': 'upstream_session=secret; Path=/',
    'x-upstream-internal': 'do-not-leak',
  };
}

export function json(res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...commonHeaders(), ...extra, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A body compressed although the gateway asked for identity (some servers do). */
export function gzipped(res: ServerResponse, contentType: string, text: string): void {
  const body = gzipSync(text);
  res.writeHead(200, { ...commonHeaders(), 'content-type': contentType, 'content-encoding': 'gzip', 'content-length': body.length });
  res.end(body);
}

/** x-fake-stall-after: a stream stops after that many events and never ends (its socket closes with the server). */
export function stallAfterOf(req: IncomingMessage): number | undefined {
  const after = req.headers['x-fake-stall-after'];
  return after === undefined ? undefined : Number(after);
}

/** Writes SSE events honouring the fault modes; returns when done, stalled (x-fake-stall-after) or the socket died. */
export async function stream(req: IncomingMessage, res: ServerResponse, events: string[]): Promise<void> {
  const fault = req.headers['x-fake-fault'];
  if (fault === 'gzip') return gzipped(res, 'text/event-stream', events.join(''));
  const delay = fault === 'slow' || fault === 'runaway' ? Number(req.headers['x-fake-delay-ms'] ?? (fault === 'slow' ? 50 : 0)) : 0;
  const stallAfter = stallAfterOf(req);
  res.writeHead(200, { ...commonHeaders(), 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (let i = 0; i < events.length; i++) {
    if (res.destroyed || i === stallAfter) return;
    if (fault === 'reset' && i === 2) {
      res.socket?.destroy();
      return;
    }
    if (fault === 'reset') {
      // Flushed to the socket before it is destroyed, so the client really sees a stream that breaks.
      await new Promise<void>((resolve) => res.write(events[i], () => resolve()));
      await sleep(20);
    } else {
      res.write(events[i]);
    }
    if (delay) await sleep(delay);
  }
  res.end();
}

export async function serve(
  keys: Set<string>,
  handler: (req: IncomingMessage, res: ServerResponse, body: string, keys: Set<string>) => Promise<void> | void,
): Promise<FakeUpstream> {
  let inflight = 0;
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- nothing here rejects: readBody and the delay never do, and a handler's throw answers 500 below
  const server: Server = createServer(async (req, res) => {
    inflight++;
    res.on('close', () => inflight--);
    const body = await readBody(req);
    upstream.requests.push({ method: req.method!, url: req.url!, headers: req.headers, body });
    if (upstream.delayMs > 0) {
      await new Promise((resolve) => setTimeout(resolve, upstream.delayMs).unref());
      if (res.destroyed) return;
    }
    if (upstream.forceStatus) return json(res, upstream.forceStatus, { error: { message: 'forced' } });
    if (upstream.forceBody) {
      res.writeHead(200, { 'content-type': upstream.forceBody.contentType });
      return res.end(upstream.forceBody.body);
    }
    const fault = req.headers['x-fake-fault'];
    if (fault === 'hang') return; // never answers; the socket closes with the server
    if (fault === 'stall') {
      // Starts the answer and never finishes it: a stream's first event, or a JSON body's first bytes.
      const streamed = body.includes('"stream":true');
      res.writeHead(200, { 'content-type': streamed ? 'text/event-stream' : 'application/json' });
      res.write(streamed ? 'data: {"choices":[{"delta":{"content":"a"}}],"usage":null}\n\n' : '{"id":"chatcmpl-1","choices":[');
      return;
    }
    if (fault === 'status-429' || fault === 'status-500') {
      const status = fault === 'status-429' ? 429 : 500;
      return json(res, status, { error: { message: 'upstream says no', type: 'rate_limit_error' } }, { 'retry-after': '7' });
    }
    if (fault === 'redirect') {
      res.writeHead(302, { location: '/moved' + req.url, 'content-length': '0' });
      return res.end();
    }
    try {
      await handler(req, res, body, upstream.keys);
    } catch (err) {
      if (!res.headersSent) json(res, 500, { error: { message: String(err) } });
    }
  });
  server.keepAliveTimeout = 60_000;
  const upstream: FakeUpstream = {
    url: await listenLocal(server),
    requests: [],
    keys,
    delayMs: 0,
    forceStatus: undefined,
    forceBody: undefined,
    open: () => inflight,
    close: () => closeServer(server),
  };
  return upstream;
}

/** The models both servers list (the first is the one the tests of plain passthrough look for). */
export const FAKE_MODEL_IDS = ['fake-model', 'gpt-4o', 'gpt-4o-mini', 'claude-3-5-haiku-20241022', 'claude-sonnet-4-5'];
/** GET .../models/{id}: the model named, decoded, when the list has it. */
export const modelIn = (path: string) => {
  const id = decodeURIComponent(path.slice('/v1/models/'.length));
  return FAKE_MODEL_IDS.includes(id) ? id : undefined;
};

/**
 * How long a JSON answer waits: `late`, x-fake-delay-ms (default 200) ms; `runaway`, x-fake-delay-ms
 * (default 0) ms, as its stream waits between events.
 */
export function jsonDelayOf(req: IncomingMessage): number {
  const fault = req.headers['x-fake-fault'];
  if (fault !== 'late' && fault !== 'runaway') return 0;
  return Number(req.headers['x-fake-delay-ms'] ?? (fault === 'late' ? 200 : 0));
}

/**
 * A server that answers every request at once with `json`, or with `sse` when the body asks for a stream
 * ("stream":true): nothing parsed, no key checked, nothing recorded, no fault, so it costs the least an
 * HTTP answer can. The benchmark's upstream (scripts/bench.ts), the floor the gateway is measured against.
 */
export async function serveFixed(json: string, sse: string): Promise<FakeUpstream> {
  let inflight = 0;
  const server: Server = createServer((req, res) => {
    inflight++;
    res.on('close', () => inflight--);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (Buffer.concat(chunks).includes('"stream":true')) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': 'req_fixed' });
        res.end(sse);
      } else {
        res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req_fixed', 'content-length': Buffer.byteLength(json) });
        res.end(json);
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  return {
    url: await listenLocal(server),
    requests: [],
    keys: new Set(),
    delayMs: 0,
    forceStatus: undefined,
    forceBody: undefined,
    open: () => inflight,
    close: () => closeServer(server),
  };
}

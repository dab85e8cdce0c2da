/**
 * Real upstream providers on 127.0.0.1 for the tests and the benchmark: an
 * OpenAI-style server (chat completions, completions, embeddings, responses,
 * models) and an Anthropic-style one (messages, count_tokens, models), each answering JSON or
 * SSE with deterministic usage, checking the credential it receives the way the
 * real one does (openai `Authorization: Bearer`, anthropic `x-api-key` with
 * `anthropic-version`) against a set of keys that tests may change while it runs
 * (rotation), and recording every request it saw.
 *
 * Per-server behaviour, set on the upstream: `delayMs` (every answer waits that
 * long), `forceStatus` (every request gets that status), `forceBody` (every request
 * gets a 200 with that content type and body: not a provider).
 *
 * Per-request behaviour, chosen by request headers (the gateway forwards them):
 *   x-fake-fault: reset     the connection is destroyed after two stream events (or before a JSON body)
 *                 malformed the stream carries broken JSON events and no readable usage
 *                 hang      headers are never sent (the gateway's timeout fires first)
 *                 slow      one stream event every x-fake-delay-ms (default 50) ms
 *                 status-429 / status-500  that status with an error body and rate-limit headers
 *                 redirect  302 to another path of the same server
 *                 gzip      chat completions answer gzip-compressed (JSON or SSE), whatever was asked
 *                 late      a JSON chat completion (or Anthropic message) answers after x-fake-delay-ms (default 200) ms
 *                 runaway   the output is as many words as x-fake-usage's output says (not at most 10),
 *                           whatever max_tokens asked for; streamed one word an event, every
 *                           x-fake-delay-ms (default 0) ms
 *   x-fake-usage: "input,output,cached"   the usage to report (default 10,5,0)
 *   x-fake-response-id: a responses API answer's id (JSON-decoded, so it may hold any character)
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { closeServer, listenLocal } from './local-server.js';

export { SECRET_MARKER };

/** A provider key marked for the run-wide secret scan. */
export function testProviderKey(label = 'key'): string {
  return `${SECRET_MARKER}-${label}-${randomBytes(12).toString('base64url')}`;
}

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

const keysOf = (options: UpstreamKeys) => new Set(options.apiKeys ?? (options.apiKey !== undefined ? [options.apiKey] : []));

interface UsageSpec {
  input: number;
  output: number;
  cached: number;
}

const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa'];

/** The answer's words: one a token of its output (at most 10, unless the upstream runs away). */
function wordsOf(req: IncomingMessage, output: number): string[] {
  if (req.headers['x-fake-fault'] === 'runaway') return Array.from({ length: output }, (_, i) => WORDS[i % WORDS.length]!);
  return WORDS.slice(0, Math.min(output, WORDS.length));
}

function usageOf(req: IncomingMessage): UsageSpec {
  const raw = String(req.headers['x-fake-usage'] ?? '10,5,0').split(',').map(Number);
  return { input: raw[0] ?? 10, output: raw[1] ?? 5, cached: raw[2] ?? 0 };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let counter = 0;

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

function json(res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...commonHeaders(), ...extra, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A body compressed although the gateway asked for identity (some servers do). */
function gzipped(res: ServerResponse, contentType: string, text: string): void {
  const body = gzipSync(text);
  res.writeHead(200, { ...commonHeaders(), 'content-type': contentType, 'content-encoding': 'gzip', 'content-length': body.length });
  res.end(body);
}

/** Writes SSE events honouring the fault modes; returns when done (or the socket died). */
async function stream(req: IncomingMessage, res: ServerResponse, events: string[]): Promise<void> {
  const fault = req.headers['x-fake-fault'];
  if (fault === 'gzip') return gzipped(res, 'text/event-stream', events.join(''));
  const delay = fault === 'slow' || fault === 'runaway' ? Number(req.headers['x-fake-delay-ms'] ?? (fault === 'slow' ? 50 : 0)) : 0;
  res.writeHead(200, { ...commonHeaders(), 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (let i = 0; i < events.length; i++) {
    if (res.destroyed) return;
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

async function serve(
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
const MODELS = { object: 'list', data: FAKE_MODEL_IDS.map((id) => ({ id, object: 'model', created: 0, owned_by: 'fake' })) };
const ANTHROPIC_MODELS = {
  data: FAKE_MODEL_IDS.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })),
  first_id: FAKE_MODEL_IDS[0],
  last_id: FAKE_MODEL_IDS.at(-1),
  has_more: false,
};
/** GET .../models/{id}: the model named, decoded, when the list has it. */
const modelIn = (path: string) => {
  const id = decodeURIComponent(path.slice('/v1/models/'.length));
  return FAKE_MODEL_IDS.includes(id) ? id : undefined;
};

/** OpenAI-style: `Authorization: Bearer <key>`. */
export function startOpenAiUpstream(options: UpstreamKeys): Promise<FakeUpstream> {
  return serve(keysOf(options), async (req, res, raw, keys) => {
    const presented = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (presented === undefined || !keys.has(presented)) {
      // Like the real providers: no echo of the key presented.
      return json(res, 401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } });
    }
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/v1/models') return json(res, 200, MODELS);
    if (req.method === 'GET' && path?.startsWith('/v1/models/')) {
      const id = modelIn(path);
      if (id) return json(res, 200, { id, object: 'model', created: 0, owned_by: 'fake' });
      return json(res, 404, { error: { message: 'The model does not exist', type: 'invalid_request_error', code: 'model_not_found' } });
    }
    if (req.method === 'DELETE' && path?.startsWith('/v1/files/')) {
      return json(res, 200, { id: path.slice('/v1/files/'.length), object: 'file', deleted: true });
    }
    if (req.method !== 'POST') return json(res, 404, { error: { message: `no route ${req.method} ${path}` } });
    const body = raw ? (JSON.parse(raw) as Record<string, any>) : {};
    const u = usageOf(req);
    const model = `${body.model ?? 'fake-model'}-2026-01-01`;
    const words = wordsOf(req, u.output);
    const fault = req.headers['x-fake-fault'];
    if (fault === 'reset' && !body.stream) {
      res.socket?.destroy();
      return;
    }
    const chatUsage = {
      prompt_tokens: u.input,
      completion_tokens: u.output,
      total_tokens: u.input + u.output,
      prompt_tokens_details: { cached_tokens: u.cached },
    };
    if (path === '/v1/embeddings') {
      return json(res, 200, {
        object: 'list',
        data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2, 0.3] }],
        model,
        usage: { prompt_tokens: u.input, total_tokens: u.input },
      });
    }
    if (path === '/v1/chat/completions' || path === '/v1/completions') {
      const chat = path === '/v1/chat/completions';
      const id = `cmpl-${counter}`;
      if (!body.stream) {
        if (fault === 'late') await sleep(Number(req.headers['x-fake-delay-ms'] ?? 200));
        const completion = {
          id,
          object: chat ? 'chat.completion' : 'text_completion',
          created: 1_700_000_000,
          model,
          choices: [
            chat
              ? { index: 0, message: { role: 'assistant', content: words.join(' ') }, finish_reason: 'stop' }
              : { index: 0, text: words.join(' '), finish_reason: 'stop' },
          ],
          usage: chatUsage,
        };
        return fault === 'gzip' ? gzipped(res, 'application/json', JSON.stringify(completion)) : json(res, 200, completion);
      }
      const includeUsage = body.stream_options?.include_usage === true;
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        `data: ${JSON.stringify({
          id,
          object: chat ? 'chat.completion.chunk' : 'text_completion',
          created: 1_700_000_000,
          model,
          choices,
          ...(includeUsage ? { usage: null } : {}),
          ...extra,
        })}\n\n`;
      const events = [
        chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]),
        ...words.map((w, i) => chunk([{ index: 0, delta: { content: (i ? ' ' : '') + w }, finish_reason: null }])),
        chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]),
      ];
      if (fault === 'malformed') {
        events.push('data: {"id":"broken", "choices": [\n\n', 'data: {"usage": {"prompt_tokens": 1\n\n');
      } else if (includeUsage) {
        events.push(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [], usage: chatUsage })}\n\n`);
      }
      events.push('data: [DONE]\n\n');
      return stream(req, res, events);
    }
    if (path === '/v1/responses') {
      const usage = {
        input_tokens: u.input,
        input_tokens_details: { cached_tokens: u.cached },
        output_tokens: u.output,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: u.input + u.output,
      };
      const response = {
        id: req.headers['x-fake-response-id'] ? (JSON.parse(String(req.headers['x-fake-response-id'])) as string) : `resp_${counter}`,
        object: 'response',
        created_at: 1_700_000_000,
        status: 'completed',
        model,
        output: [{ type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: words.join(' '), annotations: [] }] }],
        usage,
      };
      if (!body.stream) return json(res, 200, response);
      let sequence = 0;
      const ev = (type: string, data: Record<string, unknown>) =>
        `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`;
      return stream(req, res, [
        ev('response.created', { response: { ...response, status: 'in_progress', output: [], usage: null } }),
        ev('response.output_item.added', { output_index: 0, item: { type: 'message', id: 'msg_1', status: 'in_progress', role: 'assistant', content: [] } }),
        ev('response.content_part.added', { item_id: 'msg_1', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }),
        ...words.map((w, i) => ev('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: (i ? ' ' : '') + w })),
        ev('response.completed', { response }),
      ]);
    }
    return json(res, 404, { error: { message: `no route POST ${path}` } });
  });
}

/** Anthropic-style: `x-api-key: <key>` and an `anthropic-version` header. */
export function startAnthropicUpstream(options: UpstreamKeys): Promise<FakeUpstream> {
  return serve(keysOf(options), async (req, res, raw, keys) => {
    const presented = req.headers['x-api-key'];
    if (typeof presented !== 'string' || !keys.has(presented) || req.headers.authorization) {
      return json(res, 401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
    }
    if (!req.headers['anthropic-version']) {
      return json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'anthropic-version header is required' } });
    }
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/v1/models') return json(res, 200, ANTHROPIC_MODELS);
    if (req.method === 'GET' && path?.startsWith('/v1/models/')) {
      const id = modelIn(path);
      if (id) return json(res, 200, { type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' });
      return json(res, 404, { type: 'error', error: { type: 'not_found_error', message: 'model not found' } });
    }
    if (req.method === 'POST' && path === '/v1/messages/count_tokens') {
      // Deterministic: the body's length in bytes, a tenth of it.
      return json(res, 200, { input_tokens: Math.ceil(Buffer.byteLength(raw) / 10) });
    }
    if (req.method !== 'POST' || path !== '/v1/messages') {
      return json(res, 404, { type: 'error', error: { type: 'not_found_error', message: `no route ${req.method} ${path}` } });
    }
    const body = JSON.parse(raw) as Record<string, any>;
    const u = usageOf(req);
    const model = body.model ?? 'claude-fake';
    const words = wordsOf(req, u.output);
    const id = `msg_${counter}`;
    // Anthropic's input_tokens excludes cache reads.
    const usage = { input_tokens: u.input - u.cached, cache_creation_input_tokens: 0, cache_read_input_tokens: u.cached, output_tokens: u.output };
    if (req.headers['x-fake-fault'] === 'reset' && !body.stream) {
      res.socket?.destroy();
      return;
    }
    if (!body.stream) {
      if (req.headers['x-fake-fault'] === 'late') await sleep(Number(req.headers['x-fake-delay-ms'] ?? 200));
      return json(res, 200, {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [{ type: 'text', text: words.join(' ') }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage,
      });
    }
    const ev = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const events = [
      ev('message_start', {
        message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } },
      }),
      ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      ev('ping', {}),
      ...words.map((w, i) => ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: (i ? ' ' : '') + w } })),
      ev('content_block_stop', { index: 0 }),
    ];
    if (req.headers['x-fake-fault'] === 'malformed') events.push('event: message_delta\ndata: {"type":"message_delta", "usage": {\n\n');
    else events.push(ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: u.output } }));
    events.push(ev('message_stop', {}));
    return stream(req, res, events);
  });
}

/** An upstream of either profile accepting these keys (the provider connection tests). */
export function startFakeUpstream(profile: 'openai' | 'anthropic', keys: string[]): Promise<FakeUpstream> {
  return profile === 'openai' ? startOpenAiUpstream({ apiKeys: keys }) : startAnthropicUpstream({ apiKeys: keys });
}

export { refusedUrl } from './local-server.js';

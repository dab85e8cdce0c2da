/**
 * What a fresh process does before /readyz says ready, so that its first calls do not pay for it (docs/performance.md,
 * "A fresh process"): the gateway pool's connections opened (each a PostgreSQL backend started and authenticated,
 * which the first burst of calls otherwise waited for), and the protocol's part of a call run on a canned chat
 * completion (its request read with the input estimate, its upstream headers, its JSON and streamed answers read),
 * so that V8 has compiled them before a client's call runs them; and the call's HTTP on both sides, node's server
 * and undici's client, run over the loopback against a throwaway server of this process (warmHttp).
 *
 * Nothing here touches the database's rows or a quota, and a failure is not the start's: a connection that cannot
 * be opened now is opened by the first call that needs it, as without the warm-up.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { Pool, type Dispatcher } from 'undici';
import type { Db } from '../db/database.js';
import { isEmbedded } from '../db/database.js';
import { protocolOf } from '../protocols/index.js';
import { prepareCall, usageFromJson } from '../protocols/inspectors.js';
import { upstreamHeaders } from './headers.js';
import { SseMeter } from './sse-meter.js';

/** Rounds of the canned call's protocol part: enough for V8 to compile its functions (they run while the connections open). */
const PROTOCOL_ROUNDS = 500;
/** Calls over the loopback (half JSON, half streamed), HTTP_CONCURRENCY at a time. */
const HTTP_ROUNDS = 400;
const HTTP_CONCURRENCY = 8;
/** A loopback call that has not answered by then ends the warm-up's wait for it (it never should). */
const HTTP_TIMEOUT_MS = 10_000;

/** Opens up to `count` of `db`'s pooled connections at once, then gives them back to the pool idle (PostgreSQL only). */
export async function openConnections(db: Db, count: number): Promise<number> {
  if (isEmbedded(db) || count <= 0) return 0;
  const client = db.client as { acquireConnection(): Promise<pg.Client>; releaseConnection(c: pg.Client): Promise<void> };
  const acquired = await Promise.allSettled(Array.from({ length: count }, () => client.acquireConnection()));
  const opened = acquired.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []));
  await Promise.all(opened.map((connection) => client.releaseConnection(connection)));
  return opened.length;
}

const CHAT = '/v1/chat/completions';
const REQUEST_HEADERS = ['host', 'nexus', 'content-type', 'application/json', 'authorization', 'Bearer nx-warm-up'];
const CAPS = { maxOutputTokens: 4096, clamp: true };

function chatRequest(stream: boolean): Buffer {
  return Buffer.from(
    JSON.stringify({
      model: 'warm-up',
      messages: [
        { role: 'system', content: 'You answer briefly.' },
        { role: 'user', content: 'What does a gateway count before it calls the model, and why?' },
      ],
      max_tokens: 64,
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
  );
}

const ANSWER = JSON.stringify({
  id: 'chatcmpl-warm-up',
  object: 'chat.completion',
  model: 'warm-up',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Its input.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 24, completion_tokens: 3, total_tokens: 27 },
});

const EVENTS = Buffer.from(
  [
    { choices: [{ index: 0, delta: { role: 'assistant', content: 'Its' } }] },
    { choices: [{ index: 0, delta: { content: ' input.' }, finish_reason: 'stop' }] },
    { choices: [], usage: { prompt_tokens: 24, completion_tokens: 3, total_tokens: 27 } },
  ]
    .map((event) => `data: ${JSON.stringify({ id: 'chatcmpl-warm-up', object: 'chat.completion.chunk', model: 'warm-up', ...event })}\n\n`)
    .join('') + 'data: [DONE]\n\n',
);

/** The protocol's part of an OpenAI chat completion, JSON and streamed, PROTOCOL_ROUNDS times. */
export function warmProtocol(): void {
  const protocol = protocolOf('openai');
  const inspector = protocol.inspectorFor('POST', CHAT);
  if (!inspector) return;
  const json = chatRequest(false);
  const stream = chatRequest(true);
  for (let i = 0; i < PROTOCOL_ROUNDS; i++) {
    prepareCall(inspector, json, CAPS);
    const bounds = prepareCall(inspector, stream, CAPS);
    upstreamHeaders(REQUEST_HEADERS, protocol, 'sk-warm-up', json.length);
    usageFromJson(inspector, ANSWER);
    new SseMeter(inspector, bounds).push(EVENTS);
  }
}

/** The throwaway server's answer: the canned JSON, or the canned stream when the request asks for one. */
function answerWarmUp(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    if (Buffer.concat(chunks).includes('"stream":true')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.end(EVENTS);
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(ANSWER);
    }
  });
}

/** One call dispatched as the relay dispatches (undici's handler API), resolving once its answer is read. */
function dispatchOne(pool: Pool, body: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: () => {},
      onResponseStart: () => {},
      onResponseData: () => {},
      onResponseEnd: () => resolve(),
      onResponseError: () => resolve(),
    };
    pool.dispatch(
      {
        method: 'POST',
        path: CHAT,
        headers: ['content-type', 'application/json', 'authorization', 'Bearer sk-warm-up'],
        body,
        headersTimeout: HTTP_TIMEOUT_MS,
        bodyTimeout: HTTP_TIMEOUT_MS,
      },
      handler,
    );
  });
}

/**
 * The HTTP of a call, HTTP_ROUNDS times: a request read by node's HTTP server and answered (the client side of a
 * call), sent and its answer read by undici's client with the relay's dispatch (the upstream side), over the
 * loopback to a server of this process that is closed after. No socket outside the process is opened.
 */
export async function warmHttp(): Promise<void> {
  const server = createServer(answerWarmUp);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
  } catch {
    return; // No loopback to listen on: the first calls compile this code, as without the warm-up.
  }
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: HTTP_CONCURRENCY });
  const bodies = [chatRequest(false), chatRequest(true)];
  try {
    await Promise.all(
      Array.from({ length: HTTP_CONCURRENCY }, async (_, lane) => {
        for (let i = lane; i < HTTP_ROUNDS; i += HTTP_CONCURRENCY) await dispatchOne(pool, bodies[i % 2]!);
      }),
    );
  } finally {
    await pool.destroy().catch(() => {});
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

/**
 * Before a fresh process says ready (docs/performance.md, "A fresh process"): the HTTP of a call on both sides, node's
 * server reading a request and answering it and undici's client sending one and reading its answer, run over the
 * loopback against a throwaway server of this process, so that V8 has compiled them before a client's call runs them
 * (the gateway's own part is src/gateway/warm-up.ts). Best-effort: a failure here is not the start's.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool, type Dispatcher } from 'undici';
import { CANNED_CALL } from './gateway/warm-up.js';

/** Calls over the loopback (half JSON, half streamed), HTTP_CONCURRENCY at a time. */
const HTTP_ROUNDS = 400;
const HTTP_CONCURRENCY = 8;
/** A loopback call that has not answered by then ends the warm-up's wait for it (it never should). */
const HTTP_TIMEOUT_MS = 10_000;

/** The throwaway server's answer: the canned JSON, or the canned stream when the request asks for one. */
function answerWarmUp(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    if (Buffer.concat(chunks).includes('"stream":true')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.end(CANNED_CALL.events);
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(CANNED_CALL.answer);
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
        path: CANNED_CALL.path,
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
  const bodies = [CANNED_CALL.request(false), CANNED_CALL.request(true)];
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

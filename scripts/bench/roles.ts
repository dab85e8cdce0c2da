/**
 * The processes `npm run bench` starts from its own file (`--role=`): the upstream, the webhook receiver and the floor.
 * Each prints its port as one JSON line on stdout when it listens.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { startFixedOpenAiUpstream } from '../../test/support/upstreams/openai.js';
import { PROVIDER_KEY } from './config.js';

function announce(port: number): void {
  process.stdout.write(JSON.stringify({ port }) + '\n');
}

/** An upstream that answers at once (a chat completion, JSON or SSE, with usage). */
export async function runUpstream(): Promise<void> {
  const upstream = await startFixedOpenAiUpstream();
  announce(Number(new URL(upstream.url).port));
}

/** A webhook endpoint that answers 204 (BENCH_EVENTS); GET tells how many it received. */
export function runReceiver(): void {
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

/** The floor: a bare undici passthrough (keep-alive pool, piped body). */
export function runFloor(upstreamUrl: string): void {
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

/**
 * The client's retrying fetch (scripts/client-package/runtime.ts, as npm run generate copies it into
 * generated/client/), against a real HTTP server on 127.0.0.1 that answers each request as the test
 * scripts it: which answers are retried and which are not, how long it waits (Retry-After, backoff), what
 * a timeout and a dropped connection become, and that an abort by the caller is not retried.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NexusConnectionError, NexusTimeoutError } from '../../generated/client/errors.js';
import { retryDelayMs, retryingFetch } from '../../generated/client/runtime.js';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let server: Server;
let url: string;
let script: Handler[] = [];
/** Each request seen: its method, its Idempotency-Key and when it came (ms since the test's start). */
let seen: { method: string; key: string | undefined; at: number }[] = [];
let started = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    seen.push({ method: req.method!, key: req.headers['idempotency-key'] as string | undefined, at: Date.now() - started });
    const handler = script.shift() ?? ((_req: IncomingMessage, r: ServerResponse) => r.writeHead(200).end('ok'));
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/x`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  script = [];
  seen = [];
  started = Date.now();
});

const status =
  (code: number, headers: Record<string, string> = {}): Handler =>
  (_req, res) =>
    res.writeHead(code, headers).end('{}');
const drop: Handler = (req) => req.socket.destroy();
const client = (maxRetries = 2, timeout = 5_000) => retryingFetch({ maxRetries, timeout, fetch: globalThis.fetch });

describe('retries', () => {
  it('retries a GET on 408, 429 and 5xx, then answers what came last', async () => {
    script = [status(408, { 'retry-after': '0' }), status(429, { 'retry-after': '0' })];
    expect((await client()(url)).status).toBe(200);
    expect(seen).toHaveLength(3);

    script = [status(500, { 'retry-after': '0' }), status(502, { 'retry-after': '0' }), status(503, { 'retry-after': '0' })];
    expect((await client()(url)).status).toBe(503);
    expect(seen).toHaveLength(3 + 3);
  });

  it('retries a POST or a PATCH only when it carries an Idempotency-Key, and sends the same key each time', async () => {
    script = [status(503, { 'retry-after': '0' })];
    expect((await client()(url, { method: 'POST', body: '{}' })).status).toBe(503);
    expect(seen.map((s) => s.method)).toEqual(['POST']);

    script = [status(503, { 'retry-after': '0' })];
    expect((await client()(url, { method: 'PATCH', body: '{}' })).status).toBe(503);
    expect(seen.map((s) => s.method)).toEqual(['POST', 'PATCH']);

    script = [status(503, { 'retry-after': '0' }), status(500, { 'retry-after': '0' })];
    const answer = await client()(url, { method: 'POST', body: '{"a":1}', headers: { 'Idempotency-Key': 'k-1' } });
    expect(answer.status).toBe(200);
    expect(seen.slice(2).map((s) => s.key)).toEqual(['k-1', 'k-1', 'k-1']);
  });

  it('retries a PUT and a DELETE as a GET, without a key (HTTP makes them idempotent), with the same body', async () => {
    const bodies: string[] = [];
    const reading: Handler = (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        bodies.push(body);
        res.writeHead(503, { 'retry-after': '0' }).end('{}');
      });
    };
    script = [reading, reading];
    const put = await client()(url, { method: 'PUT', body: '{"period":"DAY"}' });
    expect(put.status).toBe(200);
    expect(seen.map((s) => s.method)).toEqual(['PUT', 'PUT', 'PUT']);
    expect(bodies).toEqual(['{"period":"DAY"}', '{"period":"DAY"}']);

    script = [status(500, { 'retry-after': '0' }), status(502, { 'retry-after': '0' }), status(503, { 'retry-after': '0' })];
    expect((await client()(url, { method: 'DELETE' })).status).toBe(503);
    expect(seen.slice(3).map((s) => s.method)).toEqual(['DELETE', 'DELETE', 'DELETE']);
    expect(seen.every((s) => s.key === undefined)).toBe(true);
  });

  it('does not retry a 4xx other than 408 and 429, nor what says x-should-retry: false; retries what says x-should-retry: true', async () => {
    script = [status(409)];
    expect((await client()(url)).status).toBe(409);
    script = [status(500, { 'x-should-retry': 'false' })];
    expect((await client()(url)).status).toBe(500);
    expect(seen).toHaveLength(2);
    script = [status(409, { 'x-should-retry': 'true', 'retry-after': '0' })];
    expect((await client()(url)).status).toBe(200);
    expect(seen).toHaveLength(4);
  });

  it('waits what Retry-After says, else backs off from 0.5 s with jitter', async () => {
    script = [status(429, { 'retry-after': '1' })];
    await client()(url);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(950);

    started = Date.now();
    seen = [];
    script = [status(503)];
    await client()(url);
    const waited = seen[1]!.at - seen[0]!.at;
    expect(waited).toBeGreaterThanOrEqual(370);
    expect(waited).toBeLessThan(1_000);
  });

  it('computes the delay from Retry-After (seconds or a date), retry-after-ms, or the backoff', () => {
    const answer = (headers: Record<string, string>) => new Response(null, { status: 503, headers });
    expect(retryDelayMs(0, answer({ 'retry-after': '2' }))).toBe(2_000);
    expect(retryDelayMs(0, answer({ 'retry-after-ms': '250' }))).toBe(250);
    const inFive = retryDelayMs(0, answer({ 'retry-after': new Date(Date.now() + 5_000).toUTCString() }));
    expect(inFive).toBeGreaterThan(3_000);
    expect(inFive).toBeLessThanOrEqual(5_000);
    // Too long a wait is not waited for: the backoff instead.
    expect(retryDelayMs(0, answer({ 'retry-after': '3600' }))).toBeLessThanOrEqual(500);
    for (let retry = 0; retry < 6; retry++) {
      const delay = retryDelayMs(retry);
      const backoff = Math.min(500 * 2 ** retry, 8_000);
      expect(delay).toBeGreaterThanOrEqual(backoff * 0.75);
      expect(delay).toBeLessThanOrEqual(backoff);
    }
  });
});

describe('no answer', () => {
  it('a dropped connection is a NexusConnectionError, after the retries of a GET', async () => {
    script = [drop, drop, drop];
    const err = await client()(url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NexusConnectionError);
    expect(err).not.toBeInstanceOf(NexusTimeoutError);
    expect((err as Error).message).toContain(`GET ${url}`);
    expect((err as Error).cause).toBeInstanceOf(TypeError);
    expect(seen).toHaveLength(3);
  }, 10_000);

  it('a slow answer is a NexusTimeoutError after `timeout` ms per attempt, and a GET is tried again', async () => {
    const slow: Handler = (_req, res) => setTimeout(() => res.writeHead(200).end('late'), 2_000).unref();
    script = [slow];
    const answer = await client(1, 500)(url);
    expect(answer.status).toBe(200);
    expect(seen).toHaveLength(2);

    script = [slow, slow];
    const err = await client(1, 500)(url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NexusTimeoutError);
    expect(err).toBeInstanceOf(NexusConnectionError);
    expect((err as Error).message).toContain('within 500 ms');
  }, 10_000);

  it('an abort by the caller is thrown as it is, and not retried', async () => {
    const slow: Handler = (_req, res) => setTimeout(() => res.writeHead(200).end('late'), 1_000).unref();
    script = [slow, slow];
    const err = await client(2, 5_000)(url, { signal: AbortSignal.timeout(100) }).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(NexusConnectionError);
    expect((err as Error).name).toBe('TimeoutError');
    expect(seen).toHaveLength(1);
  });
});

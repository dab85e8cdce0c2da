/**
 * Clients that send a body slowly, over raw sockets: a body that has not arrived within
 * NEXUS_BODY_TIMEOUT_MS is answered 408 and its connection closed, and a request refused before its
 * body was read (no key, an unknown key) is answered at once and its connection closed once the rest of
 * the body is read or the refusal's drain time is up (REFUSED_BODY_DRAIN), so a client trickling a body
 * cannot hold a socket.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUSED_BODY_DRAIN } from '../../src/web/error-response.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, type Tenant } from '../gateway/gateway-support.js';

const KEY = `${SECRET_MARKER}-slow-bodies-upstream-0123456789`;
// Longer than a refusal's drain, so that a refusal's close is told from the timeout's.
const BODY_TIMEOUT_MS = REFUSED_BODY_DRAIN.ms + 2000;

let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS) } });
  up = await startOpenAiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

interface Trickled {
  /** What the server sent before the connection closed. */
  answer: string;
  /** When its first bytes came, ms after the request began. */
  answeredAfterMs: number | undefined;
  /** When the server closed the connection, ms after the request began; undefined: still open at `giveUpMs`. */
  closedAfterMs: number | undefined;
}

/** Sends `head` with a Content-Length of `length`, then 5 bytes a second of body, until the server closes or `giveUpMs`. */
function trickle(path: string, headers: Record<string, string>, length: number, giveUpMs: number): Promise<Trickled> {
  const { port } = new URL(t.url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), '127.0.0.1');
    const started = performance.now();
    let answer = '';
    let answeredAfterMs: number | undefined;
    let timer: NodeJS.Timeout | undefined;
    const finish = (closedAfterMs: number | undefined) => {
      clearInterval(timer);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ answer, answeredAfterMs, closedAfterMs });
    };
    const giveUp = setTimeout(() => finish(undefined), giveUpMs);
    socket.on('data', (chunk: Buffer) => {
      answeredAfterMs ??= Math.round(performance.now() - started);
      answer += chunk.toString('latin1');
    });
    socket.on('error', () => {});
    // 'end': the server ended its side; 'close': it reset or closed the connection.
    socket.on('end', () => finish(Math.round(performance.now() - started)));
    socket.on('close', () => finish(Math.round(performance.now() - started)));
    socket.on('connect', () => {
      const lines = Object.entries({
        host: `127.0.0.1:${port}`,
        'content-type': 'application/json',
        'content-length': String(length),
        ...headers,
      });
      socket.write(`POST ${path} HTTP/1.1\r\n${lines.map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`);
      timer = setInterval(() => socket.write('{"aaa'.slice(0, 5)), 1000);
    });
  });
}

const chat = () => `/providers/${tenant.connectionId}/v1/chat/completions`;

describe('a body that trickles in', () => {
  it(`is cut after NEXUS_BODY_TIMEOUT_MS (${BODY_TIMEOUT_MS} ms here), with a valid key`, async () => {
    const { answer, closedAfterMs } = await trickle(chat(), { authorization: `Bearer ${tenant.apiKey}` }, 100_000, 15_000);
    expect(closedAfterMs, 'the connection stayed open').toBeDefined();
    // node checks its connections' times every 150 ms here: cut between the timeout and a few seconds after.
    expect(closedAfterMs!).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 100);
    expect(closedAfterMs!).toBeLessThan(BODY_TIMEOUT_MS + 5000);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toMatch(/\r\nConnection: close\r\n/i);
  });

  it('is cut on the Admin API too', async () => {
    const { answer, closedAfterMs } = await trickle(
      '/admin/v1/workspaces',
      { authorization: 'Bearer nx-mgmt-not-a-key-0123456789abcdef' },
      100_000,
      15_000,
    );
    expect(closedAfterMs, 'the connection stayed open').toBeDefined();
    expect(closedAfterMs!).toBeLessThan(BODY_TIMEOUT_MS + 5000);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  });
});

describe('a request refused before its body was read', () => {
  it.each([
    ['without a key', {}, 'missing_credentials'],
    ['with an unknown key', { authorization: 'Bearer nx-test-not-a-key-0123456789abcdefghij' }, 'invalid_inference_key'],
  ])('%s: answered at once, with Connection: close, and the connection ends when the drain is up', async (_name, headers, code) => {
    const { answer, answeredAfterMs, closedAfterMs } = await trickle(chat(), headers, 100_000, 15_000);
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(answer).toContain(`"code":"${code}"`);
    // The answer does not wait for the body.
    expect(answeredAfterMs!).toBeLessThan(REFUSED_BODY_DRAIN.ms);
    expect(closedAfterMs, 'the connection stayed open').toBeDefined();
    // The body was read on while the drain lasted, and no longer: the refusal, not the body's timeout, closed it.
    expect(closedAfterMs!).toBeGreaterThanOrEqual(REFUSED_BODY_DRAIN.ms - 100);
    expect(closedAfterMs!).toBeLessThan(BODY_TIMEOUT_MS);
  });

  it('a refusal of a request whose body was read keeps the connection open for the next request', async () => {
    const res = await fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      // A key never seen: its lookup goes to the database, and the body has been read by its answer.
      headers: { authorization: `Bearer nx-test-unknown-${Date.now()}-0123456789abcdef`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(401);
    await res.text();
    expect(res.headers.get('connection')).not.toBe('close');
  });
});

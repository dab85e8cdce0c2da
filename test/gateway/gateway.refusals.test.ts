/**
 * How the gateway's refusals reach a client, through HTTP and the official OpenAI SDK: a WebSocket handshake on
 * a path other than a Realtime session's (gateway.realtime.test.ts) is refused 501 `websocket_not_supported`
 * whatever the workspace allows, never forwarded;
 * and a refused upload is answered at once while the rest of its body is read and dropped, up to
 * REFUSED_BODY_DRAIN, so that a client still sending reads the answer instead of a reset connection.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUSED_BODY_DRAIN } from '../../src/web/error-response.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { validateGatewayResponse } from '../support/contract.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, invocationByRequestId, type Tenant } from './gateway-support.js';

const KEY = `${SECRET_MARKER}-refusals-upstream-0123456789`;
let t: TestApp;
let up: FakeUpstream;
/** Its workspace allows unmetered calls: a path without an inspector is forwarded. */
let open: Tenant;
/** Its workspace does not: such a path is 409 `unmetered_endpoint`. */
let closed: Tenant;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
  open = await createTenant(t, { baseUrl: up.url, providerKey: KEY, allowUnmeteredPassthrough: true });
  closed = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

interface Handshake {
  status: number;
  headers: Record<string, string>;
  body: { error: { code: string; message: string } };
  /** Whether the server switched protocols (101). */
  upgraded: boolean;
}

/** A WebSocket handshake (RFC 6455) to the gateway, as a Realtime client opens its session. */
function handshake(tenant: Tenant, path: string): Promise<Handshake> {
  const url = new URL(t.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: url.hostname,
      port: url.port,
      path: `/providers/${tenant.connectionId}/${path}`,
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'sec-websocket-version': '13',
        authorization: `Bearer ${tenant.apiKey}`,
        'openai-beta': 'realtime=v1',
      },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode!, headers: {}, body: { error: { code: '', message: '' } }, upgraded: true });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers[k] = v;
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Handshake['body'];
        validateGatewayResponse('GET', res.statusCode!, headers, body);
        resolve({ status: res.statusCode!, headers, body, upgraded: false });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe("a WebSocket handshake on a path other than a Realtime session's", () => {
  it.each([
    ['allows unmetered calls', () => open],
    ['does not allow unmetered calls', () => closed],
  ])('is 501 websocket_not_supported where the workspace %s, recorded REJECTED, the upstream not called', async (_name, tenantOf) => {
    const tenant = tenantOf();
    const before = up.requests.length;
    const answer = await handshake(tenant, 'v1/chat/completions?model=gpt-4o');
    expect(answer.upgraded).toBe(false);
    expect(answer.status).toBe(501);
    expect(answer.body.error).toMatchObject({ code: 'websocket_not_supported', type: 'invalid_request_error' });
    expect(answer.body.error.message).toMatch(/WebSocket/);
    // Retrying it changes nothing: the SDKs that read the header do not.
    expect(answer.headers['x-should-retry']).toBe('false');
    expect(up.requests.length).toBe(before);
    const inv = await invocationByRequestId(t, tenant.workspaceId, answer.headers['x-nexus-request-id']!);
    expect(inv).toMatchObject({ status: 'REJECTED', errorCode: 'websocket_not_supported', endpoint: 'v1/chat/completions' });
  });

  it('is refused on an unmetered path too', async () => {
    const before = up.requests.length;
    const answer = await handshake(open, 'v1/files');
    expect(answer.status).toBe(501);
    expect(answer.body.error.code).toBe('websocket_not_supported');
    expect(up.requests.length).toBe(before);
  });

  it('a plain GET of the same path is still forwarded where the workspace allows it', async () => {
    const before = up.requests.length;
    const res = await fetch(`${open.gatewayBaseUrl}/v1/realtime?model=gpt-realtime`, {
      headers: { authorization: `Bearer ${open.apiKey}` },
    });
    await res.arrayBuffer();
    expect(res.status).not.toBe(501);
    expect(up.requests.length).toBe(before + 1);
  });
});

/** A file uploaded through the SDK, refused (409 on `closed`: its class, files, is not let through): what it threw. */
async function uploadFile(client: OpenAI, bytes: number): Promise<unknown> {
  const file = await toFile(Buffer.alloc(bytes, 7), 'notes.jsonl', { type: 'application/jsonl' });
  return client.files.create({ file, purpose: 'assistants' }).then(
    () => undefined,
    (err: unknown) => err,
  );
}

describe('a refused upload', () => {
  it.each([
    [40_000, 100],
    [3_000_000, 20],
  ])(
    'of %i bytes reaches the OpenAI SDK as the 409, never a connection error (%i calls)',
    async (bytes, calls) => {
      // The SDK's own fetch: the contract's fetch wrapper (openAiFor) does not take a multipart body.
      const client = new OpenAI({ baseURL: closed.gatewayBaseUrl + '/v1', apiKey: closed.apiKey, maxRetries: 0 });
      const seen = new Map<string, number>();
      for (let i = 0; i < calls; i++) {
        const err = await uploadFile(client, bytes);
        const what =
          err instanceof OpenAI.APIError && !(err instanceof OpenAI.APIConnectionError)
            ? `${err.status} ${(err.error as { code?: string } | undefined)?.code}`
            : String(err);
        seen.set(what, (seen.get(what) ?? 0) + 1);
      }
      expect(Object.fromEntries(seen)).toEqual({ '409 unmetered_endpoint': calls });
    },
    120_000,
  );

  it('with the SDK retrying as it does by default: one request, one REJECTED record', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const client = new OpenAI({ baseURL: tenant.gatewayBaseUrl + '/v1', apiKey: tenant.apiKey });
    const err = await uploadFile(client, 40_000);
    expect(err).toBeInstanceOf(OpenAI.ConflictError);
    await t.nexus.gateway.drain();
    const invocations = await t.database.db('invocations').where({ workspace_access_id: tenant.accessId });
    expect(invocations.map((i: { status: string; error_code: string }) => [i.status, i.error_code])).toEqual([
      ['REJECTED', 'unmetered_endpoint'],
    ]);
  });
});

interface RawUpload {
  /** What the server sent. */
  answer: string;
  /** Bytes of the body the socket took before the server closed, or before all were sent. */
  sent: number;
  /** Whether every byte of the body was sent. */
  sentAll: boolean;
  /** The socket's error (a reset, a broken pipe), if it had one. */
  error: string | undefined;
}

/**
 * A raw upload of `length` bytes to a refused path: its headers and `first` bytes, then, once the answer has come
 * (`afterAnswer`) or at once, the rest in 64 KB writes, each after the last was taken, until all is sent or the
 * server closes. The path is an unmetered endpoint (evals), refused before its body is read (a Batch API upload,
 * v1/files, is read to its purpose first).
 */
function rawUpload(tenant: Tenant, length: number, first: number, afterAnswer: boolean): Promise<RawUpload> {
  const { port } = new URL(t.url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), '127.0.0.1');
    let answer = '';
    let sent = 0;
    let error: string | undefined;
    let ended = false;
    const done = () => {
      if (ended) return;
      ended = true;
      socket.destroy();
      resolve({ answer, sent, sentAll: sent === length, error });
    };
    const chunk = Buffer.alloc(64 * 1024, 7);
    const writeRest = () => {
      if (ended || socket.destroyed) return;
      if (sent >= length) return;
      const n = Math.min(chunk.length, length - sent);
      socket.write(chunk.subarray(0, n), (err) => {
        if (err) return;
        sent += n;
        setImmediate(writeRest);
      });
    };
    socket.on('data', (c: Buffer) => {
      const before = answer.length;
      answer += c.toString('latin1');
      if (afterAnswer && before === 0) writeRest();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error ??= err.code ?? err.message;
    });
    // The server ended or closed the connection.
    socket.on('end', () => setTimeout(done, 50));
    socket.on('close', done);
    socket.on('connect', () => {
      socket.write(
        `POST /providers/${tenant.connectionId}/v1/evals HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n` +
          `authorization: Bearer ${tenant.apiKey}\r\ncontent-type: multipart/form-data; boundary=x\r\n` +
          `content-length: ${length}\r\n\r\n`,
      );
      socket.write(Buffer.alloc(first, 7), () => {
        sent += first;
        if (!afterAnswer) writeRest();
      });
    });
  });
}

describe('the rest of a refused body', () => {
  it('is read after the answer: the connection closes once the body is in, without a reset', async () => {
    const length = 1024 * 1024;
    const upload = await rawUpload(closed, length, 16 * 1024, true);
    expect(upload.answer).toMatch(/^HTTP\/1\.1 409 /);
    expect(upload.answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(upload.answer).toContain('"code":"unmetered_endpoint"');
    expect(upload.error).toBeUndefined();
    expect(upload.sentAll).toBe(true);
  });

  it(`is read no further than ${REFUSED_BODY_DRAIN.bytes} bytes: a body far larger is cut`, async () => {
    const length = 1024 * 1024 * 1024;
    const upload = await rawUpload(closed, length, 64 * 1024, false);
    expect(upload.sentAll).toBe(false);
    // The bound, and what the two sockets' buffers hold.
    expect(upload.sent).toBeLessThan(REFUSED_BODY_DRAIN.bytes + 32 * 1024 * 1024);
  }, 30_000);
});

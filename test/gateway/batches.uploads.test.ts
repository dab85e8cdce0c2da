/**
 * `POST v1/files` where uploads of other purposes than `batch` are not let through (passthrough class `files`), through
 * the `openai` SDK over HTTP (docs/batches.md, "The upload"): an upload neither the batch path nor the passthrough could
 * take is refused as soon as that is known, not read to its end first; the SDK reads the refusal. What the client
 * sent is counted by a TCP relay between the SDK and Nexus.
 */
import { request } from 'node:http';
import { createConnection, createServer, type Server } from 'node:net';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBatchUpstream, type BatchUpstream } from '../support/upstreams/batches.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, type Tenant } from './gateway-support.js';

const KEY = 'sk-batch-upload-0123456789';
const MB = 1024 * 1024;
let t: TestApp;
let up: BatchUpstream;
let closed: Tenant;
let open: Tenant;
let relay: Server;
let relayUrl = '';
/** The bytes the relay has carried from clients to Nexus. */
let carried = 0;
const sockets = new Set<import('node:net').Socket>();

/** A TCP relay to Nexus counting what clients send (with backpressure: what Nexus does not read stays in the client). */
async function startRelay(target: URL): Promise<void> {
  relay = createServer((client) => {
    const server = createConnection({ host: target.hostname, port: Number(target.port) });
    sockets.add(client).add(server);
    client.on('data', (chunk: Buffer) => {
      carried += chunk.length;
      if (!server.write(chunk)) client.pause();
    });
    server.on('drain', () => client.resume());
    client.on('end', () => server.end());
    server.pipe(client);
    client.on('error', () => server.destroy());
    server.on('error', () => client.destroy());
    client.on('close', () => server.destroy());
    server.on('close', () => client.destroy());
  });
  await new Promise<void>((ok) => relay.listen(0, '127.0.0.1', ok));
  const address = relay.address() as { port: number };
  relayUrl = `http://127.0.0.1:${address.port}`;
}

const sdk = (tenant: Tenant) =>
  new OpenAI({ baseURL: `${relayUrl}/providers/${tenant.connectionId}/v1`, apiKey: tenant.apiKey, maxRetries: 0, timeout: 60_000 });

/** A 64 MB text file of `line` repeated. */
const bigFile = (line: string, name: string) => {
  const one = Buffer.from(line + '\n');
  return toFile(Buffer.alloc(64 * MB, one), name, { type: 'application/octet-stream' });
};

beforeAll(async () => {
  t = await startTestApp();
  up = await startBatchUpstream(KEY);
  closed = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: 20, allowedModels: ['gpt-4o-mini'] });
  open = await createTenant(t, { baseUrl: up.url, providerKey: KEY, planPassthroughClasses: ['files'] });
  await startRelay(new URL(t.url));
}, 60_000);

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((ok) => relay?.close(ok));
  await t?.close();
  await up?.close();
});

describe('an upload nothing lets through is refused before its body is read', () => {
  it('its purpose read before its file: 409 unmetered_endpoint, a few MB of 64 read', async () => {
    carried = 0;
    const files = up.files.length;
    const err = (await sdk(closed)
      .files.create({ purpose: 'assistants', file: await bigFile('%PDF-1.7 some document bytes', 'doc.pdf') })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.ConflictError>;
    expect(err).toBeInstanceOf(OpenAI.ConflictError);
    expect(err.message).toMatch(/POST v1\/files with purpose 'assistants' is not metered .* passthrough class 'files' is not let through/);
    expect(err.headers.get('x-should-retry')).toBe('false');
    // Read: at most the refusal's drain (4 MiB) past what came before it, and what the sockets' buffers hold.
    expect(carried).toBeLessThan(24 * MB);
    expect(up.files.length).toBe(files);
  });

  it('its purpose after its file (the SDK writes the form in its fields order): refused at the first line no batch has', async () => {
    carried = 0;
    const files = up.files.length;
    const err = (await sdk(closed)
      .files.create({ file: await bigFile('{"messages":[{"role":"user","content":"hi"}]}', 'train.jsonl'), purpose: 'fine-tune' })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.BadRequestError>;
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toMatch(/^400 line 1: custom_id must be a string .*passthrough class 'files'\) is not let through on this access/);
    expect(carried).toBeLessThan(24 * MB);
    expect(up.files.length).toBe(files);
  });

  it('a body declared over the limit: 413 before any of it is read', async () => {
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${t.url}/providers/${closed.connectionId}/v1/files`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${closed.apiKey}`,
          'content-type': 'multipart/form-data; boundary=xyz',
          'content-length': String(300 * MB),
        },
      });
      req.on('response', (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode!, body });
        });
      });
      req.on('error', reject);
      req.write(Buffer.alloc(MB, 'a'));
    });
    expect(answer.status).toBe(413);
    expect(answer.body).toMatch(/larger than the limit/);
  });

  it('where the plan lets `files` through, another purpose passes unmetered; a batch is still checked and metered', async () => {
    const client = sdk(open);
    const lines = Array.from({ length: 3 }, () => '{"messages":[{"role":"user","content":"hi"}]}').join('\n');
    const file = await client.files.create({ file: await toFile(Buffer.from(lines), 'train.jsonl'), purpose: 'fine-tune' }).withResponse();
    expect(file.data.purpose).toBe('fine-tune');
    expect(file.response.headers.get('x-nexus-metering-status')).toBe('unmetered');
    expect(await t.database.db('batch_files').where({ upstream_file_id: file.data.id }).first()).toBeUndefined();
    const bad = await client.files
      .create({ file: await toFile(Buffer.from('{not json\n'), 'b.jsonl'), purpose: 'batch' })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as Error).message).toMatch(/line 1: not JSON/);
  });
});

/**
 * Multipart bodies through the gateway, compared byte for byte (docs/modalities.md, "Uploads"): the `openai` SDK's
 * body, as its fetch sent it, against what the upstream received. A passed-through upload (an upload's part, a file
 * that is not a batch's) where the plan lets its class through, recorded unmetered with its price per call; its
 * class refused with 409 where it does not, the upstream not called; a metered transcription charged the seconds
 * its upstream reports. The files are larger than the 1 MiB the gateway holds in memory (spooled to a file, read
 * back) or smaller (held), and carry runs of bytes that start like the form's boundary, across its reads.
 */
import { createHash } from 'node:crypto';
import OpenAI, { toFile } from 'openai';
import { describe, expect, it } from 'vitest';
import { contractFetch } from '../support/contract.js';
import { createModelPrice } from '../support/sdk.js';
import { wavHeader } from '../support/wav.js';
import { invocationByRequestId, type Tenant } from './gateway-support.js';
import { MEDIA_KEY, mediaRig } from './media-support.js';

const rig = mediaRig({}, { keepBodies: true });
const hourAgo = () => new Date(Date.now() - 3_600_000).toISOString();

/** A body the SDK's fetch sent: where to, its Content-Type (with its boundary) and its bytes. */
interface Sent {
  url: string;
  contentType: string;
  body: Buffer;
}

/** The `openai` SDK on the tenant's gateway, its fetch keeping each body it sends (answers checked by the contract). */
function recordingOpenAi(tenant: Tenant, headers: Record<string, string> = {}): { client: OpenAI; sent: Sent[] } {
  const sent: Sent[] = [];
  const recording: typeof fetch = async (input, init) => {
    const request = new Request(input, init);
    // The SDK's probe of `data:,`, and any call without a body, go as they are.
    if (request.url.startsWith('data:') || request.method !== 'POST') return fetch(request);
    const body = Buffer.from(await request.arrayBuffer());
    sent.push({ url: request.url, contentType: request.headers.get('content-type') ?? '', body });
    return fetch(request.url, { method: 'POST', headers: request.headers, body, signal: request.signal });
  };
  const client = new OpenAI({
    baseURL: `${tenant.gatewayBaseUrl}/v1`,
    apiKey: tenant.apiKey,
    fetch: contractFetch(recording),
    maxRetries: 0,
    defaultHeaders: headers,
  });
  return { client, sent };
}

/**
 * `size` bytes of noise (xorshift, the same each run), with the start of a form boundary as undici's FormData makes
 * them (`\r\n------formdata-undici-0`) every 65,531 bytes: across the 64 KiB reads of the gateway and of its spool.
 */
function awkward(size: number): Buffer {
  const out = Buffer.alloc(size);
  let x = 0x9e3779b9;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  const near = Buffer.from('\r\n------formdata-undici-0');
  for (let at = 1000; at + near.length < size; at += 65_531) near.copy(out, at);
  return out;
}

const digest = (b: Buffer) => `${b.length} bytes, sha256 ${createHash('sha256').update(b).digest('hex')}`;

/** What the upstream's last request received against what the SDK sent: the same bytes, under the same Content-Type. */
function expectSameBytes(sent: Sent | undefined) {
  expect(sent, 'the SDK sent a body').toBeDefined();
  const seen = rig.up.requests.at(-1)!;
  expect(seen.headers['content-type']).toBe(sent!.contentType);
  expect(digest(seen.body!)).toBe(digest(sent!.body));
  expect(seen.body!.equals(sent!.body)).toBe(true);
  return seen;
}

describe('a multipart call passed through', () => {
  it('reaches the upstream byte for byte where the plan lets `uploads` through (3 MiB, spooled), recorded unmetered with its price per call', async () => {
    const tenant = await rig.tenantWith({ planPassthroughClasses: ['uploads'] });
    await createModelPrice({
      client: rig.t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { modelPattern: '*', inputPerMillion: '1', outputPerMillion: '1', perCall: '0.01', effectiveFrom: hourAgo() },
    });
    const before = await rig.consumed(tenant);
    const { client, sent } = recordingOpenAi(tenant);
    const data = awkward(3 << 20);
    const { data: part, response } = await client.uploads.parts
      .create('upload_abc', { data: await toFile(data, 'part.bin', { type: 'application/octet-stream' }) })
      .withResponse();
    expect(part).toMatchObject({ object: 'upload.part', upload_id: 'upload_abc' });
    expect(response.headers.get('x-nexus-metering-status')).toBe('unmetered');
    const seen = expectSameBytes(sent[0]);
    expect(seen.url).toBe('/v1/uploads/upload_abc/parts');
    expect(seen.files).toEqual([{ field: 'data', filename: 'part.bin', size: data.length }]);
    // The provider's key replaced the end user's.
    expect(seen.headers.authorization).toBe(`Bearer ${MEDIA_KEY}`);
    const invocation = await invocationByRequestId(rig.t, tenant.workspaceId, response.headers.get('x-nexus-request-id')!);
    expect(invocation).toMatchObject({
      status: 'SUCCEEDED',
      method: 'POST',
      endpoint: 'v1/uploads/upload_abc/parts',
      quotaUnits: '0',
      costMicros: '10000',
    });
    expect(await rig.consumed(tenant)).toBe(before);
  });

  it("passes a file that is not a batch's (64 KiB, held in memory) through byte for byte where `files` is let through", async () => {
    const tenant = await rig.tenantWith({ planPassthroughClasses: ['files'] });
    const { client, sent } = recordingOpenAi(tenant);
    const data = awkward(64 * 1024 + 17);
    const { data: file, response } = await client.files
      .create({ file: await toFile(data, 'notes.pdf', { type: 'application/pdf' }), purpose: 'assistants' })
      .withResponse();
    expect(file).toMatchObject({ id: 'file-fake-1', bytes: data.length, filename: 'notes.pdf', purpose: 'assistants' });
    const seen = expectSameBytes(sent[0]);
    expect(seen.url).toBe('/v1/files');
    expect(seen.fields).toEqual({ purpose: 'assistants' });
    const invocation = await invocationByRequestId(rig.t, tenant.workspaceId, response.headers.get('x-nexus-request-id')!);
    expect(invocation).toMatchObject({ status: 'SUCCEEDED', endpoint: 'v1/files', quotaUnits: '0' });
  });

  it('refuses an upload of a class the plan does not let through with 409 naming it, the upstream not called', async () => {
    const tenant = await rig.tenantWith({ planPassthroughClasses: ['files'] });
    const { client } = recordingOpenAi(tenant);
    const before = rig.up.requests.length;
    const refused = await client.uploads.parts
      .create('upload_abc', { data: await toFile(awkward(200_000), 'part.bin') })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    const error = refused as InstanceType<typeof OpenAI.APIError>;
    expect(error.status).toBe(409);
    expect(error.error).toMatchObject({ code: 'unmetered_endpoint', passthrough_class: 'uploads' });
    expect(rig.up.requests.length).toBe(before);
    const invocation = await invocationByRequestId(rig.t, tenant.workspaceId, error.headers!.get('x-nexus-request-id')!);
    expect(invocation).toMatchObject({ status: 'REJECTED', errorCode: 'unmetered_endpoint', quotaUnits: '0' });
  });
});

describe('a metered multipart call', () => {
  it('sends a 2.5 MB transcription to the upstream byte for byte, charged the seconds whisper-1 reports', async () => {
    const before = await rig.consumed();
    const { client, sent } = recordingOpenAi(rig.tenant, { 'x-fake-seconds': '9' });
    const audio = 2_500_000;
    const wav = Buffer.concat([wavHeader(audio), awkward(audio)]);
    const { data, response } = await client.audio.transcriptions
      .create({ file: await toFile(wav, 'noise.wav', { type: 'audio/wav' }), model: 'whisper-1', language: 'en' })
      .withResponse();
    expect(data.text).toBe('hello from the fake transcriber');
    expect(response.headers.get('x-nexus-metering-status')).toBe('metered');
    const seen = expectSameBytes(sent[0]);
    expect(seen.url).toBe('/v1/audio/transcriptions');
    expect(seen.fields).toEqual({ model: 'whisper-1', language: 'en' });
    expect(seen.files).toEqual([{ field: 'file', filename: 'noise.wav', size: wav.length }]);
    // 9 s at 20 units a second (a second as 20 input tokens, an input token 1 unit).
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({
      status: 'SUCCEEDED',
      units: 180n,
      errorCode: undefined,
      kinds: { audioMs: '9000' },
    });
    expect((await rig.consumed()) - before).toBe(180n);
  });
});

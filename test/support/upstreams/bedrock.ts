/**
 * The Bedrock Runtime fake upstream (test/support/fake-upstreams.ts says what the fakes share):
 * `POST /model/{modelId}/converse` (JSON) and `/converse-stream` (`application/vnd.amazon.eventstream`,
 * frames encoded with smithy's EventStreamCodec, as Bedrock's are), `/count-tokens`, `/invoke` of an
 * `amazon.nova-canvas-*` model (Nova Canvas's `{ images, error }`: `numberOfImages` PNGs, one for background removal,
 * no usage, as Nova Canvas answers), and `GET /async-invoke` (the probe's).
 * It accepts a Bedrock API key as `Authorization: Bearer`, or a SigV4 signature that it verifies with
 * `@smithy/signature-v4` over the request it received (its SignedHeaders, the path as sent, the body),
 * as AWS does.
 *
 * Per request, besides the shared faults: x-fake-usage "input,output,cacheRead,cacheWrite" (input excludes
 * the cache, as Bedrock's inputTokens does); x-fake-fault `broken-frame` (the stream's third frame has a
 * bad checksum; the frames after it come a second apart; `malformed`, the shared fault's name, is the same),
 * `split` (the stream is written 3 bytes a write, frames across chunks), `slow` (a frame every
 * x-fake-delay-ms, default 50), `no-usage` (no metadata event; a JSON answer without usage).
 */
import type { IncomingMessage } from 'node:http';
import { Sha256 } from '@smithy/core/checksum';
import { EventStreamCodec } from '@smithy/core/event-streams';
import { SignatureV4 } from '@smithy/signature-v4';
import { json, serve, sleep, stallAfterOf, wordsOf, type FakeUpstream } from './server.js';

interface SigV4Credential {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  region: string;
}

export interface BedrockUpstreamOptions {
  /** Bedrock API keys it accepts (Bearer). */
  apiKeys?: string[];
  /** The access key it verifies SigV4 signatures with. */
  sigv4?: SigV4Credential;
}

const codec = new EventStreamCodec(
  (bytes) => Buffer.from(bytes).toString('utf8'),
  (text) => new Uint8Array(Buffer.from(text, 'utf8')),
);

/** An event frame as Bedrock sends it. */
function bedrockEvent(eventType: string, payload: unknown): Buffer {
  return Buffer.from(
    codec.encode({
      headers: {
        ':event-type': { type: 'string', value: eventType },
        ':content-type': { type: 'string', value: 'application/json' },
        ':message-type': { type: 'string', value: 'event' },
      },
      body: new Uint8Array(Buffer.from(JSON.stringify(payload))),
    }),
  );
}

/** The usage x-fake-usage asks for: input (uncached), output, cache read, cache write. */
function usageOf(req: IncomingMessage) {
  const [input = 10, output = 5, read = 0, write = 0] = String(req.headers['x-fake-usage'] ?? '10,5,0,0')
    .split(',')
    .map(Number);
  return {
    inputTokens: input,
    outputTokens: output,
    totalTokens: input + output + read + write,
    ...(read ? { cacheReadInputTokens: read } : {}),
    ...(write ? { cacheWriteInputTokens: write } : {}),
  };
}

/** Whether the request carries a SigV4 signature of `credential` that holds (recomputed over what was received). */
async function signatureHolds(req: IncomingMessage, body: string, credential: SigV4Credential): Promise<boolean> {
  const auth = String(req.headers.authorization ?? '');
  const signedHeaders = /SignedHeaders=([^,]+)/.exec(auth)?.[1]?.split(';');
  const date = req.headers['x-amz-date'];
  if (!auth.startsWith('AWS4-HMAC-SHA256 ') || !signedHeaders || typeof date !== 'string') return false;
  if (!auth.includes(`Credential=${credential.accessKeyId}/`)) return false;
  if (credential.sessionToken !== undefined && req.headers['x-amz-security-token'] !== credential.sessionToken) return false;
  const headers: Record<string, string> = {};
  for (const name of signedHeaders) headers[name] = String(req.headers[name] ?? '');
  const url = new URL(req.url!, `http://${req.headers.host}`);
  const query: Record<string, string> = {};
  for (const [k, v] of url.searchParams) query[k] = v;
  const signer = new SignatureV4({
    service: 'bedrock',
    region: credential.region,
    credentials: {
      accessKeyId: credential.accessKeyId,
      secretAccessKey: credential.secretAccessKey,
      sessionToken: credential.sessionToken,
    },
    sha256: Sha256,
  });
  const signingDate = new Date(date.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'));
  const signed = await signer.sign(
    { method: req.method!, protocol: 'http:', hostname: url.hostname, port: Number(url.port), path: url.pathname, query, headers, body },
    { signingDate },
  );
  return signed.headers.authorization === auth;
}

const MODEL_PATH = /^\/model\/([^/]+)\/(converse|converse-stream)$/;
const NOVA_CANVAS_INVOKE = /^\/model\/[^/]*amazon\.nova-canvas[^/]*\/invoke$/;

export function startBedrockUpstream(options: BedrockUpstreamOptions): Promise<FakeUpstream> {
  return serve(new Set(options.apiKeys ?? []), async (req, res, raw, keys) => {
    const auth = String(req.headers.authorization ?? '');
    const bearer = auth.startsWith('Bearer ') && keys.has(auth.slice(7));
    if (!bearer && !(options.sigv4 && (await signatureHolds(req, raw, options.sigv4)))) {
      return json(
        res,
        403,
        { message: 'The security token included in the request is invalid.' },
        { 'x-amzn-errortype': 'UnrecognizedClientException', 'x-amzn-requestid': 'req-fake-bedrock' },
      );
    }
    const url = new URL(req.url!, 'http://fake');
    if (req.method === 'GET' && url.pathname === '/async-invoke') return json(res, 200, { asyncInvokeSummaries: [] });
    if (req.method === 'POST' && /^\/model\/[^/]+\/count-tokens$/.test(url.pathname)) {
      // Deterministic: the body's length in bytes, a tenth of it.
      return json(res, 200, { inputTokens: Math.ceil(Buffer.byteLength(raw) / 10) });
    }
    if (req.method === 'POST' && NOVA_CANVAS_INVOKE.test(url.pathname)) {
      const body = JSON.parse(raw) as { taskType?: string; imageGenerationConfig?: { numberOfImages?: number } };
      const n = body.taskType === 'BACKGROUND_REMOVAL' ? 1 : (body.imageGenerationConfig?.numberOfImages ?? 1);
      const png = Buffer.from('\x89PNG\r\n\x1a\n fake canvas', 'latin1').toString('base64');
      return json(res, 200, { images: Array.from({ length: n }, () => png), error: null }, { 'x-amzn-requestid': 'req-fake-bedrock' });
    }
    const route = MODEL_PATH.exec(url.pathname);
    if (req.method !== 'POST' || !route) {
      return json(res, 404, { message: `no route ${req.method} ${url.pathname}` }, { 'x-amzn-errortype': 'ResourceNotFoundException' });
    }
    JSON.parse(raw);
    const usage = usageOf(req);
    const words = wordsOf(req, usage.outputTokens);
    const fault = req.headers['x-fake-fault'] === 'malformed' ? 'broken-frame' : req.headers['x-fake-fault'];
    if (route[2] === 'converse') {
      return json(res, 200, {
        output: { message: { role: 'assistant', content: [{ text: words.join(' ') }] } },
        stopReason: 'end_turn',
        ...(fault === 'no-usage' ? {} : { usage }),
        metrics: { latencyMs: 1 },
      });
    }
    const frames = [
      bedrockEvent('messageStart', { role: 'assistant' }),
      ...words.map((w, i) => bedrockEvent('contentBlockDelta', { contentBlockIndex: 0, delta: { text: (i ? ' ' : '') + w } })),
      bedrockEvent('contentBlockStop', { contentBlockIndex: 0 }),
      bedrockEvent('messageStop', { stopReason: 'end_turn' }),
      ...(fault === 'no-usage' ? [] : [bedrockEvent('metadata', { usage, metrics: { latencyMs: 1 } })]),
    ];
    if (fault === 'broken-frame') {
      // A payload byte changed: the frame's message checksum no longer holds.
      const broken = Buffer.from(frames[2]!);
      broken[broken.length - 8] = broken[broken.length - 8]! ^ 0xff;
      frames[2] = broken;
    }
    res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': 'req-fake-bedrock' });
    const stallAfter = stallAfterOf(req);
    if (stallAfter !== undefined) {
      // The first frames, then nothing more (the answer never ends).
      res.write(Buffer.concat(frames.slice(0, stallAfter)));
      return;
    }
    if (fault === 'broken-frame') {
      // The frames up to the broken one at once, the rest a second apart (a reader that stops is seen to).
      res.write(Buffer.concat(frames.slice(0, 3)));
      for (const frame of frames.slice(3)) {
        await sleep(1000);
        if (res.destroyed) return;
        res.write(frame);
      }
      res.end();
      return;
    }
    if (fault === 'slow') {
      const delay = Number(req.headers['x-fake-delay-ms'] ?? 50);
      for (const frame of frames) {
        if (res.destroyed) return;
        res.write(frame);
        await sleep(delay);
      }
      res.end();
      return;
    }
    const all = Buffer.concat(frames);
    const step = fault === 'split' ? 3 : all.length;
    for (let at = 0; at < all.length; at += step) {
      if (res.destroyed) return;
      res.write(all.subarray(at, at + step));
      if (fault === 'split' && at % 60 === 0) await sleep(1);
    }
    res.end();
  });
}

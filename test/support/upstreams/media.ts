/**
 * OpenAI's media endpoints as a fake upstream (images, speech, transcriptions and translations, moderations), at
 * OpenAI's paths (`/v1/...`, the key as Bearer) and Azure's (`/openai/deployments/{d}/...` and `/openai/v1/...`, the
 * key as api-key). A multipart upload is read as it comes and never held: what it records of one is its fields, its
 * files' sizes and its length. Its answers report usage as the real ones do (none for dall-e, binary speech, a text
 * transcription), from the request's headers (`keepBodies`: each request's bytes kept too, for a test that compares
 * them with what its client sent; the bench's 100 MB upload is not kept). Two paths Nexus passes through rather than
 * meters answer as OpenAI's do: an upload's part (`POST /v1/uploads/{id}/parts`) and a file (`POST /v1/files`).
 * Its answers report usage, from the request's headers:
 *   x-fake-usage: "input,output"   tokens (default 10,5)
 *   x-fake-image-input: n          of the input, image tokens (an edit's)
 *   x-fake-seconds: n              a whisper transcription's duration (default 7)
 *   x-fake-audio-bytes: n          a binary speech answer's size (default 4096)
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { FormScanner, boundaryOf } from '../../../src/protocols/multipart.js';
import { closeServer, listenLocal } from '../local-server.js';
import { json, usageOf } from './server.js';

/** A request the media upstream saw: its form or JSON fields, its files' sizes, its length. */
interface MediaRequest {
  url: string;
  headers: IncomingHttpHeaders;
  bytes: number;
  /** Its bytes as they came, with `keepBodies`. */
  body?: Buffer;
  fields: Record<string, unknown>;
  files: { field: string; filename: string; size: number }[];
}

export interface MediaUpstream {
  url: string;
  requests: MediaRequest[];
  close(): Promise<void>;
}

const PATH =
  /^\/(?:v1|openai\/v1|openai\/deployments\/([^/]+))\/(images\/generations|images\/edits|images\/variations|audio\/speech|audio\/transcriptions|audio\/translations|moderations)$/;
const PNG_B64 = Buffer.from('\x89PNG fake image').toString('base64');

/** A request's body read as it comes: a JSON body parsed, a multipart one scanned (never held). */
async function readRequest(req: IncomingMessage, keepBody: boolean): Promise<MediaRequest> {
  const boundary = boundaryOf(req.headers['content-type']);
  const scanner = boundary ? new FormScanner(boundary) : undefined;
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (scanner) scanner.push(chunk);
    if (!scanner || keepBody) chunks.push(chunk);
  }
  const seen: MediaRequest = { url: req.url!, headers: req.headers, bytes, fields: {}, files: [] };
  if (keepBody) seen.body = Buffer.concat(chunks);
  if (scanner) {
    const form = scanner.end();
    seen.fields = { ...form.fields };
    seen.files = form.files.map((f) => ({ field: f.field, filename: f.filename, size: f.size }));
  } else if (bytes) {
    seen.fields = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  }
  return seen;
}

const sse = (res: ServerResponse, events: object[]) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const e of events) res.write(`event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`);
  res.end();
};

function images(res: ServerResponse, seen: MediaRequest, model: string, edit: boolean): void {
  const f = seen.fields;
  const n = Number(f.n ?? 1);
  const u = usageOf({ headers: seen.headers } as IncomingMessage);
  const imageInput = Number(seen.headers['x-fake-image-input'] ?? 0);
  const usage = model.startsWith('dall-e')
    ? undefined
    : {
        input_tokens: u.input,
        input_tokens_details: { text_tokens: u.input - imageInput, image_tokens: imageInput },
        output_tokens: u.output,
        total_tokens: u.input + u.output,
      };
  if (f.stream === true || f.stream === 'true') {
    const kind = edit ? 'image_edit' : 'image_generation';
    const partials = Number(f.partial_images ?? 0);
    const events: object[] = [];
    for (let i = 0; i < partials; i++) events.push({ type: `${kind}.partial_image`, b64_json: PNG_B64, partial_image_index: i });
    events.push({ type: `${kind}.completed`, b64_json: PNG_B64, created_at: 1, size: '1024x1024', quality: 'high', usage });
    return sse(res, events);
  }
  const url = f.response_format === 'url' || (model.startsWith('dall-e') && f.response_format === undefined);
  const data = Array.from({ length: n }, () => (url ? { url: 'https://images.invalid/1.png' } : { b64_json: PNG_B64 }));
  json(res, 200, { created: 1, data, ...(usage ? { usage } : {}) });
}

function speech(res: ServerResponse, seen: MediaRequest): void {
  const u = usageOf({ headers: seen.headers } as IncomingMessage);
  if (seen.fields.stream_format === 'sse') {
    const audio = Buffer.alloc(64, 1).toString('base64');
    return sse(res, [
      { type: 'speech.audio.delta', audio },
      { type: 'speech.audio.delta', audio },
      { type: 'speech.audio.done', usage: { input_tokens: u.input, output_tokens: u.output, total_tokens: u.input + u.output } },
    ]);
  }
  const size = Number(seen.headers['x-fake-audio-bytes'] ?? 4096);
  res.writeHead(200, { 'content-type': 'audio/mpeg', 'transfer-encoding': 'chunked' });
  for (let sent = 0; sent < size; sent += 1024) res.write(Buffer.alloc(Math.min(1024, size - sent), 7));
  res.end();
}

function transcription(res: ServerResponse, seen: MediaRequest, model: string): void {
  const f = seen.fields;
  const u = usageOf({ headers: seen.headers } as IncomingMessage);
  const seconds = Number(seen.headers['x-fake-seconds'] ?? 7);
  const text = 'hello from the fake transcriber';
  const usage = model.startsWith('whisper')
    ? { type: 'duration', seconds }
    : {
        type: 'tokens',
        input_tokens: u.input,
        input_token_details: { text_tokens: 2, audio_tokens: u.input - 2 },
        output_tokens: u.output,
        total_tokens: u.input + u.output,
      };
  if (f.stream === 'true') {
    return sse(res, [
      { type: 'transcript.text.delta', delta: 'hello from ' },
      { type: 'transcript.text.delta', delta: 'the fake transcriber' },
      { type: 'transcript.text.done', text, usage },
    ]);
  }
  const format = typeof f.response_format === 'string' ? f.response_format : 'json';
  if (format === 'text' || format === 'srt' || format === 'vtt') {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    return void res.end(format === 'text' ? text : `1\n00:00:00,000 --> 00:00:0${seconds},000\n${text}\n`);
  }
  if (format === 'verbose_json') {
    return json(res, 200, { task: 'transcribe', language: 'english', duration: seconds - 0.5, text, segments: [] });
  }
  json(res, 200, { text, usage });
}

/** The passed-through paths it answers: an upload's part, and a file. */
function passedThrough(res: ServerResponse, seen: MediaRequest, path: string): boolean {
  const part = /^\/v1\/uploads\/([^/]+)\/parts$/.exec(path);
  if (part) {
    json(res, 200, { id: 'part_fake_1', object: 'upload.part', created_at: 1, upload_id: part[1] });
    return true;
  }
  if (path !== '/v1/files') return false;
  const file = seen.files[0];
  json(res, 200, {
    id: 'file-fake-1',
    object: 'file',
    bytes: file?.size ?? 0,
    created_at: 1,
    filename: file?.filename ?? '',
    purpose: seen.fields.purpose,
    status: 'processed',
  });
  return true;
}

/** The media upstream, taking `apiKey` as Bearer (OpenAI) or api-key (Azure). */
export async function startMediaUpstream(options: { apiKey: string; keepBodies?: boolean }): Promise<MediaUpstream> {
  const requests: MediaRequest[] = [];
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- every path answers; a throw answers 500 below
  const server = createServer(async (req, res) => {
    try {
      const path = (req.url ?? '').split('?')[0]!;
      const key = req.headers['api-key'] ?? /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      const seen = await readRequest(req, options.keepBodies === true);
      requests.push(seen);
      if (key !== options.apiKey) return json(res, 401, { error: { message: 'Incorrect API key provided', code: 'invalid_api_key' } });
      const match = PATH.exec(path);
      if (req.method === 'POST' && !match && passedThrough(res, seen, path)) return;
      if (req.method !== 'POST' || !match) return json(res, 404, { error: { message: `no route ${req.method} ${path}` } });
      const [, deployment, endpoint] = match;
      const model = deployment ?? (typeof seen.fields.model === 'string' ? seen.fields.model : 'dall-e-2');
      if (endpoint!.startsWith('images/')) return images(res, seen, model, endpoint !== 'images/generations');
      if (endpoint === 'audio/speech') return speech(res, seen);
      if (endpoint === 'moderations') {
        return json(res, 200, { id: 'modr-1', model, results: [{ flagged: false, categories: {}, category_scores: {} }] });
      }
      return transcription(res, seen, model);
    } catch (err) {
      if (!res.headersSent) json(res, 500, { error: { message: String(err) } });
    }
  });
  return { url: await listenLocal(server), requests, close: () => closeServer(server) };
}

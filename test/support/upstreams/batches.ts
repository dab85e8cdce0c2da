/**
 * OpenAI's Batch API as a fake upstream (docs/batches.md): `POST /v1/files` (multipart, the JSONL read as it comes),
 * `POST /v1/batches`, `GET /v1/batches[/{id}]` (its list paged by `after` and `limit`), `POST /v1/batches/{id}/cancel`,
 * `GET /v1/files/{id}[/content]`, the key as Bearer; or Azure OpenAI's (below). A batch stays `in_progress` until the test runs it: run(id) completes it, every request answered;
 * run(id, n) after a cancel ends it `cancelled` with the first n requests answered. Request i (from 0) of a file
 * reports usage(i) (below), its output at most its max_tokens.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { FormScanner, boundaryOf } from '../../../src/protocols/multipart.js';
import { closeServer, listenLocal } from '../local-server.js';

/** The usage the fake reports for request i of a file (capped at the request's max_tokens). */
export const usageOfLine = (i: number, cap: number) => ({ input: 10 + (i % 7), output: Math.min(cap, 5 + (i % 11)) });

interface Line {
  custom_id: string;
  body: { model: string; max_tokens?: number; max_completion_tokens?: number };
}

interface FakeBatch {
  id: string;
  object: 'batch';
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  status: string;
  created_at: number;
  output_file_id: string | null;
  error_file_id: string | null;
  request_counts: { total: number; completed: number; failed: number };
  metadata: Record<string, string> | null;
}

export interface BatchUpstream {
  url: string;
  /** The files uploaded (their ids), in order. */
  files: string[];
  /** The requests seen: method and path (with its query). */
  seen: string[];
  /** The batches made, in order. */
  made: FakeBatch[];
  /**
   * While set, a create's answer is held (never sent), the batch made first (`made`: a gateway that dies before it
   * reads the answer) or not (`lost`: one that dies before the provider made it).
   */
  holdCreates: 'made' | 'lost' | undefined;
  /** Runs a batch: completed with every request answered, or (`ran`) ended `cancelled` with its first `ran` answered. */
  run(batchId: string, ran?: number): void;
  close(): Promise<void>;
}

/**
 * `azure`: Azure OpenAI's paths instead (`/openai/files`, `/openai/batches`..., each with an `api-version` query, the
 * key as `api-key`); a line's `url` is then `/chat/completions`, its model a deployment's name.
 */
export async function startBatchUpstream(apiKey: string, o: { azure?: boolean } = {}): Promise<BatchUpstream> {
  const files = new Map<string, { lines: Line[]; content?: string; bytes: number }>();
  const batches = new Map<string, FakeBatch>();
  let n = 0;
  const up = {
    files: [] as string[],
    seen: [] as string[],
    made: [] as FakeBatch[],
    holdCreates: undefined as BatchUpstream['holdCreates'],
  };

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  async function upload(req: IncomingMessage, res: ServerResponse) {
    const scanner = new FormScanner(boundaryOf(req.headers['content-type'])!, (bytes) => chunks.push(Buffer.from(bytes)));
    const chunks: Buffer[] = [];
    for await (const c of req) scanner.push(c as Buffer);
    const form = scanner.end();
    const text = Buffer.concat(chunks).toString('utf8');
    const lines = text
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Line);
    const id = `file-${++n}`;
    files.set(id, { lines, bytes: text.length });
    up.files.push(id);
    json(res, 200, {
      id,
      object: 'file',
      bytes: text.length,
      created_at: 1,
      filename: form.files[0]?.filename ?? 'batch.jsonl',
      purpose: form.fields.purpose,
      status: 'processed',
    });
  }

  async function create(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      input_file_id: string;
      endpoint: string;
      completion_window: string;
      metadata?: Record<string, string>;
    };
    const file = files.get(body.input_file_id);
    if (!file) return json(res, 404, { error: { message: 'No such file', type: 'invalid_request_error', code: null } });
    const batch: FakeBatch = {
      id: `batch_${++n}`,
      object: 'batch',
      endpoint: body.endpoint,
      input_file_id: body.input_file_id,
      completion_window: body.completion_window,
      status: 'in_progress',
      created_at: Math.floor(Date.now() / 1000),
      output_file_id: null,
      error_file_id: null,
      request_counts: { total: file.lines.length, completed: 0, failed: 0 },
      metadata: body.metadata ?? null,
    };
    if (up.holdCreates === 'lost') return;
    batches.set(batch.id, batch);
    up.made.push(batch);
    if (!up.holdCreates) json(res, 200, batch);
  }

  /** GET batches: newest first, `limit` (20) after the batch `after`. */
  function list(url: URL, res: ServerResponse) {
    const all = [...batches.values()].reverse();
    const after = url.searchParams.get('after');
    const from = after ? all.findIndex((b) => b.id === after) + 1 : 0;
    const limit = Number(url.searchParams.get('limit') ?? 20);
    const data = all.slice(from, from + limit);
    const ends = { first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: from + limit < all.length };
    json(res, 200, { object: 'list', data, ...ends });
  }

  function run(batchId: string, ran?: number) {
    const batch = batches.get(batchId)!;
    const file = files.get(batch.input_file_id)!;
    const count = ran ?? file.lines.length;
    const out = file.lines.slice(0, count).map((line, i) => {
      const cap = line.body.max_completion_tokens ?? line.body.max_tokens ?? 1000;
      const usage = usageOfLine(i, cap);
      return JSON.stringify({
        id: `batch_req_${i}`,
        custom_id: line.custom_id,
        response: {
          status_code: 200,
          request_id: `req_${i}`,
          body: {
            id: `chatcmpl-${i}`,
            object: 'chat.completion',
            model: `${line.body.model}-2024-07-18`,
            choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
            usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
          },
        },
        error: null,
      });
    });
    const outputId = `file-${++n}`;
    files.set(outputId, { lines: [], content: out.join('\n') + '\n', bytes: 0 });
    batch.output_file_id = outputId;
    batch.status = ran === undefined ? 'completed' : 'cancelled';
    batch.request_counts = { total: file.lines.length, completed: count, failed: 0 };
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url!, 'http://x');
    up.seen.push(`${req.method} ${url.pathname}${url.search}`);
    const key = o.azure ? req.headers['api-key'] : req.headers.authorization;
    if (key !== (o.azure ? apiKey : `Bearer ${apiKey}`))
      return json(res, 401, { error: { message: 'bad key', type: 'invalid_request_error' } });
    if (o.azure && (!url.pathname.startsWith('/openai/') || !url.searchParams.get('api-version')))
      return json(res, 404, { error: { code: '404', message: 'Resource not found (an Azure path has an api-version)' } });
    // Azure's paths are OpenAI's under /openai, without /v1.
    const path = o.azure ? url.pathname.replace(/^\/openai\//, '/v1/') : url.pathname;
    void (async () => {
      if (req.method === 'POST' && path === '/v1/files') return upload(req, res);
      if (req.method === 'POST' && path === '/v1/batches') return create(req, res);
      if (req.method === 'GET' && path === '/v1/batches') return list(url, res);
      let m = /^\/v1\/batches\/([^/]+)(\/cancel)?$/.exec(path);
      if (m) {
        const batch = batches.get(m[1]!);
        if (!batch) return json(res, 404, { error: { message: 'No such batch', type: 'invalid_request_error' } });
        if (m[2] && req.method === 'POST') batch.status = 'cancelling';
        return json(res, 200, batch);
      }
      m = /^\/v1\/files\/([^/]+)(\/content)?$/.exec(path);
      if (m && req.method === 'GET') {
        const file = files.get(m[1]!);
        if (!file) return json(res, 404, { error: { message: 'No such file', type: 'invalid_request_error' } });
        if (!m[2]) return json(res, 200, { id: m[1], object: 'file', bytes: file.bytes, purpose: 'batch', status: 'processed' });
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        return res.end(file.content ?? '');
      }
      json(res, 404, { error: { message: `no route ${req.method} ${path}`, type: 'invalid_request_error' } });
    })();
  });
  const url = await listenLocal(server);
  return Object.assign(up, { url, run, close: () => closeServer(server) });
}

/** Anthropic's Message Batches as a fake upstream: create, retrieve, list, cancel, results; run(id[, ran]) ends a batch. */
export interface MessageBatchUpstream {
  url: string;
  run(batchId: string, ran?: number): void;
  close(): Promise<void>;
}

interface FakeMessageBatch {
  id: string;
  type: 'message_batch';
  processing_status: string;
  request_counts: { processing: number; succeeded: number; errored: number; canceled: number; expired: number };
  created_at: string;
  ended_at: string | null;
  expires_at: string;
  cancel_initiated_at: string | null;
  archived_at: string | null;
  results_url: string | null;
}

export async function startMessageBatchUpstream(apiKey: string): Promise<MessageBatchUpstream> {
  const batches = new Map<string, { batch: FakeMessageBatch; requests: Line[]; results?: string }>();
  let n = 0;
  let base = '';
  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const notFound = (res: ServerResponse) => json(res, 404, { type: 'error', error: { type: 'not_found_error', message: 'No such batch' } });

  function run(batchId: string, ran?: number) {
    const entry = batches.get(batchId)!;
    const count = ran ?? entry.requests.length;
    const lines = entry.requests.map((request, i) => {
      if (i >= count) return JSON.stringify({ custom_id: request.custom_id, result: { type: 'canceled' } });
      const usage = usageOfLine(i, request.body.max_tokens ?? 1000);
      return JSON.stringify({
        custom_id: request.custom_id,
        result: {
          type: 'succeeded',
          message: {
            id: `msg_${i}`,
            type: 'message',
            role: 'assistant',
            model: request.body.model,
            content: [{ type: 'text', text: 'ok' }],
            stop_reason: 'end_turn',
            stop_sequence: null,
            usage: { input_tokens: usage.input, output_tokens: usage.output },
          },
        },
      });
    });
    entry.results = lines.join('\n') + '\n';
    const total = entry.requests.length;
    Object.assign(entry.batch, {
      processing_status: 'ended',
      ended_at: new Date().toISOString(),
      request_counts: { processing: 0, succeeded: count, errored: 0, canceled: total - count, expired: 0 },
      results_url: `${base}/v1/messages/batches/${batchId}/results`,
    });
  }

  const server = createServer((req, res) => {
    const path = new URL(req.url!, 'http://x').pathname;
    if (req.headers['x-api-key'] !== apiKey) {
      return json(res, 401, { type: 'error', error: { type: 'authentication_error', message: 'bad key' } });
    }
    void (async () => {
      if (req.method === 'POST' && path === '/v1/messages/batches') {
        const chunks: Buffer[] = [];
        for await (const c of req) chunks.push(c as Buffer);
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { requests: { custom_id: string; params: Line['body'] }[] };
        const id = `msgbatch_${++n}`;
        const batch: FakeMessageBatch = {
          id,
          type: 'message_batch',
          processing_status: 'in_progress',
          request_counts: { processing: body.requests.length, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
          created_at: new Date().toISOString(),
          ended_at: null,
          expires_at: new Date(Date.now() + 86_400_000).toISOString(),
          cancel_initiated_at: null,
          archived_at: null,
          results_url: null,
        };
        batches.set(id, { batch, requests: body.requests.map((r) => ({ custom_id: r.custom_id, body: r.params })) });
        return json(res, 200, batch);
      }
      const m = /^\/v1\/messages\/batches\/([^/]+)(\/results|\/cancel)?$/.exec(path);
      const entry = m && batches.get(m[1]!);
      if (!m || !entry) return notFound(res);
      if (m[2] === '/cancel' && req.method === 'POST') {
        entry.batch.processing_status = 'canceling';
        entry.batch.cancel_initiated_at = new Date().toISOString();
        return json(res, 200, entry.batch);
      }
      if (m[2] === '/results') {
        res.writeHead(200, { 'content-type': 'application/binary' });
        return res.end(entry.results ?? '');
      }
      return json(res, 200, entry.batch);
    })();
  });
  base = await listenLocal(server);
  return { url: base, run, close: () => closeServer(server) };
}

/**
 * An OpenAI-style upstream whose fault is chosen per server (`mode`), not per request: a route's targets
 * get the same request, so a per-request header would fault them all. The route tests and the faults
 * script use it beside the healthy fakes of fake-upstreams.ts. Every request is counted; a healthy answer
 * reports usage 10 input, 5 output.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listenLocal } from '../local-server.js';

export type FaultMode =
  /** Answers like a provider (chat completions, JSON or SSE). */
  | 'ok'
  /** Never sends its headers. */
  | 'hang'
  /** 500 with an error body. */
  | 'status-500'
  /** 503 with an error body. */
  | 'status-503'
  /** 429 with `Retry-After` (`retryAfter`, 1 s unless set). */
  | 'status-429'
  /** 400: the caller's fault, passed back as it is. */
  | 'status-400'
  /** A stream's headers at once, its first event only after `slowMs`. */
  | 'slow-first-token'
  /** A stream's first event, then the connection is destroyed. */
  | 'cut-stream';

export interface FaultyUpstream {
  url: string;
  mode: FaultMode;
  /** The modes of the next requests, one each, before `mode` again. */
  script: FaultMode[];
  /** The Retry-After of a 429. */
  retryAfter: string;
  slowMs: number;
  /** Requests received. */
  calls: number;
  /** The models the requests named, in order. */
  models: string[];
  close(): Promise<void>;
}

const chunk = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;

function answer(res: ServerResponse, streamed: boolean, model: string): void {
  if (!streamed) {
    const body = JSON.stringify({
      id: 'chatcmpl-faulty',
      object: 'chat.completion',
      created: 0,
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: 'alpha beta' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(chunk({ id: 'c', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta: { content: 'alpha' } }] }));
  res.write(chunk({ id: 'c', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
  res.write(
    chunk({
      id: 'c',
      object: 'chat.completion.chunk',
      model,
      choices: [],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    }),
  );
  res.end('data: [DONE]\n\n');
}

export async function startFaultyUpstream(mode: FaultMode = 'ok'): Promise<FaultyUpstream> {
  const up: FaultyUpstream = {
    url: '',
    mode,
    script: [],
    retryAfter: '1',
    slowMs: 1000,
    calls: 0,
    models: [],
    close: () => closeServer(server),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      up.calls++;
      let body: { model?: string; stream?: boolean } = {};
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8')) as typeof body;
      } catch {
        // Not JSON: answered all the same.
      }
      const model = body.model ?? '';
      up.models.push(model);
      const streamed = body.stream === true;
      switch (up.script.shift() ?? up.mode) {
        case 'hang':
          return;
        case 'status-500':
          res.writeHead(500, { 'content-type': 'application/json' });
          return res.end(JSON.stringify({ error: { message: 'upstream broke', type: 'server_error' } }));
        case 'status-503':
          res.writeHead(503, { 'content-type': 'application/json' });
          return res.end(JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } }));
        case 'status-429':
          res.writeHead(429, { 'content-type': 'application/json', 'retry-after': up.retryAfter });
          return res.end(JSON.stringify({ error: { message: 'slow down', type: 'rate_limit_error' } }));
        case 'status-400':
          res.writeHead(400, { 'content-type': 'application/json' });
          return res.end(JSON.stringify({ error: { message: 'bad request', type: 'invalid_request_error' } }));
        case 'slow-first-token':
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.flushHeaders();
          setTimeout(() => {
            if (!res.destroyed) answerBody(res, model);
          }, up.slowMs);
          return;
        case 'cut-stream':
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(chunk({ id: 'c', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta: { content: 'alpha' } }] }));
          setTimeout(() => res.destroy(), 20);
          return;
        case 'ok':
          return answer(res, streamed, model);
      }
    });
  });
  up.url = await listenLocal(server);
  return up;
}

/** A slow stream's events, its head already sent. */
function answerBody(res: ServerResponse, model: string): void {
  res.write(chunk({ id: 'c', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta: { content: 'alpha' } }] }));
  res.write(
    chunk({
      id: 'c',
      object: 'chat.completion.chunk',
      model,
      choices: [],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    }),
  );
  res.end('data: [DONE]\n\n');
}

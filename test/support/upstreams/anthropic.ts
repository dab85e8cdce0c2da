/** The Anthropic-style fake upstream (test/support/fake-upstreams.ts says what it does). */
import {
  answerNumber,
  FAKE_MODEL_IDS,
  json,
  jsonDelayOf,
  keysOf,
  modelIn,
  serve,
  sleep,
  stream,
  usageOf,
  wordsOf,
  type FakeUpstream,
  type UpstreamKeys,
} from './server.js';

const ANTHROPIC_MODELS = {
  data: FAKE_MODEL_IDS.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })),
  first_id: FAKE_MODEL_IDS[0],
  last_id: FAKE_MODEL_IDS.at(-1),
  has_more: false,
};

/** Anthropic-style: `x-api-key: <key>` and an `anthropic-version` header. */
export function startAnthropicUpstream(options: UpstreamKeys): Promise<FakeUpstream> {
  return serve(keysOf(options), async (req, res, raw, keys) => {
    const presented = req.headers['x-api-key'];
    if (typeof presented !== 'string' || !keys.has(presented) || req.headers.authorization) {
      return json(res, 401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
    }
    if (!req.headers['anthropic-version']) {
      return json(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: 'anthropic-version header is required' } });
    }
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/v1/models') return json(res, 200, ANTHROPIC_MODELS);
    if (req.method === 'GET' && path?.startsWith('/v1/models/')) {
      const id = modelIn(path);
      if (id) return json(res, 200, { type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' });
      return json(res, 404, { type: 'error', error: { type: 'not_found_error', message: 'model not found' } });
    }
    if (req.method === 'POST' && path === '/v1/messages/count_tokens') {
      // Deterministic: the body's length in bytes, a tenth of it.
      return json(res, 200, { input_tokens: Math.ceil(Buffer.byteLength(raw) / 10) });
    }
    if (req.method !== 'POST' || path !== '/v1/messages') {
      return json(res, 404, { type: 'error', error: { type: 'not_found_error', message: `no route ${req.method} ${path}` } });
    }
    const body = JSON.parse(raw) as Record<string, any>;
    const u = usageOf(req);
    const model = body.model ?? 'claude-fake';
    const words = wordsOf(req, u.output);
    const id = `msg_${answerNumber()}`;
    // Anthropic's input_tokens excludes cache reads and writes (x-fake-cache-write: n of the input written to the cache).
    const written = Number(req.headers['x-fake-cache-write'] ?? 0);
    const usage = {
      input_tokens: u.input - u.cached - written,
      cache_creation_input_tokens: written,
      cache_read_input_tokens: u.cached,
      output_tokens: u.output,
    };
    if (req.headers['x-fake-fault'] === 'reset' && !body.stream) {
      res.socket?.destroy();
      return;
    }
    if (!body.stream) {
      const delay = jsonDelayOf(req);
      if (delay) await sleep(delay);
      return json(res, 200, {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [{ type: 'text', text: words.join(' ') }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage,
      });
    }
    const ev = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const events = [
      ev('message_start', {
        message: {
          id,
          type: 'message',
          role: 'assistant',
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { ...usage, output_tokens: 1 },
        },
      }),
      ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
      ev('ping', {}),
      ...words.map((w, i) => ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: (i ? ' ' : '') + w } })),
      ev('content_block_stop', { index: 0 }),
    ];
    if (req.headers['x-fake-fault'] === 'malformed') events.push('event: message_delta\ndata: {"type":"message_delta", "usage": {\n\n');
    else events.push(ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: u.output } }));
    events.push(ev('message_stop', {}));
    return stream(req, res, events);
  });
}

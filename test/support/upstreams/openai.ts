/** The OpenAI-style fake upstream (test/support/fake-upstreams.ts says what it does). */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  answerNumber,
  FAKE_MODEL_IDS,
  gzipped,
  json,
  jsonDelayOf,
  keysOf,
  modelIn,
  serve,
  serveFixed,
  sleep,
  stream,
  usageOf,
  wordsOf,
  type FakeUpstream,
  type UpstreamKeys,
} from './server.js';

const MODELS = { object: 'list', data: FAKE_MODEL_IDS.map((id) => ({ id, object: 'model', created: 0, owned_by: 'fake' })) };

/** OpenAI-style: `Authorization: Bearer <key>`. */
export function startOpenAiUpstream(options: UpstreamKeys): Promise<FakeUpstream> {
  return serve(keysOf(options), async (req, res, raw, keys) => {
    const presented = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (presented === undefined || !keys.has(presented)) {
      // Like the real providers: no echo of the key presented.
      return json(res, 401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } });
    }
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/v1/models') return json(res, 200, MODELS);
    if (req.method === 'GET' && path?.startsWith('/v1/models/')) {
      const id = modelIn(path);
      if (id) return json(res, 200, { id, object: 'model', created: 0, owned_by: 'fake' });
      return json(res, 404, { error: { message: 'The model does not exist', type: 'invalid_request_error', code: 'model_not_found' } });
    }
    if (req.method === 'DELETE' && path?.startsWith('/v1/files/')) {
      return json(res, 200, { id: path.slice('/v1/files/'.length), object: 'file', deleted: true });
    }
    // An account's stored objects, listed (what the passthrough classes' tests read): none.
    if (req.method === 'GET' && /^\/v1\/(?:files|batches|fine_tuning\/jobs|evals)$/.test(path!)) {
      return json(res, 200, { object: 'list', data: [], has_more: false });
    }
    if (req.method !== 'POST') return json(res, 404, { error: { message: `no route ${req.method} ${path}` } });
    return answerOpenAiPost(req, res, raw, path!);
  });
}

/** The content-filter verdict Azure attaches to prompts and answers. */
const FILTERED = { hate: { filtered: false, severity: 'safe' }, violence: { filtered: false, severity: 'safe' } };

/**
 * A POST of OpenAI's API, `path` in its `/v1/...` form. `azure`: answered as Azure OpenAI does (its
 * deployment, when the path named one, is the model; its streams open with a chunk of empty choices and
 * the prompt's filter results, and carry content-filter chunks whose choices have no delta).
 */
export async function answerOpenAiPost(
  req: IncomingMessage,
  res: ServerResponse,
  raw: string,
  path: string,
  azure?: { deployment: string | undefined },
): Promise<void> {
  const body = raw ? (JSON.parse(raw) as Record<string, any>) : {};
  const u = usageOf(req);
  const model = `${azure?.deployment ?? body.model ?? 'fake-model'}-2026-01-01`;
  const words = wordsOf(req, u.output);
  const fault = req.headers['x-fake-fault'];
  if (fault === 'reset' && !body.stream) {
    res.socket?.destroy();
    return;
  }
  const audio = typeof req.headers['x-fake-audio'] === 'string' ? req.headers['x-fake-audio'].split(',').map(Number) : undefined;
  const chatUsage = {
    prompt_tokens: u.input,
    completion_tokens: u.output,
    total_tokens: u.input + u.output,
    prompt_tokens_details: { cached_tokens: u.cached, ...(audio ? { audio_tokens: audio[0] } : {}) },
    // x-fake-reasoning: n of the output tokens were reasoning; x-fake-audio: of the input and the output, audio tokens.
    ...(req.headers['x-fake-reasoning'] || audio
      ? {
          completion_tokens_details: {
            ...(req.headers['x-fake-reasoning'] ? { reasoning_tokens: Number(req.headers['x-fake-reasoning']) } : {}),
            ...(audio ? { audio_tokens: audio[1] } : {}),
          },
        }
      : {}),
  };
  if (path === '/v1/embeddings') {
    return json(res, 200, {
      object: 'list',
      data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2, 0.3] }],
      model,
      usage: { prompt_tokens: u.input, total_tokens: u.input },
    });
  }
  if (path === '/v1/chat/completions' || path === '/v1/completions') {
    const chat = path === '/v1/chat/completions';
    const id = `cmpl-${answerNumber()}`;
    if (!body.stream) {
      const delay = jsonDelayOf(req);
      if (delay) await sleep(delay);
      const completion = {
        id,
        object: chat ? 'chat.completion' : 'text_completion',
        created: 1_700_000_000,
        model,
        choices: [
          chat
            ? { index: 0, message: { role: 'assistant', content: words.join(' ') }, finish_reason: 'stop' }
            : { index: 0, text: words.join(' '), finish_reason: 'stop' },
        ],
        usage: chatUsage,
      };
      return fault === 'gzip' ? gzipped(res, 'application/json', JSON.stringify(completion)) : json(res, 200, completion);
    }
    const includeUsage = body.stream_options?.include_usage === true;
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({
        id,
        object: chat ? 'chat.completion.chunk' : 'text_completion',
        created: 1_700_000_000,
        model,
        choices,
        ...(includeUsage ? { usage: null } : {}),
        ...extra,
      })}\n\n`;
    const events = [
      chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]),
      ...words.map((w, i) => chunk([{ index: 0, delta: { content: (i ? ' ' : '') + w }, finish_reason: null }])),
      chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]),
    ];
    if (azure) {
      const filtered = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        `data: ${JSON.stringify({ choices, created: 0, id: '', model: '', object: '', ...extra })}\n\n`;
      events.unshift(filtered([], { prompt_filter_results: [{ prompt_index: 0, content_filter_results: FILTERED }] }));
      events.splice(
        events.length - 1,
        0,
        filtered([
          { index: 0, finish_reason: null, content_filter_offsets: { start_offset: 0, end_offset: 9 }, content_filter_results: FILTERED },
        ]),
      );
    }
    if (fault === 'malformed') {
      events.push('data: {"id":"broken", "choices": [\n\n', 'data: {"usage": {"prompt_tokens": 1\n\n');
    } else if (includeUsage) {
      events.push(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [], usage: chatUsage })}\n\n`,
      );
    }
    events.push('data: [DONE]\n\n');
    return stream(req, res, events);
  }
  if (path === '/v1/responses/compact') {
    // The Responses API's compaction: the user's messages and one encrypted compaction item, with its usage
    // (x-fake-reasoning: n of the output tokens were reasoning).
    return json(res, 200, {
      id: `resp_${answerNumber()}`,
      object: 'response.compaction',
      created_at: 1_700_000_000,
      output: [
        { type: 'message', id: 'msg_0', status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'Hello there' }] },
        { type: 'compaction', id: 'cmp_1', encrypted_content: 'gAAAA-fake-compaction' },
      ],
      usage: {
        input_tokens: u.input,
        input_tokens_details: { cached_tokens: u.cached },
        output_tokens: u.output,
        output_tokens_details: { reasoning_tokens: Number(req.headers['x-fake-reasoning'] ?? 0) },
        total_tokens: u.input + u.output,
      },
    });
  }
  if (path === '/v1/responses') {
    const usage = {
      input_tokens: u.input,
      input_tokens_details: { cached_tokens: u.cached },
      output_tokens: u.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: u.input + u.output,
    };
    const response = {
      id: req.headers['x-fake-response-id'] ? (JSON.parse(String(req.headers['x-fake-response-id'])) as string) : `resp_${answerNumber()}`,
      object: 'response',
      created_at: 1_700_000_000,
      status: 'completed',
      model,
      output: [
        {
          type: 'message',
          id: 'msg_1',
          status: 'completed',
          role: 'assistant',
          content: [{ type: 'output_text', text: words.join(' '), annotations: [] }],
        },
      ],
      usage,
    };
    if (!body.stream) return json(res, 200, response);
    let sequence = 0;
    const ev = (type: string, data: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`;
    return stream(req, res, [
      ev('response.created', { response: { ...response, status: 'in_progress', output: [], usage: null } }),
      ev('response.output_item.added', {
        output_index: 0,
        item: { type: 'message', id: 'msg_1', status: 'in_progress', role: 'assistant', content: [] },
      }),
      ev('response.content_part.added', {
        item_id: 'msg_1',
        output_index: 0,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      }),
      ...words.map((w, i) =>
        ev('response.output_text.delta', { item_id: 'msg_1', output_index: 0, content_index: 0, delta: (i ? ' ' : '') + w }),
      ),
      ev('response.completed', { response }),
    ]);
  }
  return json(res, 404, { error: { message: `no route POST ${path}` } });
}

/** The fixed upstream's answers: a chat completion as JSON, and as the SSE events of a stream with usage. */
export function fixedOpenAiAnswers(): { answer: string; events: string } {
  const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 0 } };
  const base = { id: 'chatcmpl-fixed', created: 1_700_000_000, model: 'fake-model-2026-01-01' };
  const words = ['alpha', ' beta', ' gamma', ' delta', ' epsilon'];
  const answer = JSON.stringify({
    ...base,
    object: 'chat.completion',
    choices: [{ index: 0, message: { role: 'assistant', content: words.join('') }, finish_reason: 'stop' }],
    usage,
  });
  const chunk = (choices: unknown[], extra: object = {}) =>
    `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, usage: null, ...extra })}\n\n`;
  const events =
    chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]) +
    words.map((w) => chunk([{ index: 0, delta: { content: w }, finish_reason: null }])).join('') +
    chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]) +
    chunk([], { usage }) +
    'data: [DONE]\n\n';
  return { answer, events };
}

/**
 * The OpenAI-style upstream at its cheapest (serveFixed): one chat completion made here, the default
 * usage (10 input, 5 output tokens), answered to every request, JSON or SSE with its usage chunk.
 */
export function startFixedOpenAiUpstream(): Promise<FakeUpstream> {
  const { answer, events } = fixedOpenAiAnswers();
  return serveFixed(answer, events);
}

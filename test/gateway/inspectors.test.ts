/** Pure rules of the usage inspectors and the path check, without I/O. */
import { describe, expect, it } from 'vitest';
import {
  filterModelList,
  freeEndpointFor,
  INLINE_IMAGE_TOKEN_BOUND,
  inspectorFor,
  prepareCall,
  usageFromJson,
} from '../../src/protocols/inspectors.js';
import { BASE_TOKENS, STRUCTURE_TOKENS } from '../../src/protocols/input-estimate.js';
import { SseMeter } from '../../src/gateway/sse-meter.js';
import { parseGatewayUrl } from '../../src/gateway/path-safety.js';

const chat = inspectorFor('openai', 'POST', 'v1/chat/completions')!;
const messages = inspectorFor('anthropic', 'POST', 'v1/messages')!;
/** A strategy capping output at 100 tokens and refusing a request above it. */
const CAPS = { maxOutputTokens: 100, clamp: false };

/** Feeds the stream in chunks of `size` bytes (splitting events and characters anywhere). */
function feed(meter: SseMeter, text: string, size: number): string {
  const bytes = Buffer.from(text, 'utf8');
  let out = '';
  for (let i = 0; i < bytes.length; i += size) out += meter.push(bytes.subarray(i, i + size)).toString();
  return out + meter.end().toString();
}

const usage = { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14, prompt_tokens_details: { cached_tokens: 4 } };
const openAiStream =
  `data: {"id":"c","model":"gpt-x","choices":[{"index":0,"delta":{"content":"héllo 世界"}}],"usage":null}\n\n` +
  `data: {"id":"c","model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n\n` +
  `data: {"id":"c","model":"gpt-x","choices":[],"usage":${JSON.stringify(usage)}}\n\n` +
  'data: [DONE]\n\n';

describe('output cap policy', () => {
  const CLAMP = { maxOutputTokens: 100, clamp: true };
  const responses = inspectorFor('openai', 'POST', 'v1/responses')!;

  it('clamp lowers every cap above maxOutputTokens, bounds the call by it, and says what was asked', () => {
    const p = prepareCall(chat, Buffer.from('{"model":"m","max_completion_tokens":5000,"max_tokens":300,"n":2}'), CLAMP);
    expect(JSON.parse(p.body.toString())).toMatchObject({ max_completion_tokens: 100, max_tokens: 100 });
    expect(p.outputCap).toEqual({ sent: 100, requested: 5000 });
    expect(p.outputBound).toBe(200n);
    const r = prepareCall(responses, Buffer.from('{"model":"m","max_output_tokens":101}'), CLAMP);
    expect(JSON.parse(r.body.toString()).max_output_tokens).toBe(100);
    const m = prepareCall(messages, Buffer.from('{"model":"m","max_tokens":64000,"messages":[]}'), CLAMP);
    expect(m).toMatchObject({ outputBound: 100n, outputCap: { sent: 100, requested: 64000 } });
  });

  it('a cap within maxOutputTokens is left as sent, byte for byte', () => {
    const raw = Buffer.from('{"model":"m","max_tokens":100,"messages":[]}');
    const p = prepareCall(messages, raw, CLAMP);
    expect(p.body).toBe(raw);
    expect(p.outputCap).toBeUndefined();
  });

  it('refuse answers 400 max_tokens_exceeded naming the cap', () => {
    expect(() => prepareCall(messages, Buffer.from('{"max_tokens":101}'), CAPS)).toThrow(/max_tokens may be at most 100/);
  });
});

describe('free endpoints', () => {
  it('are the model list, one model and anthropic token counting', () => {
    expect(freeEndpointFor('openai', 'GET', 'v1/models')).toEqual({ kind: 'models' });
    expect(freeEndpointFor('anthropic', 'GET', 'models')).toEqual({ kind: 'models' });
    expect(freeEndpointFor('openai', 'GET', 'v1/models/meta-llama/Llama-3.1-8B')).toEqual({
      kind: 'model',
      model: 'meta-llama/Llama-3.1-8B',
    });
    expect(freeEndpointFor('anthropic', 'POST', 'v1/messages/count_tokens')).toEqual({ kind: 'count_tokens' });
    expect(freeEndpointFor('openai', 'POST', 'v1/messages/count_tokens')).toBeUndefined();
    expect(freeEndpointFor('openai', 'POST', 'v1/models')).toBeUndefined();
    expect(freeEndpointFor('openai', 'DELETE', 'v1/models/ft:gpt-4o:org::x')).toBeUndefined();
    expect(freeEndpointFor('openai', 'GET', 'v1/files')).toBeUndefined();
    expect(freeEndpointFor('openai', 'GET', 'v1/fine_tuning/jobs/x/models')).toBeUndefined();
  });

  it('a model list keeps the allowed models; what is not a list passes as it is', () => {
    const allows = (m: string) => m.startsWith('claude-');
    const list = {
      data: [{ id: 'gpt-4o' }, { id: 'claude-a' }, { id: 'claude-b' }, { nope: 1 }],
      first_id: 'gpt-4o',
      last_id: 'x',
      has_more: true,
    };
    expect(JSON.parse(filterModelList(JSON.stringify(list), allows))).toEqual({
      data: [{ id: 'claude-a' }, { id: 'claude-b' }],
      first_id: 'claude-a',
      last_id: 'claude-b',
      has_more: true,
    });
    expect(JSON.parse(filterModelList('{"object":"list","data":[{"id":"gpt-4o"}]}', allows))).toEqual({ object: 'list', data: [] });
    expect(filterModelList('not json', allows)).toBe('not json');
    expect(filterModelList('{"error":{"message":"x"}}', allows)).toBe('{"error":{"message":"x"}}');
  });
});

describe('inspectors', () => {
  it('meters only the metered endpoints of each profile', () => {
    expect(inspectorFor('openai', 'POST', 'v1/embeddings')?.endpoint).toBe('embeddings');
    expect(inspectorFor('openai', 'POST', 'v1/responses')?.endpoint).toBe('responses');
    expect(inspectorFor('openai', 'POST', 'completions')?.endpoint).toBe('completions');
    expect(inspectorFor('openai', 'GET', 'v1/models')).toBeUndefined();
    expect(inspectorFor('anthropic', 'POST', 'v1/messages/count_tokens')).toBeUndefined();
    expect(inspectorFor('anthropic', 'POST', 'v1/chat/completions')).toBeUndefined();
  });

  it('bounds a call: the estimate of its text for input (never above its bytes), max tokens times n for output; asks a stream for usage', () => {
    const raw = Buffer.from(JSON.stringify({ model: 'm', messages: [], max_tokens: 7, n: 3, stream: true }));
    const p = prepareCall(chat, raw, CAPS);
    // No text: the call's fixed allowance and the empty list's structure (input-estimate.ts).
    expect(p).toMatchObject({
      requestedModel: 'm',
      stream: true,
      inputBound: BigInt(BASE_TOKENS + STRUCTURE_TOKENS),
      outputBound: 21n,
      usageInjected: true,
    });
    expect(JSON.parse(p.body.toString()).stream_options).toEqual({ include_usage: true });
    // A body smaller than its estimate is bounded by its bytes.
    expect(prepareCall(chat, Buffer.from('{"messages":[]}'), CAPS).inputBound).toBe(15n);
    const asked = Buffer.from(JSON.stringify({ model: 'm', max_tokens: 50, stream: true, stream_options: { include_usage: true } }));
    expect(prepareCall(chat, asked, CAPS)).toMatchObject({ usageInjected: false, outputBound: 50n });
    expect(prepareCall(chat, asked, CAPS).body).toBe(asked);
    expect(() => prepareCall(chat, Buffer.from('{"max_completion_tokens":101}'), CAPS)).toThrow(/at most 100/);
    expect(() => prepareCall(messages, Buffer.from('[1]'), CAPS)).toThrow(/JSON object/);
    expect(() => prepareCall(chat, Buffer.from('{"max_tokens":5,"n":1e20}'), CAPS)).toThrow(/n may be at most 128/);
    expect(() => prepareCall(chat, Buffer.from('{"max_tokens":5,"best_of":129}'), CAPS)).toThrow(/best_of may be at most 128/);
  });

  it('bounds an inline image by what an image may cost, not by its bytes; the same bytes as text stay bytes', () => {
    const data = 'A'.repeat(200_000);
    const url = `data:image/png;base64,${data}`;
    const bound = (inspector: NonNullable<ReturnType<typeof inspectorFor>>, body: unknown) => {
      const raw = Buffer.from(JSON.stringify(body));
      return { bytes: BigInt(raw.length), bound: prepareCall(inspector, raw, CAPS).inputBound };
    };
    const IMAGE = BigInt(INLINE_IMAGE_TOKEN_BOUND);
    /** An image's bound, with the structure around it: at most the body's bytes less the image's excess. */
    const imageBounded = (b: { bytes: bigint; bound: bigint }, excess: bigint) => {
      expect(b.bound).toBeGreaterThanOrEqual(IMAGE);
      expect(b.bound).toBeLessThan(IMAGE + 100n);
      expect(b.bound).toBeLessThanOrEqual(b.bytes - excess);
    };
    const excess = BigInt(url.length - INLINE_IMAGE_TOKEN_BOUND);
    imageBounded(
      bound(chat, {
        model: 'm',
        max_tokens: 5,
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url, detail: 'high' } }] }],
      }),
      excess,
    );
    // Pasted into a message as text, inline data is not tokenized: its bytes bound it.
    const pasted = bound(chat, { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'text', text: url }] }] });
    expect(pasted.bound).toBeGreaterThanOrEqual(BigInt(url.length));
    expect(pasted.bound).toBeLessThanOrEqual(pasted.bytes);
    const responses = inspectorFor('openai', 'POST', 'v1/responses')!;
    imageBounded(
      bound(responses, { model: 'm', max_output_tokens: 5, input: [{ role: 'user', content: [{ type: 'input_image', image_url: url }] }] }),
      excess,
    );
    const messages = inspectorFor('anthropic', 'POST', 'v1/messages')!;
    const source = { type: 'base64', media_type: 'image/jpeg', data };
    imageBounded(
      bound(messages, { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source }] }] }),
      BigInt(data.length - INLINE_IMAGE_TOKEN_BOUND),
    );
    // A PDF's pages are text and pictures: its bytes stay its bound. So does a small image.
    const pdf = bound(messages, {
      model: 'm',
      max_tokens: 5,
      messages: [{ role: 'user', content: [{ type: 'document', source: { ...source, media_type: 'application/pdf' } }] }],
    });
    expect(pdf.bound).toBeGreaterThanOrEqual(BigInt(data.length));
    expect(pdf.bound).toBeLessThanOrEqual(pdf.bytes);
    const small = bound(chat, {
      model: 'm',
      max_tokens: 5,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }],
    });
    expect(small.bound).toBeGreaterThanOrEqual(4n);
    expect(small.bound).toBeLessThanOrEqual(small.bytes);
  });

  it("drops an inline image's excess from the body's bytes when the bytes are the smaller bound (one walk finds it for both)", () => {
    const url = `data:image/png;base64,${'A'.repeat(200_000)}`;
    const excess = url.length - INLINE_IMAGE_TOKEN_BOUND;
    // Empty tool entries: 3 bytes each, 4 tokens of structure each to the estimate, so the bytes bound the call.
    const padding = Array.from({ length: 5000 }, () => []);
    const image = { type: 'image_url', image_url: { url } };
    const body = { model: 'gpt-4o', max_tokens: 5, messages: [{ role: 'user', content: [image] }], tools: padding };
    const raw = Buffer.from(JSON.stringify(body));
    expect(prepareCall(chat, raw, CAPS).inputBound).toBe(BigInt(raw.length - excess));
    // Two images: both excesses.
    const two = Buffer.from(JSON.stringify({ ...body, messages: [{ role: 'user', content: [image, image] }] }));
    expect(prepareCall(chat, two, CAPS).inputBound).toBe(BigInt(two.length - 2 * excess));
    // An image where no input goes (a field the endpoint does not list) keeps its bytes in both bounds.
    const elsewhere = Buffer.from(JSON.stringify({ ...body, messages: [{ role: 'user', content: 'Hi' }], extra: [image] }));
    expect(prepareCall(chat, elsewhere, CAPS).inputBound).toBe(BigInt(elsewhere.length));
  });

  it("caps a request that sets no output limit at the plan's maxOutputTokens, as its endpoint names the cap", () => {
    const cases: [typeof chat, string][] = [
      [chat, 'max_completion_tokens'],
      [inspectorFor('openai', 'POST', 'v1/completions')!, 'max_tokens'],
      [inspectorFor('openai', 'POST', 'v1/responses')!, 'max_output_tokens'],
      [messages, 'max_tokens'],
    ];
    for (const [inspector, param] of cases) {
      const p = prepareCall(inspector, Buffer.from('{"model":"m","n":2}'), CAPS);
      expect(JSON.parse(p.body.toString()), param).toEqual({ model: 'm', n: 2, [param]: 100 });
      expect(p.outputBound).toBe(200n);
    }
    const embeddings = inspectorFor('openai', 'POST', 'v1/embeddings')!;
    const raw = Buffer.from('{"model":"e","input":"x"}');
    expect(prepareCall(embeddings, raw, CAPS).body).toBe(raw);
  });

  it.each([1, 3, 7, 4096])('reads OpenAI stream usage and removes the injected chunk (chunks of %i bytes)', (size) => {
    const injected = new SseMeter(chat, { usageInjected: true, inputBound: 100n, outputBound: 100n });
    const out = feed(injected, openAiStream, size);
    expect(injected.usage).toEqual({ inputTokens: 11n, cachedInputTokens: 4n, outputTokens: 3n });
    expect(injected.complete).toBe(true);
    expect(injected.model).toBe('gpt-x');
    expect(out).toContain('héllo 世界');
    expect(out).not.toContain('"usage"');
    expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
    const passive = new SseMeter(chat, { usageInjected: false, inputBound: 100n, outputBound: 100n });
    // Forwarded as it came, whole events at a time.
    expect(feed(passive, openAiStream, size)).toBe(openAiStream);
    expect(passive.usage?.outputTokens).toBe(3n);
  });

  it('reads Anthropic usage from message_start and message_delta, cache reads as cached input', () => {
    const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const stream =
      ev('message_start', {
        message: {
          model: 'claude-x',
          usage: { input_tokens: 5, cache_creation_input_tokens: 2, cache_read_input_tokens: 10, output_tokens: 1 },
        },
      }) +
      ev('content_block_delta', { delta: { text: 'hi' } }) +
      ev('message_delta', { usage: { output_tokens: 9 } });
    const meter = new SseMeter(messages, { usageInjected: false, inputBound: 100n, outputBound: 100n });
    feed(meter, stream, 5);
    // The cache writes are input, and counted apart too (priced at a price's cache-write price).
    expect(meter.usage).toEqual({ inputTokens: 17n, cachedInputTokens: 10n, outputTokens: 9n, cacheWriteTokens: 2n });
    expect(meter.complete).toBe(true);
    expect(meter.model).toBe('claude-x');
  });

  it('reads JSON usage of both profiles', () => {
    expect(usageFromJson(chat, JSON.stringify({ model: 'a', usage })).usage).toEqual({
      inputTokens: 11n,
      cachedInputTokens: 4n,
      outputTokens: 3n,
    });
    const responses = inspectorFor('openai', 'POST', 'v1/responses')!;
    expect(
      usageFromJson(responses, JSON.stringify({ usage: { input_tokens: 8, input_tokens_details: { cached_tokens: 2 }, output_tokens: 5 } }))
        .usage,
    ).toEqual({
      inputTokens: 8n,
      cachedInputTokens: 2n,
      outputTokens: 5n,
    });
    expect(usageFromJson(chat, 'not json')).toEqual({ usage: null, model: null, responseId: null });
    // A Responses API answer's id, which a later call may continue; other endpoints' ids are not kept.
    expect(usageFromJson(responses, JSON.stringify({ id: 'resp_1', usage: {} })).responseId).toBe('resp_1');
    expect(usageFromJson(chat, JSON.stringify({ id: 'chatcmpl-1', usage })).responseId).toBeNull();
    expect(usageFromJson(responses, JSON.stringify({ id: 'r'.repeat(257), usage: {} })).responseId).toBeNull();
  });
});

describe('parseGatewayUrl', () => {
  const id = '01900000-0000-7000-8000-000000000000';
  it('keeps the provider path and query exactly as sent', () => {
    expect(parseGatewayUrl(`/providers/${id}/v1/chat/completions?a=1&b=%20`)).toEqual({
      connectionId: id,
      providerPath: 'v1/chat/completions',
      route: 'v1/chat/completions',
      search: '?a=1&b=%20',
    });
    expect(parseGatewayUrl(`/providers/${id}/v1/files/file%20name`).providerPath).toBe('v1/files/file%20name');
  });
  it('meters the path an upstream may route: decoded, without ;parameters or a trailing slash, in any case', () => {
    for (const path of ['v1/chat/%63ompletions', 'v1/chat/completions;x=1', 'v1/chat/completions/', 'v1/chat/%2563ompletions']) {
      const target = parseGatewayUrl(`/providers/${id}/${path}`);
      expect(target.providerPath, path).toBe(path);
      expect(inspectorFor('openai', 'POST', target.route)?.endpoint, path).toBe('chat');
    }
    expect(inspectorFor('openai', 'POST', 'V1/Chat/Completions')?.endpoint).toBe('chat');
    expect(inspectorFor('anthropic', 'POST', parseGatewayUrl(`/providers/${id}/v1/%6Dessages`).route)?.endpoint).toBe('messages');
  });
  it.each(['v1/%2e%2e/x', 'v1/%25%32%65%25%32%65/x', 'v1//x', 'v1/%ZZ', 'javascript:alert(1)', 'v1/%c0%ae%c0%ae/x'])(
    'refuses %s',
    (path) => {
      expect(() => parseGatewayUrl(`/providers/${id}/${path}`)).toThrow();
    },
  );
});

describe('the output bound of a stream', () => {
  const bounds = { usageInjected: false, inputBound: 40n, outputBound: 5n };
  const chunk = (choices: unknown[], extra: object = {}) =>
    `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-x', choices, usage: null, ...extra })}\n\n`;
  const words = (n: number) =>
    Array.from({ length: n }, (_, i) => chunk([{ index: 0, delta: { content: ` w${i}` }, finish_reason: null }])).join('');

  it.each([1, 9, 4096])(
    'cuts a chat stream past its bound: a last chunk with finish_reason length, the usage asked for, [DONE] (chunks of %i bytes)',
    (size) => {
      const meter = new SseMeter(chat, bounds);
      const stream = chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]) + words(50) + 'data: [DONE]\n\n';
      const out = feed(meter, stream, size);
      expect(meter.cut).toBe(true);
      const events = out
        .trim()
        .split('\n\n')
        .map((e) => e.slice(6));
      expect(events.at(-1)).toBe('[DONE]');
      const parsed = events.slice(0, -1).map((e) => JSON.parse(e));
      expect(parsed.filter((e) => e.choices[0]?.delta?.content).map((e) => e.choices[0].delta.content)).toEqual([
        ' w0',
        ' w1',
        ' w2',
        ' w3',
        ' w4',
      ]);
      expect(parsed.at(-2).choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: 'length' }]);
      expect(parsed.at(-1).usage).toEqual({
        prompt_tokens: 40,
        completion_tokens: 5,
        total_tokens: 45,
        prompt_tokens_details: { cached_tokens: 0 },
      });
    },
  );

  it('counts a token per 8 bytes of text when events carry several: one large event is not let through', () => {
    const meter = new SseMeter(chat, { ...bounds, usageInjected: true });
    const out = feed(meter, chunk([{ index: 0, delta: { role: 'assistant', content: 'x'.repeat(41) } }]) + 'data: [DONE]\n\n', 4096);
    expect(meter.cut).toBe(true);
    expect(out).not.toContain('xxxx');
    // The role was not sent: the ending gives it; the usage was not asked for: none.
    expect(JSON.parse(out.split('\n\n')[0]!.slice(6)).choices[0]).toMatchObject({
      delta: { role: 'assistant', content: '' },
      finish_reason: 'length',
    });
    expect(out).not.toContain('usage');
  });

  it.each([1, 9, 4096])(
    'reads a stream the same whether its lines end with a newline or a carriage return and one (chunks of %i bytes)',
    (size) => {
      // Bare newlines are walked by indexOf, a stream with a carriage return by the full pattern: the same events read.
      const stream =
        chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]) +
        'event: x\ndata: {"choices":[{"index":0,"delta":{"content":" two"}}],\ndata: "usage":null}\n\n' +
        'data:{"choices":[{"index":0,"delta":{"content":" w"}}]}\n\n: a comment\n\n\n' +
        words(50) +
        'data: [DONE]\n\n';
      const crlf = stream.replaceAll('\n', '\r\n');
      const lf = new SseMeter(chat, bounds);
      const cr = new SseMeter(chat, bounds);
      const outLf = feed(lf, stream, size);
      const outCr = feed(cr, crlf, size);
      expect(lf.cut).toBe(true);
      expect(cr.cut).toBe(true);
      expect(lf.outputSeen).toBe(cr.outputSeen);
      // What was forwarded before the cut is the stream as it came; the ending (its protocol's) is the same.
      const endingAt = outLf.lastIndexOf('data: ', outLf.indexOf('"finish_reason":"length"'));
      const forwarded = outLf.slice(0, endingAt);
      expect(stream.startsWith(forwarded)).toBe(true);
      expect(outCr).toBe(forwarded.replaceAll('\n', '\r\n') + outLf.slice(endingAt));
      const within = new SseMeter(chat, { ...bounds, outputBound: 100n });
      expect(feed(within, stream, size)).toBe(stream);
      expect(within.outputSeen).toBe(52n);
    },
  );

  it('lets a stream within its bound through unchanged', () => {
    const meter = new SseMeter(chat, bounds);
    const stream = words(5) + chunk([], { usage: { prompt_tokens: 3, completion_tokens: 5 } }) + 'data: [DONE]\n\n';
    expect(feed(meter, stream, 7)).toBe(stream);
    expect(meter.cut).toBe(false);
    expect(meter.outputSeen).toBe(5n);
  });

  it('ends a cut Anthropic stream with its open blocks stopped, stop_reason max_tokens and message_stop', () => {
    const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const stream =
      ev('message_start', { message: { id: 'm', model: 'claude-x', content: [], usage: { input_tokens: 7, output_tokens: 1 } } }) +
      ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
      Array.from({ length: 20 }, (_, i) => ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: ` w${i}` } })).join(
        '',
      ) +
      ev('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 20 } }) +
      ev('message_stop', {});
    const meter = new SseMeter(messages, bounds);
    const out = feed(meter, stream, 13);
    expect(meter.cut).toBe(true);
    expect(meter.usage?.inputTokens).toBe(7n);
    expect(out.match(/content_block_delta/g)).toHaveLength(10); // the event line and its type, for 5 deltas
    expect(
      out.endsWith(
        ev('content_block_stop', { index: 0 }) +
          ev('message_delta', { delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { output_tokens: 5 } }) +
          ev('message_stop', {}),
      ),
    ).toBe(true);
  });
});

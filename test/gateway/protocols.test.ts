/** The protocol tables read without I/O: paths, models named by a path, caps, keys and headers, error shapes. */
import { describe, expect, it } from 'vitest';
import { upstreamSearch } from '../../src/gateway/client-request.js';
import { upstreamHeaders } from '../../src/gateway/headers.js';
import { filterModelList, freeEndpointFor, inspectorFor, prepareCall, usageFromJson } from '../../src/protocols/inspectors.js';
import { SseMeter } from '../../src/gateway/sse-meter.js';
import { CALLER_KEY_HEADERS, foreignProtocolOf, protocolOf } from '../../src/protocols/index.js';
import { FOREIGN } from '../../src/protocols/input-estimate.js';
import { defineProtocol, type PreparedCall } from '../../src/protocols/protocol.js';

const azure = protocolOf('azure-openai');
const caps = { maxOutputTokens: 100, clamp: true };

describe('azure-openai', () => {
  it('meters the classic deployment paths and the v1 paths, and nothing else', () => {
    expect(inspectorFor('azure-openai', 'POST', 'openai/deployments/gpt-4o/chat/completions')?.endpoint).toBe('chat');
    expect(inspectorFor('azure-openai', 'POST', 'openai/deployments/davinci/completions')?.endpoint).toBe('completions');
    expect(inspectorFor('azure-openai', 'POST', 'openai/deployments/emb/embeddings')?.endpoint).toBe('embeddings');
    expect(inspectorFor('azure-openai', 'POST', 'openai/responses')?.endpoint).toBe('responses');
    expect(inspectorFor('azure-openai', 'POST', 'openai/v1/chat/completions')?.endpoint).toBe('chat');
    expect(inspectorFor('azure-openai', 'POST', 'openai/v1/responses')?.endpoint).toBe('responses');
    expect(inspectorFor('azure-openai', 'POST', 'openai/v1/embeddings')?.endpoint).toBe('embeddings');
    expect(inspectorFor('azure-openai', 'POST', 'v1/chat/completions')).toBeUndefined();
    expect(inspectorFor('azure-openai', 'POST', 'openai/deployments/a/b/chat/completions')).toBeUndefined();
  });

  it('keeps the model lists free, and a model of them', () => {
    expect(freeEndpointFor('azure-openai', 'GET', 'openai/models')).toEqual({ kind: 'models' });
    expect(freeEndpointFor('azure-openai', 'GET', 'openai/v1/models')).toEqual({ kind: 'models' });
    expect(freeEndpointFor('azure-openai', 'GET', 'openai/v1/models/gpt-4o')).toEqual({ kind: 'model', model: 'gpt-4o' });
    expect(freeEndpointFor('azure-openai', 'GET', 'v1/models')).toBeUndefined();
  });

  it("names the deployment as the call's model, over the body's", () => {
    expect(azure.routeModel!('openai/deployments/my-gpt/chat/completions')).toBe('my-gpt');
    expect(azure.routeModel!('openai/v1/chat/completions')).toBeUndefined();
    const chat = inspectorFor('azure-openai', 'POST', 'openai/deployments/my-gpt/chat/completions')!;
    const prepared = prepareCall(chat, Buffer.from('{"model":"other","messages":[],"stream":true}'), caps, 'my-gpt');
    expect(prepared.requestedModel).toBe('my-gpt');
    // OpenAI's rules: the stream is asked for its usage, the cap written in.
    expect(prepared.usageInjected).toBe(true);
    expect(JSON.parse(prepared.body.toString())).toMatchObject({ max_completion_tokens: 100, stream_options: { include_usage: true } });
  });

  it('sends the key as api-key, and drops every credential a caller may send', () => {
    const raw = ['Authorization', 'Bearer caller', 'x-api-key', 'caller', 'api-key', 'caller', 'OpenAI-Organization', 'org', 'x-keep', '1'];
    expect(upstreamHeaders(raw, azure, 'upstream-key', 0)).toEqual([
      'x-keep',
      '1',
      'api-key',
      'upstream-key',
      'accept-encoding',
      'identity',
    ]);
    expect(CALLER_KEY_HEADERS).toEqual(['authorization', 'x-api-key', 'api-key', 'x-goog-api-key']);
  });
});

describe('gemini', () => {
  const generate = inspectorFor('gemini', 'POST', 'v1beta/models/gemini-2.5-flash:generateContent')!;
  const streamed = inspectorFor('gemini', 'POST', 'v1beta/models/gemini-2.5-flash:streamGenerateContent')!;

  it('meters generate, stream and embeddings by the path, which names the model; counts tokens and lists models for free', () => {
    expect(generate.endpoint).toBe('generate');
    expect(streamed.endpoint).toBe('stream_generate');
    expect(inspectorFor('gemini', 'POST', 'v1/models/m:embedContent')?.endpoint).toBe('embed');
    expect(inspectorFor('gemini', 'POST', 'v1beta/models/m:batchEmbedContents')?.endpoint).toBe('embed');
    expect(inspectorFor('gemini', 'POST', 'v1beta/models/m:countTokens')).toBeUndefined();
    expect(freeEndpointFor('gemini', 'POST', 'v1beta/models/m:countTokens')).toEqual({ kind: 'model', model: 'm' });
    expect(freeEndpointFor('gemini', 'GET', 'v1beta/models')).toEqual({ kind: 'models' });
    expect(freeEndpointFor('gemini', 'GET', 'v1beta/models/m')).toEqual({ kind: 'model', model: 'm' });
    expect(protocolOf('gemini').routeModel!('v1beta/models/gemini-2.5-flash:generateContent')).toBe('gemini-2.5-flash');
  });

  it('bounds output by generationConfig.maxOutputTokens times candidateCount, written in or lowered to the plan', () => {
    const none = prepareCall(generate, Buffer.from('{"contents":[]}'), caps, 'm');
    expect(JSON.parse(none.body.toString())).toEqual({ contents: [], generationConfig: { maxOutputTokens: 100 } });
    expect(none.stream).toBe(false);
    const many = prepareCall(streamed, Buffer.from('{"generationConfig":{"maxOutputTokens":500,"candidateCount":3}}'), caps, 'm');
    expect(many).toMatchObject({ stream: true, outputBound: 300n, outputCap: { sent: 100, requested: 500 } });
    expect(() => prepareCall(generate, Buffer.from('{"generationConfig":7}'), caps, 'm')).toThrow(/generationConfig must be an object/);
  });

  it('refuses a stream that is not SSE', () => {
    expect(() => protocolOf('gemini').checkRequest!('stream_generate', '', 'v1beta/models/m:streamGenerateContent')).toThrow(/alt=sse/);
    expect(() => protocolOf('gemini').checkRequest!('stream_generate', '?alt=sse', 'v1beta/models/m:streamGenerateContent')).not.toThrow();
    expect(() => protocolOf('gemini').checkRequest!('generate', '', 'v1beta/models/m:generateContent')).not.toThrow();
  });

  it('reads usageMetadata: thinking tokens are output, a stream keeps its last running total', () => {
    const body = JSON.stringify({
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, thoughtsTokenCount: 2, cachedContentTokenCount: 4 },
      modelVersion: 'gemini-x-001',
    });
    expect(usageFromJson(generate, body)).toEqual({
      usage: { inputTokens: 10n, cachedInputTokens: 4n, outputTokens: 7n, reasoningTokens: 2n },
      model: 'gemini-x-001',
      responseId: null,
    });
    const meter = new SseMeter(streamed, { usageInjected: false, inputBound: 100n, outputBound: 100n });
    const event = (o: object) => Buffer.from(`data: ${JSON.stringify(o)}\r\n\r\n`);
    meter.push(
      event({ candidates: [{ content: { parts: [{ text: 'a' }] } }], usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 1 } }),
    );
    meter.push(event({ candidates: [{ content: { parts: [{ text: 'b' }] } }] }));
    expect(meter.usage).toEqual({ inputTokens: 10n, cachedInputTokens: 0n, outputTokens: 1n });
    expect(meter.complete).toBe(false);
    meter.push(event({ candidates: [{ finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 3 } }));
    expect(meter).toMatchObject({ complete: true, usage: { outputTokens: 3n } });
  });

  it('filters its model list by models[].name', () => {
    const list = JSON.stringify({ models: [{ name: 'models/a' }, { name: 'models/b' }], nextPageToken: 'x' });
    expect(JSON.parse(filterModelList(list, (m) => m === 'b', protocolOf('gemini').modelList))).toEqual({
      models: [{ name: 'models/b' }],
      nextPageToken: 'x',
    });
  });

  it('never forwards a key sent in the query string', () => {
    expect(upstreamSearch('?key=abc&alt=sse')).toBe('?alt=sse');
    expect(upstreamSearch('?alt=sse&%6Bey=abc')).toBe('?alt=sse');
    expect(upstreamSearch('?key=abc')).toBe('');
    expect(upstreamSearch('?monkey=1')).toBe('?monkey=1');
    expect(upstreamSearch('')).toBe('');
  });
});

describe('the output a stream cut short is charged for', () => {
  const bounds = { usageInjected: false, inputBound: 100n, outputBound: 100n };
  const sse = (events: object[]) => Buffer.from(events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join(''));
  const estimate = (route: string, profile: 'openai' | 'anthropic' | 'gemini', events: object[]) => {
    const meter = new SseMeter(inspectorFor(profile, 'POST', route)!, bounds);
    meter.push(sse(events));
    return meter.outputEstimate;
  };

  it('counts one token per event carrying output, none for the events around it', () => {
    expect(
      estimate('v1/messages', 'anthropic', [
        { type: 'message_start', message: { usage: { input_tokens: 5, output_tokens: 1 } } },
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'ping' },
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'a' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'b' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '' } },
        { type: 'content_block_stop', index: 0 },
      ]),
    ).toBe(2n);
    expect(
      estimate('v1/chat/completions', 'openai', [
        { choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] },
        { choices: [{ index: 0, delta: { content: 'a' } }] },
        { choices: [{ index: 0, delta: {}, finish_reason: null }] },
      ]),
    ).toBe(1n);
  });

  it('counts output that is not text: audio deltas, inline data', () => {
    expect(
      estimate('v1/chat/completions', 'openai', [
        { choices: [{ index: 0, delta: { role: 'assistant' } }] },
        { choices: [{ index: 0, delta: { audio: { id: 'a', data: 'AAAA' } } }] },
        { choices: [{ index: 0, delta: { audio: { id: 'a', data: 'BBBB', transcript: 'hi' } } }] },
      ]),
    ).toBe(2n);
    expect(
      estimate('v1/responses', 'openai', [
        { type: 'response.created', response: { id: 'r' } },
        { type: 'response.audio.delta', delta: 'AAAA' },
        { type: 'response.audio.transcript.delta', delta: 'hi' },
      ]),
    ).toBe(1n);
    expect(
      estimate('v1beta/models/g:streamGenerateContent', 'gemini', [
        { candidates: [{ content: { parts: [{ inlineData: { mimeType: 'image/png', data: 'AAAA' } }] } }] },
        { candidates: [{ content: { parts: [{ text: 'a' }] } }] },
      ]),
    ).toBe(2n);
  });
});

describe('the tables together', () => {
  it("finds the protocol whose path a call names on another's connection", () => {
    expect(foreignProtocolOf(protocolOf('openai'), 'POST', 'v1/messages')?.profile).toBe('anthropic');
    expect(foreignProtocolOf(protocolOf('openai'), 'POST', 'v1/messages/count_tokens')?.profile).toBe('anthropic');
    expect(foreignProtocolOf(protocolOf('anthropic'), 'POST', 'v1/chat/completions')?.profile).toBe('openai');
    expect(foreignProtocolOf(protocolOf('azure-openai'), 'POST', 'v1/embeddings')?.profile).toBe('openai');
    expect(foreignProtocolOf(protocolOf('openai'), 'POST', 'v1/files')).toBeUndefined();
    expect(foreignProtocolOf(protocolOf('anthropic'), 'GET', 'v1/files')).toBeUndefined();
  });

  it('says what each meters, for a person', () => {
    const media =
      'images/generations, images/edits, images/variations, audio/speech, audio/transcriptions, audio/translations, moderations';
    expect(protocolOf('openai').meters).toBe(`chat/completions, completions, embeddings, responses, responses/compact, ${media}`);
    expect(protocolOf('anthropic').meters).toBe('messages');
    expect(azure.meters).toBe(`chat/completions, completions, embeddings, responses, responses/compact, ${media}`);
  });

  it("shapes the gateway's refusals as Anthropic's and Google's errors, and leaves the others the shared body", () => {
    const shared = { error: { message: 'no', type: 'quota_exceeded_error', code: 'quota_insufficient', param: null, request_id: 'r1' } };
    expect(protocolOf('anthropic').errorShape!.body(shared)).toEqual({
      type: 'error',
      error: { message: 'no', type: 'rate_limit_error', code: 'quota_insufficient', param: null, request_id: 'r1' },
    });
    expect(protocolOf('anthropic').errorShape!.requestIdHeader).toBe('request-id');
    expect(protocolOf('gemini').errorShape!.body(shared)).toEqual({ error: { ...shared.error, status: 'RESOURCE_EXHAUSTED' } });
    expect(protocolOf('openai').errorShape).toBeUndefined();
    expect(azure.errorShape).toBeUndefined();
  });
});

describe('what a table declares beyond its paths', () => {
  it('passes back the answer headers of its own API, and those every answer keeps', () => {
    const back = (profile: 'openai' | 'anthropic' | 'azure-openai' | 'gemini' | 'bedrock') => protocolOf(profile).passedBack;
    for (const profile of ['openai', 'anthropic', 'azure-openai', 'gemini', 'bedrock'] as const) {
      for (const name of ['content-type', 'x-request-id', 'retry-after', 'retry-after-ms']) expect(back(profile).has(name)).toBe(true);
    }
    expect(back('openai').has('openai-processing-ms')).toBe(true);
    expect(back('azure-openai').has('openai-processing-ms')).toBe(true);
    expect(back('anthropic').has('openai-processing-ms')).toBe(false);
    expect(back('anthropic').has('request-id')).toBe(true);
    expect(back('openai').has('request-id')).toBe(false);
    expect(back('bedrock').has('x-amzn-errortype')).toBe(true);
    expect(back('gemini').has('x-amzn-errortype')).toBe(false);
  });

  it('continues a stored Responses API answer on the responses endpoint only, OpenAI and Azure alike', () => {
    for (const [profile, route] of [
      ['openai', 'v1/responses'],
      ['azure-openai', 'openai/v1/responses'],
    ] as const) {
      const responses = inspectorFor(profile, 'POST', route)!;
      const prepared = prepareCall(responses, Buffer.from('{"model":"m","input":"hi","previous_response_id":"resp_1"}'), caps);
      expect(prepared.previousResponseId).toBe('resp_1');
      expect(usageFromJson(responses, '{"id":"resp_2","model":"m","usage":{"input_tokens":3,"output_tokens":1}}').responseId).toBe(
        'resp_2',
      );
    }
    const chat = inspectorFor('openai', 'POST', 'v1/chat/completions')!;
    expect(
      prepareCall(chat, Buffer.from('{"model":"m","messages":[],"previous_response_id":"resp_1"}'), caps).previousResponseId,
    ).toBeNull();
    expect(usageFromJson(chat, '{"id":"chatcmpl-1","model":"m"}').responseId).toBeNull();
  });

  it("meters the Responses API's compaction, OpenAI and Azure alike: its output bounded by the plan's cap, which it is not sent", () => {
    for (const [profile, route] of [
      ['openai', 'v1/responses/compact'],
      ['azure-openai', 'openai/v1/responses/compact'],
      ['azure-openai', 'openai/responses/compact'],
    ] as const) {
      const compact = inspectorFor(profile, 'POST', route)!;
      expect(compact).toMatchObject({ endpoint: 'responses_compact', label: 'responses/compact', operation: 'chat' });
      const raw = Buffer.from('{"model":"gpt-5.1-codex-max","input":"hi","previous_response_id":"resp_1"}');
      const prepared = prepareCall(compact, raw, caps);
      // No cap field is written (the API takes none): the body goes as it came, bounded at maxOutputTokens.
      expect(prepared).toMatchObject({ body: raw, outputBound: 100n, outputCeiling: 100n, outputCap: undefined, stream: false });
      expect(prepared.previousResponseId).toBe('resp_1');
      const answer = {
        id: 'resp_2',
        object: 'response.compaction',
        usage: {
          input_tokens: 9,
          input_tokens_details: { cached_tokens: 4 },
          output_tokens: 5,
          output_tokens_details: { reasoning_tokens: 2 },
        },
      };
      expect(usageFromJson(compact, JSON.stringify(answer))).toEqual({
        usage: { inputTokens: 9n, cachedInputTokens: 4n, outputTokens: 5n, reasoningTokens: 2n },
        model: null,
        responseId: 'resp_2',
      });
    }
    expect(inspectorFor('openai', 'POST', 'v1/responses/resp_1/compact')).toBeUndefined();
    expect(inspectorFor('anthropic', 'POST', 'v1/responses/compact')).toBeUndefined();
  });

  it("takes another protocol's bodies where it says so: an Azure target of an OpenAI route, under openai/, naming deployments", () => {
    expect(azure).toMatchObject({ bodyShape: 'openai', shapePrefix: 'openai/', namesDeployments: true });
    for (const profile of ['openai', 'anthropic', 'gemini', 'bedrock'] as const) {
      const protocol = protocolOf(profile);
      expect([protocol.bodyShape, protocol.shapePrefix, protocol.namesDeployments ?? false]).toEqual([profile, undefined, false]);
    }
  });

  it("reads an endpoint's request itself when the endpoint says how (a body that is not JSON capped by its fields)", () => {
    const read: PreparedCall = {
      requestedModel: 'tts-1',
      stream: false,
      body: Buffer.from('sent'),
      inputBound: 7n,
      outputBound: 11n,
      outputCeiling: 11n,
      usageInjected: false,
      previousResponseId: null,
      outputCap: undefined,
    };
    const seen: unknown[] = [];
    const speech = defineProtocol({
      ...protocolOf('openai'),
      metered: [[/(^|\/)audio\/speech$/i, 'speech']],
      endpoints: {
        speech: {
          label: 'audio/speech',
          operation: 'speech',
          capFields: [],
          input: () => FOREIGN,
          stream: () => {
            throw new Error('not streamed');
          },
          read: (raw, given, routeModel) => {
            seen.push([raw.toString(), given, routeModel]);
            return read;
          },
        },
      },
    });
    const inspector = speech.inspectorFor('POST', 'v1/audio/speech')!;
    expect(inspector).toMatchObject({ endpoint: 'speech', label: 'audio/speech', choiceFields: ['n', 'best_of'], streamed: false });
    expect(speech.meters).toBe('audio/speech');
    expect(prepareCall(inspector, Buffer.from('not json'), caps, 'route-model')).toBe(read);
    expect(seen).toEqual([['not json', caps, 'route-model']]);
  });
});

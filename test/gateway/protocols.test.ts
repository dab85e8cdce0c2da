/** The protocol tables read without I/O: paths, models named by a path, caps, keys and headers, error shapes. */
import { describe, expect, it } from 'vitest';
import { upstreamHeaders } from '../../src/gateway/headers.js';
import { freeEndpointFor, inspectorFor, prepareCall } from '../../src/gateway/inspectors.js';
import { CALLER_KEY_HEADERS, foreignProtocolOf, protocolOf } from '../../src/gateway/protocols/index.js';

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
    expect(CALLER_KEY_HEADERS).toEqual(['authorization', 'x-api-key', 'api-key']);
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
    expect(protocolOf('openai').meters).toBe('chat/completions, completions, embeddings, responses');
    expect(protocolOf('anthropic').meters).toBe('messages');
    expect(azure.meters).toBe('chat/completions, completions, embeddings, responses');
  });

  it("shapes the gateway's refusals as Anthropic's error, and leaves the others the shared body", () => {
    const shared = { error: { message: 'no', type: 'quota_exceeded_error', code: 'quota_insufficient', param: null, request_id: 'r1' } };
    expect(protocolOf('anthropic').errorShape!.body(shared)).toEqual({
      type: 'error',
      error: { message: 'no', type: 'rate_limit_error', code: 'quota_insufficient', param: null, request_id: 'r1' },
    });
    expect(protocolOf('anthropic').errorShape!.requestIdHeader).toBe('request-id');
    expect(protocolOf('openai').errorShape).toBeUndefined();
    expect(azure.errorShape).toBeUndefined();
  });
});

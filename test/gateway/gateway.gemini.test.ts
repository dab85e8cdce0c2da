/**
 * The gemini profile beyond the rules every protocol shares (gateway.protocols.test.ts), through
 * `@google/genai` pointed at the gateway: thinking and cached tokens, embeddings, token counting, a
 * blocked prompt, a stream asked for without SSE, the ways a caller may send its key, and the probe.
 */
import { GoogleGenAI } from '@google/genai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGeminiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { createWorkspace, testProviderConnection } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, invocationByRequestId, periodOf, type Tenant } from './gateway-support.js';

const KEY = testProviderKey('gemini');
let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;

beforeAll(async () => {
  t = await startTestApp();
  up = await startGeminiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, profile: 'gemini', allowedModels: ['gpt-4o', 'fake-model'] });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const ai = (headers: Record<string, string> = {}) =>
  new GoogleGenAI({
    apiKey: tenant.apiKey,
    httpOptions: { baseUrl: tenant.gatewayBaseUrl, apiVersion: 'v1beta', headers, fetch: gatewayFetch() },
  });

const invocationOf = (requestId: string) => invocationByRequestId(t, tenant.workspaceId, requestId);

const post = (path: string, body: unknown, headers: Record<string, string> = { 'x-goog-api-key': tenant.apiKey }) =>
  gatewayFetch()(`${tenant.gatewayBaseUrl}/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

describe('@google/genai pointed at the gateway', () => {
  it('counts thinking tokens as output and cachedContentTokenCount as cached, JSON and stream', async () => {
    const answer = await ai({ 'x-fake-usage': '30,6,10', 'x-fake-thoughts': '4' }).models.generateContent({
      model: 'gpt-4o',
      contents: 'Think',
    });
    const inv = await invocationOf(answer.sdkHttpResponse!.headers!['x-nexus-request-id']!);
    expect(inv.usageEvents![0]).toMatchObject({ inputTokens: '30', cachedInputTokens: '10', outputTokens: '10' });
    // No cap asked: the plan's written in, where Gemini reads it.
    expect(JSON.parse(up.requests.at(-1)!.body)).toMatchObject({ generationConfig: { maxOutputTokens: expect.any(Number) } });
    let requestId = '';
    for await (const chunk of await ai({ 'x-fake-usage': '30,6,10', 'x-fake-thoughts': '4' }).models.generateContentStream({
      model: 'gpt-4o',
      contents: 'Think',
    })) {
      requestId ||= chunk.sdkHttpResponse?.headers?.['x-nexus-request-id'] ?? '';
    }
    // The last running total counts; an event without usage did not reset it.
    const streamed = await invocationOf(requestId);
    expect(streamed).toMatchObject({ status: 'SUCCEEDED', requestedModel: 'gpt-4o' });
    expect(streamed.usageEvents![0]).toMatchObject({ inputTokens: '30', cachedInputTokens: '10', outputTokens: '10' });
  });

  it('meters embedContent and batchEmbedContents, which report no usage, at their input bound', async () => {
    const one = await ai().models.embedContent({ model: 'gpt-4o', contents: 'hello' });
    expect(one.embeddings).toHaveLength(1);
    expect(up.requests.at(-1)!.url).toBe('/v1beta/models/gpt-4o:batchEmbedContents');
    const res = await post('v1beta/models/gpt-4o:embedContent', { content: { parts: [{ text: 'hello' }] } });
    expect(res.status).toBe(200);
    const inv = await invocationOf(res.headers.get('x-nexus-request-id')!);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', errorCode: 'usage_missing', requestedModel: 'gpt-4o' });
    expect(inv.usageEvents![0]).toMatchObject({ outputTokens: '0' });
    expect(Number(inv.usageEvents![0]!.inputTokens)).toBeGreaterThan(0);
  });

  it('counts tokens for free, refusing a model outside the allow-list', async () => {
    const before = await periodOf(t, tenant.accessId);
    const counted = await ai().models.countTokens({ model: 'gpt-4o', contents: 'How many?' });
    expect(counted.totalTokens).toBeGreaterThan(0);
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(before.consumed);
    const refused = await post('v1beta/models/gpt-4o-mini:countTokens', { contents: [] });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('model_not_allowed');
  });

  it('meters a prompt blocked by safety as reported (input only)', async () => {
    const answer = await ai({ 'x-fake-usage': '17,0,0', 'x-fake-fault': 'blocked' }).models.generateContent({
      model: 'gpt-4o',
      contents: 'x',
    });
    expect(answer.promptFeedback?.blockReason).toBe('SAFETY');
    const inv = await invocationOf(answer.sdkHttpResponse!.headers!['x-nexus-request-id']!);
    expect(inv.usageEvents![0]).toMatchObject({ inputTokens: '17', outputTokens: '0' });
    expect(inv.errorCode ?? null).toBeNull();
  });
});

describe('the gemini protocol through HTTP', () => {
  it('refuses a stream asked for without alt=sse with 400, before the upstream', async () => {
    const before = up.requests.length;
    const res = await post('v1beta/models/gpt-4o:streamGenerateContent', { contents: [] });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string; message: string } }).error).toMatchObject({
      param: 'alt',
      message: 'streamGenerateContent is metered as server-sent events: add alt=sse to the query',
    });
    expect(up.requests.length).toBe(before);
    // Recorded with the model its path names.
    const inv = await invocationOf(res.headers.get('x-nexus-request-id')!);
    expect(inv).toMatchObject({ status: 'REJECTED', errorCode: 'invalid_parameter', requestedModel: 'gpt-4o' });
  });

  it('takes the inference key as ?key= (never forwarded) or Bearer', async () => {
    const query = await post(`v1beta/models/gpt-4o:generateContent?key=${tenant.apiKey}&x=1`, { contents: [] }, {});
    expect(query.status).toBe(200);
    expect(up.requests.at(-1)!.url).toBe('/v1beta/models/gpt-4o:generateContent?x=1');
    const bearer = await post('v1beta/models/gpt-4o:generateContent', { contents: [] }, { authorization: `Bearer ${tenant.apiKey}` });
    expect(bearer.status).toBe(200);
    expect(up.requests.at(-1)!.headers['x-goog-api-key']).toBe(KEY);
    expect(JSON.stringify(up.requests.slice(-2))).not.toContain(tenant.apiKey);
  });

  it('probes v1beta/models with x-goog-api-key (testProviderConnection)', async () => {
    const ws = await createWorkspace({ client: t.client, body: { name: 'gemini-probe' } });
    const seen = up.requests.length;
    const ok = await testProviderConnection({
      client: t.client,
      path: { workspaceId: ws.data!.id },
      body: { protocolProfile: 'gemini', baseUrl: up.url, apiKey: KEY },
    });
    expect(ok.data).toMatchObject({ accepted: true, outcome: 'reachable', httpStatus: 200 });
    expect(up.requests[seen]).toMatchObject({ method: 'GET', url: '/v1beta/models' });
    expect(up.requests[seen]!.headers['x-goog-api-key']).toBe(KEY);
  });
});

/**
 * The azure-openai profile beyond the rules every protocol shares (gateway.protocols.test.ts): the
 * `AzureOpenAI` client's embeddings, its streams as Azure sends them (a first chunk of prompt filter
 * results, content-filter chunks without a delta), the deployment as the model the call names, the
 * plain `OpenAI` client on the v1 paths, and the connection probe.
 */
import OpenAI, { AzureOpenAI } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAzureOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { createWorkspace, testProviderConnection } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, invocationByRequestId, type Tenant } from './gateway-support.js';

const KEY = testProviderKey('azure');
const API_VERSION = '2024-10-21';
let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;

beforeAll(async () => {
  t = await startTestApp();
  up = await startAzureOpenAiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, {
    baseUrl: up.url,
    providerKey: KEY,
    profile: 'azure-openai',
    allowedModels: ['gpt-4o', 'text-embedding-3-small'],
  });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const azure = (headers: Record<string, string> = {}) =>
  new AzureOpenAI({
    endpoint: tenant.gatewayBaseUrl,
    apiKey: tenant.apiKey,
    apiVersion: API_VERSION,
    fetch: gatewayFetch(),
    maxRetries: 0,
    defaultHeaders: headers,
  });

const invocationOf = (requestId: string) => invocationByRequestId(t, tenant.workspaceId, requestId);

describe('AzureOpenAI (the openai package) pointed at the gateway base URL', () => {
  it('meters embeddings on the deployment path, the deployment as the model, the key as api-key', async () => {
    const { data, response } = await azure({ 'x-fake-usage': '9,0,0' })
      .embeddings.create({ model: 'text-embedding-3-small', input: 'hello' })
      .withResponse();
    expect(data.data).toHaveLength(1);
    const seen = up.requests.at(-1)!;
    expect(seen.url).toBe(`/openai/deployments/text-embedding-3-small/embeddings?api-version=${API_VERSION}`);
    expect(seen.headers['api-key']).toBe(KEY);
    expect(seen.headers.authorization).toBeUndefined();
    const inv = await invocationOf(response.headers.get('x-nexus-request-id')!);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', requestedModel: 'text-embedding-3-small' });
    expect(inv.usageEvents![0]).toMatchObject({ inputTokens: '9', outputTokens: '0' });
  });

  it("reads Azure's stream quirks past, hides the usage chunk it asked for, and forwards the rest as Azure sent it", async () => {
    const { data, response } = await azure({ 'x-fake-usage': '21,5,0' })
      .chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 30, stream: true })
      .withResponse();
    const chunks = [];
    for await (const chunk of data) chunks.push(chunk);
    // The prompt's filter results first (no choices), a content-filter chunk without a delta, no usage chunk.
    expect(chunks[0]).toMatchObject({ choices: [], prompt_filter_results: [{ prompt_index: 0 }] });
    expect(chunks.some((c) => c.choices[0] && !('delta' in c.choices[0]))).toBe(true);
    expect(chunks.every((c) => !c.usage)).toBe(true);
    expect(JSON.parse(up.requests.at(-1)!.body)).toMatchObject({ stream_options: { include_usage: true } });
    const inv = await invocationOf(response.headers.get('x-nexus-request-id')!);
    expect(inv.usageEvents![0]).toMatchObject({ inputTokens: '21', outputTokens: '5' });
  });

  it('prices and allows a call by its deployment, whatever model its body names', async () => {
    const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/openai/deployments/gpt-4o/chat/completions?api-version=${API_VERSION}`, {
      method: 'POST',
      headers: { 'api-key': tenant.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'not-on-the-list', messages: [], max_tokens: 5 }),
    });
    expect(res.status).toBe(200);
    const inv = await invocationOf(res.headers.get('x-nexus-request-id')!);
    expect(inv.requestedModel).toBe('gpt-4o');
    const refused = await gatewayFetch()(
      `${tenant.gatewayBaseUrl}/openai/deployments/gpt-4o-mini/chat/completions?api-version=${API_VERSION}`,
      {
        method: 'POST',
        headers: { 'api-key': tenant.apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o', messages: [], max_tokens: 5 }),
      },
    );
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('model_not_allowed');
  });
});

describe('OpenAI (the openai package) on openai/v1', () => {
  it('meters embeddings and the responses API, its key sent up as api-key', async () => {
    const client = new OpenAI({
      baseURL: tenant.gatewayBaseUrl + '/openai/v1',
      apiKey: tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
    });
    const emb = await client.embeddings
      .create({ model: 'text-embedding-3-small', input: 'x' }, { headers: { 'x-fake-usage': '4,0,0' } })
      .withResponse();
    expect(up.requests.at(-1)!.url).toBe('/openai/v1/embeddings');
    expect((await invocationOf(emb.response.headers.get('x-nexus-request-id')!)).usageEvents![0]).toMatchObject({ inputTokens: '4' });
    const resp = await client.responses
      .create({ model: 'gpt-4o', input: 'Hi', max_output_tokens: 20 }, { headers: { 'x-fake-usage': '8,3,0' } })
      .withResponse();
    expect(up.requests.at(-1)!.url).toBe('/openai/v1/responses');
    expect(up.requests.at(-1)!.headers['api-key']).toBe(KEY);
    expect((await invocationOf(resp.response.headers.get('x-nexus-request-id')!)).usageEvents![0]).toMatchObject({
      inputTokens: '8',
      outputTokens: '3',
    });
  });
});

describe('testProviderConnection for azure-openai', () => {
  it("probes the resource's openai/v1/models with api-key, and tells a refused key apart", async () => {
    const ws = await createWorkspace({ client: t.client, body: { name: 'azure-probe' } });
    const probe = (apiKey: string) =>
      testProviderConnection({
        client: t.client,
        path: { workspaceId: ws.data!.id },
        body: { protocolProfile: 'azure-openai', baseUrl: up.url, apiKey },
      });
    const seen = up.requests.length;
    const ok = await probe(KEY);
    expect(ok.data).toMatchObject({ accepted: true, outcome: 'reachable', httpStatus: 200 });
    expect(up.requests[seen]).toMatchObject({ method: 'GET', url: '/openai/v1/models' });
    expect(up.requests[seen]!.headers['api-key']).toBe(KEY);
    const refused = await probe(testProviderKey('wrong'));
    expect(refused.data).toMatchObject({ outcome: 'credentials_rejected', httpStatus: 401 });
  });
});

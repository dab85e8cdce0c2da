/**
 * The Responses API's compaction (`responses.compact`: src/protocols/openai-compact.ts) through the OpenAI SDK,
 * against the OpenAI and Azure fake upstreams: metered as a model call, charged its reported usage in units (the
 * strategy) and in cost (the price book), its body sent as it came, its output bounded by the plan's maxOutputTokens.
 */
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectorFor, prepareCall } from '../../src/protocols/inspectors.js';
import { startAzureOpenAiUpstream, startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { createModelPrice } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, invocationByRequestId, openAiFor, periodOf, type Tenant } from './gateway-support.js';

const KEY = testProviderKey('compact');
const MODEL = 'gpt-5.1-codex-max';
const hourAgo = () => new Date(Date.now() - 3_600_000).toISOString();

let t: TestApp;
let openaiUp: FakeUpstream;
let azureUp: FakeUpstream;

beforeAll(async () => {
  t = await startTestApp();
  openaiUp = await startOpenAiUpstream({ apiKey: KEY });
  azureUp = await startAzureOpenAiUpstream({ apiKey: KEY });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await openaiUp?.close();
  await azureUp?.close();
});

/** A conversation to compact, as a coding agent sends it. */
const CONVERSATION = {
  model: MODEL,
  instructions: 'You are a coding agent.',
  input: [
    { role: 'user' as const, content: 'Rename the helper and update its callers.' },
    { role: 'assistant' as const, content: 'Done: three files changed.' },
  ],
};

/** The model's price (per million tokens: input 1.25, cached 0.125, output 10), in the tenant's workspace. */
async function priceModel(tenant: Tenant): Promise<void> {
  await createModelPrice({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: {
      modelPattern: 'gpt-5.1-codex*',
      inputPerMillion: '1.25',
      cachedInputPerMillion: '0.125',
      outputPerMillion: '10',
      effectiveFrom: hourAgo(),
    },
  });
}

async function invocationOf(tenant: Tenant, requestId: string | null) {
  expect(requestId, 'the answer names its request').toBeTruthy();
  await t.nexus.gateway.drain();
  return invocationByRequestId(t, tenant.workspaceId, requestId!);
}

describe('responses.compact through the gateway', () => {
  it('is metered on an OpenAI connection: charged its usage in units and in cost, its body sent as it came', async () => {
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: KEY, quotaUnits: 1_000_000n });
    await priceModel(tenant);
    const client = openAiFor(tenant, { 'x-fake-usage': '1200,300,400', 'x-fake-reasoning': '120' });
    const { data, response } = await client.responses.compact(CONVERSATION).withResponse();
    expect(data.object).toBe('response.compaction');
    expect(data.output.map((item) => item.type)).toEqual(['message', 'compaction']);
    expect(data.usage).toMatchObject({ input_tokens: 1200, output_tokens: 300 });
    expect(response.headers.get('x-nexus-metering-status')).toBe('metered');
    const seen = openaiUp.requests.at(-1)!;
    expect(seen.url).toBe('/v1/responses/compact');
    expect(seen.headers.authorization).toBe(`Bearer ${KEY}`);
    // The API takes no output cap: none is written in.
    expect(JSON.parse(seen.body)).toEqual(CONVERSATION);
    const inv = await invocationOf(tenant, response.headers.get('x-nexus-request-id'));
    // Units (1 / 0.5 / 2 per input / cached / output token): 800 + 400 x 0.5 + 300 x 2. Cost, in micro-dollars:
    // 800 x 1.25 + 400 x 0.125 + 300 x 10 (the reasoning tokens at the output price: the price sets none of its own).
    expect(inv).toMatchObject({ status: 'SUCCEEDED', endpoint: 'v1/responses/compact', quotaUnits: '1600', costMicros: '4050' });
    expect(inv.usageEvents![0]).toMatchObject({
      inputTokens: '1200',
      cachedInputTokens: '400',
      outputTokens: '300',
      reasoningTokens: '120',
    });
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(1600n);
  });

  it("is admitted at the plan's maxOutputTokens, the bound it cannot be sent: refused when the quota holds less", async () => {
    const body = Buffer.from(JSON.stringify(CONVERSATION));
    const compact = inspectorFor('openai', 'POST', 'v1/responses/compact')!;
    const prepared = prepareCall(compact, body, { maxOutputTokens: 50, clamp: true });
    expect(prepared.outputBound).toBe(50n);
    // The default strategy's bound: each input token at 1 unit, each output token at 2.
    const bound = prepared.inputBound + 2n * 50n;
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: KEY, maxOutputTokens: 50, quotaUnits: bound - 1n });
    const sent = openaiUp.requests.length;
    const refused = await openAiFor(tenant)
      .responses.compact(CONVERSATION)
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(429);
    expect((refused as APIError).message).toContain(`may need up to ${bound} units; ${bound - 1n} are available`);
    expect(openaiUp.requests.length).toBe(sent);
  });

  it("is metered on an Azure connection's v1 API, its key sent up as api-key", async () => {
    const tenant = await createTenant(t, { profile: 'azure-openai', baseUrl: azureUp.url, providerKey: KEY, quotaUnits: 1_000_000n });
    await priceModel(tenant);
    const client = new OpenAI({
      baseURL: tenant.gatewayBaseUrl + '/openai/v1',
      apiKey: tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
      defaultHeaders: { 'x-fake-usage': '90,10,0' },
    });
    const { data, response } = await client.responses.compact(CONVERSATION).withResponse();
    expect(data.object).toBe('response.compaction');
    const seen = azureUp.requests.at(-1)!;
    expect(seen.url).toBe('/openai/v1/responses/compact');
    expect(seen.headers['api-key']).toBe(KEY);
    const inv = await invocationOf(tenant, response.headers.get('x-nexus-request-id'));
    // 90 x 1 + 10 x 2 units; 90 x 1.25 + 10 x 10 micro-dollars, rounded half up.
    expect(inv).toMatchObject({ status: 'SUCCEEDED', endpoint: 'openai/v1/responses/compact', quotaUnits: '110', costMicros: '213' });
  });
});

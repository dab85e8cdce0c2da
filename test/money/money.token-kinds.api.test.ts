/**
 * Cache writes and reasoning tokens (docs/pricing.md "Cost"): recorded on the usage event where the protocol's usage
 * reports them apart, and charged at the price's cache-write and reasoning prices, or as input and output when the
 * price has none. Through the official SDKs, on Anthropic, OpenAI and Gemini.
 */
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { createModelPrice, getInvocation, listInvocations } from '../support/sdk.js';
import { startAnthropicUpstream, startGeminiUpstream, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, openAiFor, type Tenant } from '../gateway/gateway-support.js';

let t: TestApp;
const upstreams: FakeUpstream[] = [];
const KEY = `${SECRET_MARKER}-token-kinds-0123456789`;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
  for (const u of upstreams) await u.close();
});

/** A tenant on its own upstream, with one price for every model: 2 input, 1 cached, 10 output per million, and `extra`. */
async function tenantWith(
  profile: 'openai' | 'anthropic' | 'gemini',
  extra: { cacheWritePerMillion?: string; reasoningPerMillion?: string },
) {
  const start = { openai: startOpenAiUpstream, anthropic: startAnthropicUpstream, gemini: startGeminiUpstream }[profile];
  const up = await start({ apiKey: KEY });
  upstreams.push(up);
  const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, profile });
  const price = await createModelPrice({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: {
      modelPattern: '*',
      inputPerMillion: '2',
      cachedInputPerMillion: '1',
      outputPerMillion: '10',
      ...extra,
      effectiveFrom: new Date(Date.now() - 3_600_000).toISOString(),
    },
  });
  expect(price.response.status).toBe(201);
  return tenant;
}

/** The USAGE event of the tenant's only call. */
async function eventOf(tenant: Tenant) {
  await t.nexus.gateway.drain();
  const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId } });
  expect(list.data).toHaveLength(1);
  const full = await getInvocation({ client: t.client, path: { invocationId: list.data![0]!.id } });
  const usage = full.data!.usageEvents!.filter((e) => e.kind === 'USAGE');
  expect(usage).toHaveLength(1);
  return usage[0]!;
}

describe('cache writes', () => {
  const anthropicCall = (tenant: Tenant) =>
    new Anthropic({
      baseURL: tenant.gatewayBaseUrl,
      apiKey: tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
      // 1000 input tokens: 200 read from the cache, 300 written to it; 50 output.
      defaultHeaders: { 'x-fake-usage': '1000,50,200', 'x-fake-cache-write': '300' },
    }).messages.create({ model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });

  it("Anthropic's cache_creation_input_tokens are recorded and charged at the cache-write price", async () => {
    const tenant = await tenantWith('anthropic', { cacheWritePerMillion: '2.5' });
    await anthropicCall(tenant);
    const event = await eventOf(tenant);
    expect(event).toMatchObject({ inputTokens: '1000', cachedInputTokens: '200', cacheWriteTokens: '300', outputTokens: '50' });
    expect(event.reasoningTokens).toBeUndefined();
    // 500 * 2 + 200 * 1 + 300 * 2.5 + 50 * 10 = 1000 + 200 + 750 + 500.
    expect(event.costMicros).toBe('2450');
  });

  it('are charged as input when the price has no cache-write price', async () => {
    const tenant = await tenantWith('anthropic', {});
    await anthropicCall(tenant);
    const event = await eventOf(tenant);
    expect(event.cacheWriteTokens).toBe('300');
    // 800 * 2 + 200 * 1 + 50 * 10.
    expect(event.costMicros).toBe('2300');
  });
});

describe('reasoning tokens', () => {
  it("OpenAI's reasoning_tokens are recorded and charged at the reasoning price", async () => {
    const tenant = await tenantWith('openai', { reasoningPerMillion: '20' });
    await openAiFor(tenant, { 'x-fake-usage': '100,40,0', 'x-fake-reasoning': '30' }).chat.completions.create({
      model: 'o3-mini',
      messages: [{ role: 'user', content: 'think' }],
      max_tokens: 100,
    });
    const event = await eventOf(tenant);
    expect(event).toMatchObject({ inputTokens: '100', outputTokens: '40', reasoningTokens: '30' });
    expect(event.cacheWriteTokens).toBeUndefined();
    // 100 * 2 + 10 * 10 + 30 * 20.
    expect(event.costMicros).toBe('900');
  });

  it("Gemini's thoughtsTokenCount is recorded (inside the output) and charged at the reasoning price", async () => {
    const tenant = await tenantWith('gemini', { reasoningPerMillion: '20' });
    const ai = new GoogleGenAI({
      apiKey: tenant.apiKey,
      httpOptions: {
        baseUrl: tenant.gatewayBaseUrl,
        apiVersion: 'v1beta',
        headers: { 'x-fake-usage': '100,10,0', 'x-fake-thoughts': '25' },
        fetch: gatewayFetch(),
      },
    });
    await ai.models.generateContent({ model: 'fake-model', contents: 'think' });
    const event = await eventOf(tenant);
    expect(event).toMatchObject({ inputTokens: '100', outputTokens: '35', reasoningTokens: '25' });
    // 100 * 2 + 10 * 10 + 25 * 20.
    expect(event.costMicros).toBe('800');
  });

  it('are charged as output when the price has no reasoning price; a usage without them records none', async () => {
    const tenant = await tenantWith('openai', {});
    await openAiFor(tenant, { 'x-fake-usage': '100,40,0', 'x-fake-reasoning': '30' }).chat.completions.create({
      model: 'o3-mini',
      messages: [{ role: 'user', content: 'think' }],
      max_tokens: 100,
    });
    const event = await eventOf(tenant);
    expect(event.reasoningTokens).toBe('30');
    // 100 * 2 + 40 * 10.
    expect(event.costMicros).toBe('600');
  });
});

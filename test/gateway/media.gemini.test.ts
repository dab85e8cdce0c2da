/**
 * Gemini's image output through `@google/genai` (docs/modalities.md, "Gemini"): generateContent answering an image,
 * its tokens by modality read from usageMetadata, the call charged what it reports.
 */
import { GoogleGenAI } from '@google/genai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGeminiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, invocationByRequestId, periodOf, type Tenant } from './gateway-support.js';

const KEY = testProviderKey('gemini');
let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;

beforeAll(async () => {
  t = await startTestApp();
  up = await startGeminiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, profile: 'gemini', quotaUnits: 1_000_000n });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await up?.close();
});

describe('@google/genai image output through the gateway', () => {
  it('charges an image answer its tokens, the image among the output', async () => {
    const seen: string[] = [];
    const inner = gatewayFetch();
    const ai = new GoogleGenAI({
      apiKey: tenant.apiKey,
      httpOptions: {
        baseUrl: tenant.gatewayBaseUrl,
        apiVersion: 'v1beta',
        headers: { 'x-fake-usage': '20,10', 'x-fake-image-tokens': '1290' },
        fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
          const res = await inner(input, init);
          seen.push(res.headers.get('x-nexus-request-id') ?? '');
          return res;
        },
      },
    });
    const answer = await ai.models.generateContent({ model: 'gemini-2.5-flash-image', contents: 'draw a kite' });
    const parts = answer.candidates?.[0]?.content?.parts ?? [];
    expect(parts.some((p) => p.inlineData?.mimeType === 'image/png')).toBe(true);
    expect(answer.usageMetadata?.candidatesTokensDetails).toContainEqual({ modality: 'IMAGE', tokenCount: 1290 });
    const inv = await invocationByRequestId(t, tenant.workspaceId, seen.at(-1)!);
    // 20 input tokens at 1 unit; 10 text and 1,290 image output tokens at 2.
    expect(inv).toMatchObject({ status: 'SUCCEEDED', quotaUnits: String(20 + 2 * 1300) });
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(2620n);
  });
});

/**
 * Every rule on every protocol: one row a protocol (its profile, its official SDK as its users configure
 * it, its fake upstream), and the same scenarios run over each row: exact metering of a JSON answer and a
 * stream, the model allow-list, the output cap's clamp, rate limits, quota, the free model list, /v1/me,
 * the output-bound cut, crash-safe metering (a lease reclaimed under a stream), a malformed answer
 * (charged by the missing-usage rule and counted), the gateway's refusals in the
 * API's own error shape, and a path of another protocol refused with 409. A new protocol adds a row.
 */
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI, { AzureOpenAI } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startAnthropicUpstream,
  startAzureOpenAiUpstream,
  startGeminiUpstream,
  startOpenAiUpstream,
  testProviderKey,
  type FakeUpstream,
} from '../support/fake-upstreams.js';
import { getInvocation, listInvocations } from '../support/sdk.js';
import type { TenantSpec } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { anthropicFor, createTenant, gatewayFetch, openAiFor, periodOf, reclaimLease, type Tenant } from './gateway-support.js';

const KEY = testProviderKey('protocols');
const AZURE_API_VERSION = '2024-10-21';
/** The usage every metered scenario's fake reports (input with cached, output, cached). */
const USAGE = { input: 12, output: 7, cached: 3 };
const USAGE_HEADER = { 'x-fake-usage': `${USAGE.input},${USAGE.output},${USAGE.cached}` };

type Headers = Record<string, string>;

/** What a row's SDK call gave back: the gateway's request id, and the answer's text. */
interface Answer {
  requestId: string;
  text: string;
}

interface Row {
  name: string;
  profile: NonNullable<TenantSpec['profile']>;
  start(): Promise<FakeUpstream>;
  /** A metered call through the SDK (`maxTokens` undefined: none asked). */
  call(tenant: Tenant, o: { model: string; maxTokens?: number; stream: boolean; headers?: Headers }): Promise<Answer>;
  /** The model list through the SDK. */
  models(tenant: Tenant): Promise<string[]>;
  /** The upstream path a metered call of `model` reached. */
  meteredPath(model: string): string;
  /** The output cap the upstream received, from the body it received. */
  capOf(sent: Record<string, any>): unknown;
  /** The credential header and value the SDK sends, for a raw call. */
  credential(tenant: Tenant): Headers;
  /** The message, error type and request id the SDK's error shows. */
  shown(err: unknown): { status: number; message: string | undefined; requestId: string | null | undefined };
  /** A path of another protocol's API. */
  foreignPath: string;
  /** The gateway path of a metered call of `gpt-4o` (a raw call: the SDK throws on a broken stream). */
  rawPath: string;
  /** Its protocol's name in spans and metrics. */
  system: string;
}

const requestIdOf = (headers: globalThis.Headers) => headers.get('x-nexus-request-id')!;

/** Reads an OpenAI chat stream or answer, whichever the client made. */
async function openAiChat(client: OpenAI, o: Parameters<Row['call']>[1]): Promise<Answer> {
  const body = {
    model: o.model,
    messages: [{ role: 'user' as const, content: 'Hello there' }],
    ...(o.maxTokens !== undefined ? { max_tokens: o.maxTokens } : {}),
  };
  if (!o.stream) {
    const { data, response } = await client.chat.completions.create(body, { headers: o.headers }).withResponse();
    return { requestId: requestIdOf(response.headers), text: data.choices[0]!.message.content ?? '' };
  }
  const { data, response } = await client.chat.completions.create({ ...body, stream: true }, { headers: o.headers }).withResponse();
  let text = '';
  for await (const chunk of data) text += chunk.choices[0]?.delta?.content ?? '';
  return { requestId: requestIdOf(response.headers), text };
}

/** What an SDK's APIError holds: its status, the body it read, its request id and the answer's headers. */
interface SdkError {
  status: number;
  error?: Record<string, any>;
  requestID?: string | null;
  headers: globalThis.Headers;
}

/** The SDK's request id is the gateway's own. */
function sdkError(err: unknown): SdkError {
  const e = err as SdkError;
  expect(e.requestID).toBe(e.headers.get('x-nexus-request-id'));
  return e;
}

const openAiShown = (err: unknown) => {
  const e = sdkError(err);
  return { status: e.status, message: e.error?.message as string | undefined, requestId: e.requestID };
};

const azureClient = (tenant: Tenant, headers: Headers = {}) =>
  new AzureOpenAI({
    endpoint: tenant.gatewayBaseUrl,
    apiKey: tenant.apiKey,
    apiVersion: AZURE_API_VERSION,
    fetch: gatewayFetch(),
    maxRetries: 0,
    defaultHeaders: headers,
  });

/** The plain OpenAI client on Azure's v1 path. */
const azureV1Client = (tenant: Tenant, headers: Headers = {}) =>
  new OpenAI({
    baseURL: tenant.gatewayBaseUrl + '/openai/v1',
    apiKey: tenant.apiKey,
    fetch: gatewayFetch(),
    maxRetries: 0,
    defaultHeaders: headers,
  });

const gemini = (tenant: Tenant, headers: Headers = {}) =>
  new GoogleGenAI({
    apiKey: tenant.apiKey,
    httpOptions: { baseUrl: tenant.gatewayBaseUrl, apiVersion: 'v1beta', headers, fetch: gatewayFetch() },
  });

/** @google/genai's ApiError: its status, and the body its message ends with (the gateway's, shared Error body). */
function geminiShown(err: unknown) {
  const e = err as { status: number; message: string };
  const body = JSON.parse(e.message.slice(e.message.indexOf('{'))) as { error: { message: string; request_id: string } };
  return { status: e.status, message: body.error.message, requestId: body.error.request_id };
}

const ROWS: Row[] = [
  {
    name: 'openai (OpenAI)',
    profile: 'openai',
    start: () => startOpenAiUpstream({ apiKey: KEY }),
    call: (tenant, o) => openAiChat(openAiFor(tenant), o),
    models: async (tenant) => (await openAiFor(tenant).models.list()).data.map((m) => m.id),
    meteredPath: () => '/v1/chat/completions',
    capOf: (sent) => sent.max_tokens,
    credential: (tenant) => ({ authorization: `Bearer ${tenant.apiKey}` }),
    shown: openAiShown,
    foreignPath: 'v1/messages',
    rawPath: 'v1/chat/completions',
    system: 'openai',
  },
  {
    name: 'anthropic (Anthropic)',
    profile: 'anthropic',
    start: () => startAnthropicUpstream({ apiKey: KEY }),
    async call(tenant, o) {
      const client = anthropicFor(tenant);
      const body = { model: o.model, max_tokens: o.maxTokens ?? 64, messages: [{ role: 'user' as const, content: 'Hello there' }] };
      if (!o.stream) {
        const { data, response } = await client.messages.create(body, { headers: o.headers }).withResponse();
        return { requestId: requestIdOf(response.headers), text: data.content.map((c) => (c.type === 'text' ? c.text : '')).join('') };
      }
      const { data, response } = await client.messages.create({ ...body, stream: true }, { headers: o.headers }).withResponse();
      let text = '';
      for await (const event of data) {
        if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
      }
      return { requestId: requestIdOf(response.headers), text };
    },
    models: async (tenant) => (await anthropicFor(tenant).models.list()).data.map((m) => m.id),
    meteredPath: () => '/v1/messages',
    capOf: (sent) => sent.max_tokens,
    credential: (tenant) => ({ 'x-api-key': tenant.apiKey, 'anthropic-version': '2023-06-01' }),
    shown: (err) => {
      const e = sdkError(err);
      expect(err).toBeInstanceOf(Anthropic.APIError);
      // Anthropic's own shape: `{ type: 'error', error: { type, message } }`; the SDK's `type` is Anthropic's.
      expect(e.error?.type).toBe('error');
      expect((err as { type?: string }).type).toBe(e.error?.error?.type);
      expect(['permission_error', 'rate_limit_error', 'invalid_request_error']).toContain(e.error?.error?.type);
      return { status: e.status, message: e.error?.error?.message as string | undefined, requestId: e.requestID };
    },
    foreignPath: 'v1/chat/completions',
    rawPath: 'v1/messages',
    system: 'anthropic',
  },
  {
    name: 'azure-openai (AzureOpenAI, deployment paths)',
    profile: 'azure-openai',
    start: () => startAzureOpenAiUpstream({ apiKey: KEY }),
    call: (tenant, o) => openAiChat(azureClient(tenant), o),
    models: async (tenant) => (await azureClient(tenant).models.list()).data.map((m) => m.id),
    meteredPath: (model) => `/openai/deployments/${model}/chat/completions?api-version=${AZURE_API_VERSION}`,
    capOf: (sent) => sent.max_tokens,
    credential: (tenant) => ({ 'api-key': tenant.apiKey }),
    shown: openAiShown,
    foreignPath: 'v1/messages',
    rawPath: `openai/deployments/gpt-4o/chat/completions?api-version=${AZURE_API_VERSION}`,
    system: 'azure.ai.openai',
  },
  {
    name: 'azure-openai (OpenAI on openai/v1)',
    profile: 'azure-openai',
    start: () => startAzureOpenAiUpstream({ apiKey: KEY }),
    call: (tenant, o) => openAiChat(azureV1Client(tenant), o),
    models: async (tenant) => (await azureV1Client(tenant).models.list()).data.map((m) => m.id),
    meteredPath: () => '/openai/v1/chat/completions',
    capOf: (sent) => sent.max_tokens,
    credential: (tenant) => ({ authorization: `Bearer ${tenant.apiKey}` }),
    shown: openAiShown,
    foreignPath: 'v1/chat/completions',
    rawPath: 'openai/v1/chat/completions',
    system: 'azure.ai.openai',
  },
  {
    name: 'gemini (@google/genai)',
    profile: 'gemini',
    start: () => startGeminiUpstream({ apiKey: KEY }),
    async call(tenant, o) {
      const ai = gemini(tenant, o.headers);
      const request = {
        model: o.model,
        contents: 'Hello there',
        ...(o.maxTokens !== undefined ? { config: { maxOutputTokens: o.maxTokens } } : {}),
      };
      if (!o.stream) {
        const answer = await ai.models.generateContent(request);
        return { requestId: answer.sdkHttpResponse!.headers!['x-nexus-request-id']!, text: answer.text ?? '' };
      }
      let text = '';
      let requestId = '';
      for await (const chunk of await ai.models.generateContentStream(request)) {
        text += chunk.text ?? '';
        requestId ||= chunk.sdkHttpResponse?.headers?.['x-nexus-request-id'] ?? '';
      }
      return { requestId, text };
    },
    async models(tenant) {
      const ids = [];
      for await (const m of await gemini(tenant).models.list()) ids.push(m.name!.replace(/^models\//, ''));
      return ids;
    },
    meteredPath: (model) => `/v1beta/models/${model}:generateContent`,
    capOf: (sent) => sent.generationConfig?.maxOutputTokens,
    credential: (tenant) => ({ 'x-goog-api-key': tenant.apiKey }),
    shown: geminiShown,
    foreignPath: 'v1/chat/completions',
    rawPath: 'v1beta/models/gpt-4o:streamGenerateContent?alt=sse',
    system: 'gcp.gemini',
  },
];

let t: TestApp;
const upstreams = new Map<Row, FakeUpstream>();

beforeAll(async () => {
  t = await startTestApp();
  for (const row of ROWS) upstreams.set(row, await row.start());
}, 60_000);
afterAll(async () => {
  await t?.close();
  for (const up of upstreams.values()) await up.close();
});

const tenantFor = (row: Row, spec: Partial<TenantSpec> = {}) =>
  createTenant(t, { baseUrl: upstreams.get(row)!.url, providerKey: KEY, profile: row.profile, ...spec });

async function invocationOf(tenant: Tenant, requestId: string) {
  await t.nexus.gateway.drain();
  const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 100 } });
  const found = list.data!.find((i) => i.requestId === requestId);
  expect(found, `invocation ${requestId}`).toBeTruthy();
  return (await getInvocation({ client: t.client, path: { invocationId: found!.id } })).data!;
}

/** The SDK's call refused: what its error shows. */
async function refusal(row: Row, call: Promise<unknown>) {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'the call was refused').toBeDefined();
  return row.shown(err);
}

/** A metered stream through fetch, on the row's path, with the SDK's credential. */
const rawStream = (row: Row, tenant: Tenant, headers: Headers) =>
  gatewayFetch()(`${tenant.gatewayBaseUrl}/${row.rawPath}`, {
    method: 'POST',
    headers: { ...row.credential(tenant), 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'gpt-4o', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
  });

async function metric(name: string, labels: string[]): Promise<number> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && labels.every((label) => l.includes(label)));
  return Number(line?.split(' ').at(-1) ?? 0);
}

describe.each(ROWS)('$name', (row) => {
  it.each([false, true])('meters a call exactly, the usage event equal to the upstream usage (stream: %s)', async (stream) => {
    const tenant = await tenantFor(row);
    const up = upstreams.get(row)!;
    const answer = await row.call(tenant, { model: 'gpt-4o', maxTokens: 50, stream, headers: USAGE_HEADER });
    expect(answer.text).toBe('alpha beta gamma delta epsilon zeta eta');
    const inv = await invocationOf(tenant, answer.requestId);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', requestedModel: 'gpt-4o' });
    expect(inv.errorCode ?? null).toBeNull();
    expect(inv.usageEvents).toHaveLength(1);
    expect(inv.usageEvents![0]).toMatchObject({
      kind: 'USAGE',
      inputTokens: String(USAGE.input),
      cachedInputTokens: String(USAGE.cached),
      outputTokens: String(USAGE.output),
    });
    const period = await periodOf(t, tenant.accessId);
    expect(period.consumed).toBe(BigInt(inv.quotaUnits));
    expect(period.reserved).toBe(0n);
    const seen = up.requests.at(-1)!;
    expect(seen.url).toBe(
      stream && row.profile === 'gemini' ? '/v1beta/models/gpt-4o:streamGenerateContent?alt=sse' : row.meteredPath('gpt-4o'),
    );
    // The upstream saw the connection's key, never the caller's.
    expect(JSON.stringify(seen.headers)).not.toContain(tenant.apiKey);
  });

  it('refuses a model outside the allow-list before the upstream, in the SDK own error shape', async () => {
    const tenant = await tenantFor(row, { allowedModels: ['gpt-4o'] });
    const up = upstreams.get(row)!;
    const before = up.requests.length;
    const shown = await refusal(row, row.call(tenant, { model: 'gpt-4o-mini', maxTokens: 10, stream: false }));
    expect(shown.status).toBe(403);
    expect(shown.message).toBe("The model 'gpt-4o-mini' is not allowed on this plan");
    expect(shown.requestId).toMatch(/\S/);
    expect(up.requests.length).toBe(before);
  });

  it('filters the free model list by the allow-list, taking no quota', async () => {
    const tenant = await tenantFor(row, { allowedModels: ['gpt-4o', 'claude-sonnet-4-5'] });
    expect((await row.models(tenant)).sort()).toEqual(['claude-sonnet-4-5', 'gpt-4o']);
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(0n);
  });

  it("lowers an output cap above the plan's to it (clamp), and caps a call that names none", async () => {
    const tenant = await tenantFor(row, { maxOutputTokens: 40 });
    const up = upstreams.get(row)!;
    await row.call(tenant, { model: 'gpt-4o', maxTokens: 1000, stream: false });
    const sent = JSON.parse(up.requests.at(-1)!.body) as Record<string, unknown>;
    expect(row.capOf(sent)).toBe(40);
  });

  it("refuses a call past the plan's requests per minute with 429 and Retry-After", async () => {
    const tenant = await tenantFor(row, { rateLimits: { requestsPerMinute: 1 } });
    await row.call(tenant, { model: 'gpt-4o', maxTokens: 10, stream: false });
    const shown = await refusal(row, row.call(tenant, { model: 'gpt-4o', maxTokens: 10, stream: false }));
    expect(shown.status).toBe(429);
    expect(shown.message).toMatch(/requests per minute are used up/);
  });

  it("refuses a call whose bound passes the access's quota with 429, before the upstream", async () => {
    const tenant = await tenantFor(row, { quotaUnits: 50n });
    const up = upstreams.get(row)!;
    const before = up.requests.length;
    const shown = await refusal(row, row.call(tenant, { model: 'gpt-4o', maxTokens: 1000, stream: false }));
    expect(shown.status).toBe(429);
    expect(shown.message).toMatch(/^This call may need up to \d+ units; 50 are available$/);
    expect(up.requests.length).toBe(before);
  });

  it("answers /v1/me under the connection's base URL with the SDK's credential", async () => {
    const tenant = await tenantFor(row);
    const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/me`, { headers: row.credential(tenant) });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ accessId: tenant.accessId, status: 'ACTIVE' });
  });

  it("cuts a stream that runs past its output bound with the protocol's own end, charged the bound", async () => {
    const tenant = await tenantFor(row);
    const answer = await row.call(tenant, {
      model: 'gpt-4o',
      maxTokens: 3,
      stream: true,
      headers: { 'x-fake-fault': 'runaway', 'x-fake-usage': '10,60,0' },
    });
    // The SDK read a stream that ended as its protocol ends an answer at its cap: a few words, not sixty.
    expect(answer.text.split(' ').length).toBeLessThan(10);
    const inv = await invocationOf(tenant, answer.requestId);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', errorCode: 'output_bound_exceeded' });
    expect(inv.usageEvents![0]).toMatchObject({ outputTokens: '3' });
  });

  it('charges a stream under way once when its lease is reclaimed, as if its process had died', async () => {
    const tenant = await tenantFor(row);
    const res = await rawStream(row, tenant, { 'x-fake-fault': 'slow', 'x-fake-delay-ms': '150' });
    expect(res.status).toBe(200);
    await reclaimLease(t, tenant.accessId);
    await res.text();
    await t.nexus.gateway.drain();
    // Recorded and charged once: by the reclaim, as its last heartbeat left it, or by its own process.
    const invocations = await t.database.db('invocations').where({ request_id: requestIdOf(res.headers) });
    expect(invocations).toHaveLength(1);
    expect(['SUCCEEDED', 'FAILED']).toContain(invocations[0].status);
    const units = BigInt(invocations[0].quota_units);
    expect(units).toBeGreaterThan(0n);
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: units });
  });

  it('charges a malformed stream by the missing-usage rule, and counts it', async () => {
    const tenant = await tenantFor(row);
    const labels = [`protocol="${row.system}"`, 'kind="stream"'];
    const before = await metric('nexus_gateway_usage_missing_total', labels);
    // Through fetch: the SDKs throw on the broken event (the client sees what the upstream sent).
    const res = await rawStream(row, tenant, { 'x-fake-fault': 'malformed' });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('alpha');
    const inv = await invocationOf(tenant, requestIdOf(res.headers));
    expect(inv).toMatchObject({ status: 'SUCCEEDED', errorCode: 'usage_missing' });
    expect(BigInt(inv.quotaUnits)).toBeGreaterThan(0n);
    expect(await metric('nexus_gateway_usage_missing_total', labels)).toBe(before + 1);
  });

  it("refuses a path of another protocol's API with 409, naming the connection's protocol and what it meters", async () => {
    const tenant = await tenantFor(row, { allowUnmeteredPassthrough: true });
    const up = upstreams.get(row)!;
    const before = up.requests.length;
    const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/${row.foreignPath}`, {
      method: 'POST',
      headers: { ...row.credential(tenant), 'content-type': 'application/json' },
      body: '{"model":"gpt-4o"}',
    });
    expect(res.status).toBe(409);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('protocol_mismatch');
    expect(body.error.message).toContain(`this connection speaks '${row.profile}'`);
    expect(body.error.message).toMatch(/which meters (chat\/completions|messages|generateContent)/);
    expect(up.requests.length).toBe(before);
  });
});

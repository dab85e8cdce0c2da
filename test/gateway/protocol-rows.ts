/**
 * The rows of the table-driven protocol suites (gateway.protocols.test.ts, and
 * gateway.protocols.leases.test.ts for crash-safe metering): one a protocol, with its
 * profile, its official SDK as its users configure it, and its fake upstream. A new protocol adds a row.
 */
import Anthropic from '@anthropic-ai/sdk';
import { ConverseCommand, ConverseStreamCommand } from '@aws-sdk/client-bedrock-runtime';
import { GoogleGenAI } from '@google/genai';
import OpenAI, { AzureOpenAI } from 'openai';
import { expect } from 'vitest';
import {
  startAnthropicUpstream,
  startAzureOpenAiUpstream,
  startBedrockUpstream,
  startGeminiUpstream,
  startOpenAiUpstream,
  testProviderKey,
  type FakeUpstream,
} from '../support/fake-upstreams.js';
import type { TenantSpec } from '../support/tenant.js';
import { anthropicFor, bedrockFor, gatewayFetch, openAiFor, type Tenant } from './gateway-support.js';

export const KEY = testProviderKey('protocols');
const AZURE_API_VERSION = '2024-10-21';
/** The usage every metered scenario's fake reports (input with cached, output, cached). */
export const USAGE = { input: 12, output: 7, cached: 3 };
export const USAGE_HEADER = { 'x-fake-usage': `${USAGE.input},${USAGE.output},${USAGE.cached}` };

export type Headers = Record<string, string>;

/** What a row's SDK call gave back: the gateway's request id, and the answer's text. */
interface Answer {
  requestId: string;
  text: string;
}

export interface Row {
  name: string;
  profile: NonNullable<TenantSpec['profile']>;
  /** What its connection needs beyond its profile, base URL and key (Bedrock's region). */
  connection?: Partial<TenantSpec>;
  start(): Promise<FakeUpstream>;
  /** A metered call through the SDK (`maxTokens` undefined: none asked). */
  call(tenant: Tenant, o: { model: string; maxTokens?: number; stream: boolean; headers?: Headers }): Promise<Answer>;
  /** The model list through the SDK; a string: why the API has none (its scenario does not apply, and says why). */
  models: ((tenant: Tenant) => Promise<string[]>) | string;
  /** The upstream path a metered call of `model` reached (`stream`: a streamed one). */
  meteredPath(model: string, stream?: boolean): string;
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

export const requestIdOf = (headers: globalThis.Headers) => headers.get('x-nexus-request-id')!;

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
  const body = JSON.parse(e.message.slice(e.message.indexOf('{'))) as { error: { message: string; request_id: string; status: string } };
  // Google's shape: its google.rpc status beside the message.
  expect(['UNAUTHENTICATED', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED']).toContain(body.error.status);
  return { status: e.status, message: body.error.message, requestId: body.error.request_id };
}

export const ROWS: Row[] = [
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
      expect(['authentication_error', 'permission_error', 'rate_limit_error', 'invalid_request_error']).toContain(e.error?.error?.type);
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
    meteredPath: (model, stream) => `/v1beta/models/${model}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`,
    capOf: (sent) => sent.generationConfig?.maxOutputTokens,
    credential: (tenant) => ({ 'x-goog-api-key': tenant.apiKey }),
    shown: geminiShown,
    foreignPath: 'v1/chat/completions',
    rawPath: 'v1beta/models/gpt-4o:streamGenerateContent?alt=sse',
    system: 'gcp.gemini',
  },
  {
    name: 'bedrock (@aws-sdk/client-bedrock-runtime, Converse)',
    profile: 'bedrock',
    connection: { aws: { awsRegion: 'us-east-1' } },
    start: () => startBedrockUpstream({ apiKeys: [KEY] }),
    async call(tenant, o) {
      const seen: { requestId?: string } = {};
      const client = bedrockFor(tenant, bedrockHeaders(o.headers), seen);
      const request = {
        modelId: o.model,
        messages: [{ role: 'user' as const, content: [{ text: 'Hello there' }] }],
        ...(o.maxTokens !== undefined ? { inferenceConfig: { maxTokens: o.maxTokens } } : {}),
      };
      if (!o.stream) {
        const answer = await client.send(new ConverseCommand(request));
        const text = answer.output?.message?.content?.map((c) => c.text ?? '').join('') ?? '';
        return { requestId: seen.requestId!, text };
      }
      const answer = await client.send(new ConverseStreamCommand(request));
      let text = '';
      for await (const event of answer.stream!) text += event.contentBlockDelta?.delta?.text ?? '';
      return { requestId: seen.requestId!, text };
    },
    // Bedrock Runtime has no model list: ListFoundationModels is the control plane's (bedrock.{region}), which a
    // bedrock connection does not reach; its one free call is CountTokens (gateway.bedrock.test.ts).
    models: 'Bedrock Runtime has no model list (ListFoundationModels is the control-plane API, not Runtime)',
    meteredPath: (model, stream) => `/model/${model}/${stream ? 'converse-stream' : 'converse'}`,
    capOf: (sent) => sent.inferenceConfig?.maxTokens,
    credential: (tenant) => ({ authorization: `Bearer ${tenant.apiKey}` }),
    shown(err) {
      const e = err as Error & {
        $metadata: { httpStatusCode: number; requestId?: string };
        $response?: { headers: Record<string, string> };
      };
      // The AWS SDK raised the exception the gateway named (x-amzn-errortype), with Nexus's request id: a 429 is
      // the quota used up (its message says what is available) or a rate limit.
      const quota = /units; \d+ are available$/.test(e.message);
      const expected: Record<number, string> = {
        401: 'AccessDeniedException',
        403: 'AccessDeniedException',
        429: quota ? 'ServiceQuotaExceededException' : 'ThrottlingException',
        400: 'ValidationException',
      };
      expect(e.name).toBe(expected[e.$metadata.httpStatusCode]);
      if (e.$response) expect(e.$metadata.requestId).toBe(e.$response.headers['x-nexus-request-id']);
      return { status: e.$metadata.httpStatusCode, message: e.message, requestId: e.$metadata.requestId };
    },
    foreignPath: 'v1/chat/completions',
    rawPath: 'model/gpt-4o/converse-stream',
    system: 'aws.bedrock',
  },
];

/** The shared x-fake-usage (input with its cached part, output, cached) as Bedrock reports it: input without the cache reads. */
function bedrockHeaders(headers: Headers = {}): Headers {
  const usage = headers['x-fake-usage'];
  if (!usage) return headers;
  const [input = 0, output = 0, cached = 0] = usage.split(',').map(Number);
  return { ...headers, 'x-fake-usage': `${input - cached},${output},${cached},0` };
}

/** A metered stream through fetch, on the row's path, with the SDK's credential. */
export const rawStream = (row: Row, tenant: Tenant, headers: Headers) =>
  gatewayFetch()(`${tenant.gatewayBaseUrl}/${row.rawPath}`, {
    method: 'POST',
    headers: { ...row.credential(tenant), 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'gpt-4o', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
  });

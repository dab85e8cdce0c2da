/**
 * Traces through HTTP, into an in-memory exporter: a span per Admin operation (named by its operationId)
 * and per gateway call, with the admission, the upstream call and the record under it; the caller's
 * traceparent is the call's parent, and the upstream receives the upstream span's. A call through a route has
 * a client span per attempt. GenAI attributes, and no secret in any attribute.
 */
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProviderConnection, createRoute, createWorkspace, getInvocation, listInvocations } from '../support/sdk.js';
import { SECRET_MARKER, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startFaultyUpstream, type FaultyUpstream } from '../support/upstreams/faulty.js';
import { createTenant, gatewayFetch, type Tenant } from '../gateway/gateway-support.js';

let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;
let flaky: FaultyUpstream;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const KEY = `${SECRET_MARKER}-tracing-upstream-0123456789`;

beforeAll(async () => {
  t = await startTestApp({ tracer: provider.getTracer('nexus-test') });
  up = await startOpenAiUpstream({ apiKey: KEY });
  flaky = await startFaultyUpstream('ok');
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 5000n });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
  await flaky?.close();
  await provider.shutdown();
});

const openai = (headers: Record<string, string> = {}) =>
  new OpenAI({
    baseURL: `${tenant.gatewayBaseUrl}/v1`,
    apiKey: tenant.apiKey,
    fetch: gatewayFetch(),
    maxRetries: 0,
    defaultHeaders: headers,
  });

const spans = () => exporter.getFinishedSpans();
const childrenOf = (parent: ReadableSpan) => spans().filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId);
const callSpan = (requestId: string) => {
  const found = spans().filter((s) => s.attributes['nexus.request_id'] === requestId);
  expect(found, requestId).toHaveLength(1);
  return found[0]!;
};

describe('traces', () => {
  it('makes a span per Admin operation, named by its operationId', async () => {
    const traceId = 'a'.repeat(32);
    const res = await createWorkspace({
      client: t.client,
      body: { name: 'traced' },
      headers: { traceparent: `00-${traceId}-${'b'.repeat(16)}-01` },
    });
    expect(res.response.status).toBe(201);
    const span = callSpan(res.response.headers.get('x-request-id')!);
    expect(span.name).toBe('createWorkspace');
    expect(span.kind).toBe(SpanKind.SERVER);
    expect(span.spanContext().traceId).toBe(traceId);
    expect(span.parentSpanContext?.spanId).toBe('b'.repeat(16));
    expect(span.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.response.status_code': 201,
      'url.path': '/admin/v1/workspaces',
    });
  });

  it("traces a gateway call under the caller's traceparent, and sends the upstream span's to the upstream", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const parentId = '00f067aa0ba902b7';
    const seen = up.requests.length;
    const { response } = await openai({ traceparent: `00-${traceId}-${parentId}-01`, 'x-fake-usage': '30,9,4' })
      .chat.completions.create({ model: 'gpt-trace', messages: [{ role: 'user', content: 'trace me' }], max_tokens: 40 })
      .withResponse();
    const requestId = response.headers.get('x-nexus-request-id')!;
    await t.nexus.gateway.drain();

    const call = callSpan(requestId);
    expect(call.name).toBe('proxyProviderPost');
    expect(call.kind).toBe(SpanKind.SERVER);
    expect(call.spanContext().traceId).toBe(traceId);
    expect(call.parentSpanContext?.spanId).toBe(parentId);
    expect(call.attributes).toMatchObject({
      'http.response.status_code': 200,
      'nexus.workspace_id': tenant.workspaceId,
      'nexus.connection_id': tenant.connectionId,
      'nexus.outcome': 'SUCCEEDED',
      'gen_ai.system': 'openai',
      'gen_ai.request.model': 'gpt-trace',
      'gen_ai.usage.input_tokens': 30,
      'gen_ai.usage.output_tokens': 9,
    });

    const children = childrenOf(call);
    expect(children.map((s) => s.name).sort()).toEqual(['admission', 'chat gpt-trace', 'record']);
    const upstream = children.find((s) => s.name === 'chat gpt-trace')!;
    expect(upstream.kind).toBe(SpanKind.CLIENT);
    expect(upstream.attributes).toMatchObject({
      'gen_ai.system': 'openai',
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'gpt-trace',
      'gen_ai.request.max_tokens': 40,
      'gen_ai.response.model': expect.any(String),
      'gen_ai.usage.input_tokens': 30,
      'gen_ai.usage.cache_read.input_tokens': 4,
      'gen_ai.usage.output_tokens': 9,
      'http.response.status_code': 200,
      'server.address': '127.0.0.1',
    });
    // The upstream got the upstream span's context, in the same trace.
    const sent = up.requests.slice(seen).find((r) => r.url.endsWith('/chat/completions'))!;
    expect(sent.headers.traceparent).toBe(`00-${traceId}-${upstream.spanContext().spanId}-01`);

    // The invocation records the trace id.
    const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    const invocation = await getInvocation({
      client: t.client,
      path: { invocationId: list.data!.find((i) => i.requestId === requestId)!.id },
    });
    expect(invocation.data!.traceId).toBe(traceId);
  });

  it('starts a trace for a call that came without one, streamed too', async () => {
    const stream = await openai()
      .chat.completions.create({ model: 'gpt-trace', messages: [{ role: 'user', content: 'sse' }], max_tokens: 20, stream: true })
      .withResponse();
    for await (const _ of stream.data) void _;
    await t.nexus.gateway.drain();
    const call = callSpan(stream.response.headers.get('x-nexus-request-id')!);
    expect(call.parentSpanContext).toBeUndefined();
    expect(
      childrenOf(call)
        .map((s) => s.name)
        .sort(),
    ).toEqual(['admission', 'chat gpt-trace', 'record']);
    const sent = up.requests.at(-1)!;
    expect(String(sent.headers.traceparent)).toMatch(new RegExp(`^00-${call.spanContext().traceId}-[\\da-f]{16}-01$`));
  });

  it('marks a refused admission, and an invalid key has a span of its own', async () => {
    const poor = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 10n });
    const refused = await new OpenAI({
      baseURL: `${poor.gatewayBaseUrl}/v1`,
      apiKey: poor.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
    }).chat.completions
      .create({ model: 'gpt-trace', messages: [], max_tokens: 1000 })
      .catch((err: { status: number; headers: Headers }) => err);
    expect((refused as { status: number }).status).toBe(429);
    await t.nexus.gateway.drain();
    const call = callSpan((refused as { headers: Headers }).headers.get('x-nexus-request-id')!);
    expect(call.attributes).toMatchObject({
      'http.response.status_code': 429,
      'error.type': 'quota_insufficient',
      'nexus.outcome': 'REJECTED',
    });
    expect(call.status.code).toBe(SpanStatusCode.UNSET);
    const children = childrenOf(call);
    expect(children.map((s) => s.name).sort()).toEqual(['admission', 'record']);
    expect(children.find((s) => s.name === 'admission')!.attributes['error.type']).toBe('quota_insufficient');

    const res = await fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer nx-test-not-a-key', 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(401);
    const early = callSpan(res.headers.get('x-nexus-request-id')!);
    expect(early.attributes).toMatchObject({ 'http.response.status_code': 401, 'error.type': 'invalid_inference_key' });
    expect(childrenOf(early)).toEqual([]);
  });

  it('gives each attempt of a call through a route its own client span: a retry and a fallback, each with why it moved on', async () => {
    const conn = await createProviderConnection({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'flaky', protocolProfile: 'openai', baseUrl: flaky.url, apiKey: KEY },
    });
    expect(conn.response.status).toBe(201);
    const flakyId = conn.data!.id;
    const route = await createRoute({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        name: 'traced',
        targets: [{ providerConnectionId: flakyId, attempts: 2 }, { providerConnectionId: tenant.connectionId }],
        retry: { baseDelayMs: 50, maxDelayMs: 50 },
      },
    });
    expect(route.response.status).toBe(201);
    await t.nexus.gateway.refreshRoutes();
    // The flaky target fails twice (the first attempt and its retry), then the call moves on to the healthy one.
    flaky.script = ['status-500', 'status-500'];
    const seen = up.requests.length;
    const { response } = await new OpenAI({
      baseURL: `${route.data!.gatewayBaseUrl}/v1`,
      apiKey: tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
    }).chat.completions
      .create({ model: 'gpt-trace', messages: [{ role: 'user', content: 'route me' }], max_tokens: 40 })
      .withResponse();
    expect(response.headers.get('x-nexus-attempts')).toBe('3');
    await t.nexus.gateway.drain();

    const call = callSpan(response.headers.get('x-nexus-request-id')!);
    expect(call.attributes).toMatchObject({ 'http.response.status_code': 200, 'nexus.outcome': 'SUCCEEDED' });
    const attempts = childrenOf(call)
      .filter((s) => s.kind === SpanKind.CLIENT)
      .sort((a, b) => (a.startTime[0] - b.startTime[0]) * 1e9 + (a.startTime[1] - b.startTime[1]));
    expect(attempts).toHaveLength(3);
    expect(new Set(attempts.map((s) => s.spanContext().spanId)).size).toBe(3);
    expect(
      childrenOf(call)
        .filter((s) => s.kind !== SpanKind.CLIENT)
        .map((s) => s.name)
        .sort(),
    ).toEqual(['admission', 'record']);
    for (const [i, failed] of attempts.slice(0, 2).entries()) {
      expect(failed.attributes).toMatchObject({
        'nexus.attempt': i + 1,
        'nexus.connection_id': flakyId,
        'gen_ai.request.model': 'gpt-trace',
        'error.type': 'upstream_status',
        'http.response.status_code': 500,
        'server.address': '127.0.0.1',
      });
      expect(failed.status.code).toBe(SpanStatusCode.ERROR);
    }
    // The retry began after the first attempt ended (its backoff between them).
    const endOf = (s: ReadableSpan) => s.endTime[0] * 1e3 + s.endTime[1] / 1e6;
    const startOf = (s: ReadableSpan) => s.startTime[0] * 1e3 + s.startTime[1] / 1e6;
    expect(startOf(attempts[1]!)).toBeGreaterThanOrEqual(endOf(attempts[0]!));
    const answered = attempts[2]!;
    expect(answered.name).toBe('chat gpt-trace');
    expect(answered.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(answered.attributes).toMatchObject({
      'gen_ai.request.model': 'gpt-trace',
      'http.response.status_code': 200,
      'gen_ai.usage.input_tokens': expect.any(Number),
    });
    expect(answered.attributes['error.type']).toBeUndefined();
    // The healthy upstream got the answered attempt's own span as its parent.
    const sent = up.requests.slice(seen).find((r) => r.url.endsWith('/chat/completions'))!;
    expect(sent.headers.traceparent).toBe(`00-${call.spanContext().traceId}-${answered.spanContext().spanId}-01`);
  });

  it('puts no secret in any span', () => {
    expect(spans().length).toBeGreaterThan(10);
    const all = JSON.stringify(spans().map((s) => ({ name: s.name, attributes: s.attributes, events: s.events })));
    expect(all).not.toContain(SECRET_MARKER);
    expect(all).not.toContain(tenant.apiKey);
  });
});

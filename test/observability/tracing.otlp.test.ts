/**
 * A Nexus process started with OTEL_EXPORTER_OTLP_ENDPOINT sends its spans over OTLP/HTTP to a receiver
 * this test runs (a plain HTTP server on 127.0.0.1 taking /v1/traces): the gateway call's spans and an
 * Admin operation's arrive with their names, in the caller's trace, and the upstream received a
 * traceparent of that trace. The spans still buffered are sent when the process stops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../generated/client/client/index.js';
import { createWorkspace } from '../support/sdk.js';
import { contractFetch } from '../support/contract.js';
import { SECRET_MARKER, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { closeServer, listenLocal } from '../support/local-server.js';
import { startNexusProcess, type NexusProcess } from '../support/nexus-process.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, type Tenant } from '../gateway/gateway-support.js';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
const KEY = `${SECRET_MARKER}-otlp-upstream-0123456789`;

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: { key: string; value: Record<string, unknown> }[];
}
interface OtlpExport {
  resourceSpans: { resource?: { attributes?: OtlpSpan['attributes'] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
}

let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;
let receiver: Server;
let receiverUrl: string;
let nexus: NexusProcess | undefined;
let dataDir: string;
const exports: { path: string; contentType: string; body: OtlpExport }[] = [];

beforeAll(async () => {
  if (!usesPostgres) return;
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let raw = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') raw = gunzipSync(raw);
      exports.push({
        path: req.url!,
        contentType: String(req.headers['content-type']),
        body: JSON.parse(raw.toString('utf8')) as OtlpExport,
      });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  receiverUrl = await listenLocal(receiver);
  dataDir = mkdtempSync(join(tmpdir(), 'nexus-otlp-'));
});
afterAll(async () => {
  await nexus?.kill();
  await t?.close();
  await up?.close();
  await closeServer(receiver);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  return value ? Object.values(value)[0] : undefined;
};

describe.runIf(usesPostgres)('traces over OTLP/HTTP from a Nexus process', () => {
  // A process started through tsx takes seconds to start on a busy machine.
  it('sends the spans of a gateway call and of an Admin operation to the endpoint', { timeout: 120_000 }, async () => {
    nexus = await startNexusProcess({
      DATABASE_URL: t.database.url!,
      NEXUS_DATABASE_SCHEMA: t.database.schema!,
      NEXUS_DATA_DIR: dataDir,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
      OTEL_SERVICE_NAME: 'nexus-otlp-test',
    });
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const parentId = 'b7ad6b7169203331';
    const client = new OpenAI({
      baseURL: `${tenant.gatewayBaseUrl.replace(t.url, nexus.url)}/v1`,
      apiKey: tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
      defaultHeaders: { traceparent: `00-${traceId}-${parentId}-01` },
    });
    const seen = up.requests.length;
    await client.chat.completions.create({ model: 'gpt-otlp', messages: [{ role: 'user', content: 'over otlp' }], max_tokens: 20 });
    const admin = createClient({ baseUrl: nexus.url, fetch: contractFetch(), headers: { Authorization: `Bearer ${TEST_ROOT_KEY}` } });
    expect((await createWorkspace({ client: admin, body: { name: 'otlp' } })).response.status).toBe(201);
    // Stopping flushes the spans the batch processor still holds (the record's ends once it is written).
    expect(await nexus.stop()).toBe(0);

    expect(exports.length).toBeGreaterThan(0);
    for (const e of exports) {
      expect(e.path).toBe('/v1/traces');
      expect(e.contentType).toMatch(/^application\/json/);
    }
    const resources = exports.flatMap((e) => e.body.resourceSpans);
    expect(
      resources.every((r) => r.resource?.attributes?.some((a) => a.key === 'service.name' && a.value.stringValue === 'nexus-otlp-test')),
    ).toBe(true);
    const spans = resources.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
    const call = spans.find((s) => s.name === 'proxyProviderPost')!;
    expect(call, JSON.stringify(spans.map((s) => s.name))).toBeTruthy();
    expect(call.traceId).toBe(traceId);
    expect(call.parentSpanId).toBe(parentId);
    expect(attribute(call, 'gen_ai.request.model')).toBe('gpt-otlp');
    const children = spans.filter((s) => s.parentSpanId === call.spanId);
    expect(children.map((s) => s.name).sort()).toEqual(['admission', 'chat gpt-otlp', 'record']);
    const upstream = children.find((s) => s.name === 'chat gpt-otlp')!;
    expect(attribute(upstream, 'gen_ai.system')).toBe('openai');
    expect(spans.some((s) => s.name === 'createWorkspace')).toBe(true);

    // The upstream received a traceparent of the same trace, naming the upstream span.
    const sent = up.requests.slice(seen).find((r) => r.url.endsWith('/chat/completions'))!;
    expect(sent.headers.traceparent).toBe(`00-${traceId}-${upstream.spanId}-01`);
    expect(JSON.stringify(exports)).not.toContain(SECRET_MARKER);
  });
});

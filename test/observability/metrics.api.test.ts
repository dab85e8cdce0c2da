/**
 * GET /metrics after real gateway calls through the official SDK: calls by workspace, connection, model
 * and outcome, tokens and units charged, refusals by reason, the upstream, TTFT and added-latency
 * histograms, the recorder and the database pools; no per-user label. The model label's cap is a pure
 * rule, checked on the metrics object itself.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics, MAX_MODELS } from '../../src/observability/metrics.js';
import type { InvocationRow } from '../../src/domain/invocations/invocation-types.js';
import { listInvocations } from '../support/sdk.js';
import { SECRET_MARKER, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, type Tenant } from '../gateway/gateway-support.js';
import { projectRoot } from '../support/paths.js';
import { has, parseMetrics, sumOf } from './prom-text.js';

let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;
let poor: Tenant;
const KEY = `${SECRET_MARKER}-metrics-upstream-0123456789`;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
  poor = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 10n });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const openai = (apiKey: string, baseUrl: string, headers: Record<string, string> = {}) =>
  new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, fetch: gatewayFetch(), maxRetries: 0, defaultHeaders: headers });

async function scrape() {
  const res = await fetch(`${t.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return { text: await res.text(), samples: parseMetrics(await (await fetch(`${t.url}/metrics`)).text()) };
}

describe('GET /metrics', () => {
  it('counts gateway calls, tokens, units, refusals and latencies with bounded labels', async () => {
    const client = openai(tenant.apiKey, tenant.gatewayBaseUrl, { 'x-fake-usage': '100,7,20' });
    await client.chat.completions.create({ model: 'gpt-metrics', messages: [{ role: 'user', content: 'json' }], max_tokens: 50 });
    const stream = await client.chat.completions.create({
      model: 'gpt-metrics',
      messages: [{ role: 'user', content: 'sse' }],
      max_tokens: 50,
      stream: true,
    });
    for await (const _ of stream) void _;
    // A refusal for quota (its bound is more than the access has), and one before any key is known.
    await expect(
      openai(poor.apiKey, poor.gatewayBaseUrl).chat.completions.create({ model: 'gpt-metrics', messages: [], max_tokens: 1000 }),
    ).rejects.toMatchObject({ status: 429 });
    await expect(
      openai('nx-test-not-a-key', tenant.gatewayBaseUrl).chat.completions.create({ model: 'gpt-metrics', messages: [] }),
    ).rejects.toMatchObject({
      status: 401,
    });
    await t.nexus.gateway.drain();

    const { text, samples } = await scrape();
    const series = { workspace: tenant.workspaceId, connection: tenant.connectionId, model: 'gpt-metrics' };
    expect(sumOf(samples, 'nexus_gateway_calls_total', { ...series, status: 'succeeded' })).toBe(2);
    expect(sumOf(samples, 'nexus_gateway_calls_total', { workspace: poor.workspaceId, model: 'gpt-metrics', status: 'rejected' })).toBe(1);
    expect(sumOf(samples, 'nexus_gateway_tokens_total', { ...series, kind: 'input' })).toBe(200);
    expect(sumOf(samples, 'nexus_gateway_tokens_total', { ...series, kind: 'cached' })).toBe(40);
    expect(sumOf(samples, 'nexus_gateway_tokens_total', { ...series, kind: 'output' })).toBe(14);
    const recorded = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    const charged = recorded.data!.reduce((sum, i) => sum + Number(i.quotaUnits), 0);
    expect(charged).toBeGreaterThan(0);
    expect(sumOf(samples, 'nexus_gateway_units_total', series)).toBe(charged);
    expect(sumOf(samples, 'nexus_gateway_refusals_total', { reason: 'quota_insufficient' })).toBe(1);
    expect(sumOf(samples, 'nexus_gateway_refusals_total', { reason: 'invalid_inference_key' })).toBe(1);

    const conn = { workspace: tenant.workspaceId, connection: tenant.connectionId };
    expect(sumOf(samples, 'nexus_gateway_upstream_duration_seconds_count', conn)).toBe(2);
    expect(sumOf(samples, 'nexus_gateway_upstream_ttft_seconds_count', conn)).toBe(1);
    expect(sumOf(samples, 'nexus_gateway_added_latency_seconds_count')).toBe(2);
    expect(sumOf(samples, 'nexus_gateway_added_latency_seconds_sum')).toBeGreaterThan(0);

    // The recorder wrote everything: nothing queued, nothing spooled, batches counted.
    expect(sumOf(samples, 'nexus_recorder_queue_depth')).toBe(0);
    expect(sumOf(samples, 'nexus_recorder_spooled_records')).toBe(0);
    expect(sumOf(samples, 'nexus_recorder_database_away')).toBe(0);
    expect(sumOf(samples, 'nexus_recorder_batch_size_sum')).toBe(3);
    expect(has(samples, 'nexus_quota_lease_statements_total', { kind: 'acquire' })).toBe(true);
    for (const pool of ['main', 'gateway']) {
      expect(has(samples, 'nexus_db_pool_connections_in_use', { pool }), pool).toBe(true);
      expect(has(samples, 'nexus_db_pool_pending_acquires', { pool }), pool).toBe(true);
      expect(sumOf(samples, 'nexus_db_pool_max_connections', { pool }), pool).toBeGreaterThan(0);
    }

    // No per-user or per-key label, and no secret.
    for (const id of [tenant.accessId, tenant.apiKeyId, poor.accessId]) expect(text).not.toContain(id);
    expect(text).not.toContain(tenant.apiKey);
    expect(text).not.toContain(SECRET_MARKER);
  });
});

describe('the process and build metrics', () => {
  it("exports prom-client's defaults under their standard names, one event-loop lag, no gauge named like a counter", async () => {
    const text = await (await fetch(`${t.url}/metrics`)).text();
    const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
      'nodejs_gc_duration_seconds',
      'nodejs_active_handles',
    ]) {
      expect(types.has(name), name).toBe(true);
    }
    expect([...types.keys()].filter((name) => /^nexus_(process|nodejs)_/.test(name))).toEqual([]);
    expect([...types].filter(([name, type]) => type === 'gauge' && name.endsWith('_total'))).toEqual([]);
    expect([...types.keys()].filter((name) => /lag/.test(name))).toEqual(['nexus_event_loop_lag_seconds']);
  });

  it('says which build runs: nexus_build_info{version, commit, node} = 1', async () => {
    const version = (JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;
    const samples = parseMetrics(await (await fetch(`${t.url}/metrics`)).text());
    // Run from the sources, with no NEXUS_COMMIT: the commit is not known.
    expect(samples.filter((s) => s.name === 'nexus_build_info')).toEqual([
      { name: 'nexus_build_info', labels: { version, commit: 'unknown', node: process.versions.node }, value: 1 },
    ]);
    const other = await t.withEnv({ NEXUS_COMMIT: '0123abcd' });
    try {
      const named = parseMetrics(await (await fetch(`${other.url}/metrics`)).text());
      expect(sumOf(named, 'nexus_build_info', { version, commit: '0123abcd', node: process.versions.node })).toBe(1);
    } finally {
      await other.close();
    }
  });

  it("counts an upstream's 500, relayed, as the upstream's and not as a 500 of Nexus", async () => {
    const before = parseMetrics(await (await fetch(`${t.url}/metrics`)).text());
    const count = (samples: typeof before, source: string) =>
      sumOf(samples, 'nexus_http_requests_total', { operation: 'proxyProviderPost', status: '500', source });
    const res = await fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', 'x-fake-fault': 'status-500' },
      body: JSON.stringify({ model: 'gpt-metrics', messages: [{ role: 'user', content: 'x' }], max_tokens: 5 }),
    });
    expect(res.status).toBe(500);
    await res.text();
    // A refusal of Nexus's own in the same family, for contrast.
    const refused = await fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, { method: 'POST', body: '{}' });
    expect(refused.status).toBe(401);
    await refused.text();
    await t.nexus.gateway.drain();
    const after = parseMetrics(await (await fetch(`${t.url}/metrics`)).text());
    expect(count(after, 'upstream') - count(before, 'upstream')).toBe(1);
    expect(count(after, 'nexus') - count(before, 'nexus')).toBe(0);
    expect(
      sumOf(after, 'nexus_http_requests_total', { operation: 'proxyProviderPost', status: '401', source: 'nexus' }),
    ).toBeGreaterThanOrEqual(1);
    expect(sumOf(after, 'nexus_http_requests_total', { operation: 'proxyProviderPost', status: '401', source: 'upstream' })).toBe(0);
  });
});

describe('the per-call metrics', () => {
  const invocation = (model: string): InvocationRow =>
    ({
      id: 'inv',
      workspace_id: 'ws',
      workspace_access_id: 'acc',
      provider_connection_id: 'conn',
      requested_model: model,
      status: 'SUCCEEDED',
      error_code: null,
      provider_latency_ms: 10,
      nexus_latency_ms: 0.2,
      provider_ttft_ms: null,
    }) as InvocationRow;

  it(`labels the first ${MAX_MODELS} model names a process sees, then counts the others as "other"`, async () => {
    const metrics = createMetrics();
    for (let i = 0; i < MAX_MODELS + 5; i++) metrics.callEnded(invocation(`model-${i}`), null);
    metrics.callEnded(invocation('model-0'), null);
    metrics.callEnded(invocation(''), null);
    const samples = parseMetrics(await metrics.registry.metrics()).filter((s) => s.name === 'nexus_gateway_calls_total');
    expect(new Set(samples.map((s) => s.labels.model)).size).toBe(MAX_MODELS + 2);
    expect(sumOf(samples, 'nexus_gateway_calls_total', { model: 'other' })).toBe(5);
    expect(sumOf(samples, 'nexus_gateway_calls_total', { model: 'model-0' })).toBe(2);
    expect(sumOf(samples, 'nexus_gateway_calls_total', { model: 'none' })).toBe(1);
  });

  it('puts each latency in its cumulative buckets', async () => {
    const metrics = createMetrics();
    for (const ms of [10, 12.5, 2000]) metrics.callEnded({ ...invocation('m'), provider_latency_ms: ms }, null);
    const samples = parseMetrics(await metrics.registry.metrics());
    const bucket = (le: string) => sumOf(samples, 'nexus_gateway_upstream_duration_seconds_bucket', { le, connection: 'conn' });
    expect([bucket('0.005'), bucket('0.01'), bucket('0.025'), bucket('2.5'), bucket('+Inf')]).toEqual([0, 1, 2, 3, 3]);
    expect(sumOf(samples, 'nexus_gateway_upstream_duration_seconds_sum')).toBeCloseTo(2.0225, 6);
    expect(sumOf(samples, 'nexus_gateway_upstream_duration_seconds_count')).toBe(3);
    expect(sumOf(samples, 'nexus_gateway_added_latency_seconds_count')).toBe(3);
  });
});

describe('the example Grafana dashboard (docs/grafana-dashboard.json)', () => {
  it('queries only metrics Nexus exposes', async () => {
    const dashboard = JSON.parse(readFileSync(join(projectRoot, 'docs', 'grafana-dashboard.json'), 'utf8')) as {
      panels: { targets?: { expr: string }[] }[];
    };
    const exposed = new Set((await createMetrics().registry.getMetricsAsJSON()).map((m) => m.name));
    const queried = new Set(
      dashboard.panels.flatMap((p) =>
        (p.targets ?? []).flatMap((t) => [...t.expr.matchAll(/nexus_\w+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, ''))),
      ),
    );
    expect(queried.size).toBeGreaterThan(10);
    for (const name of queried) expect(exposed, name).toContain(name);
  });
});

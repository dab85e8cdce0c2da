/**
 * A route target's health through HTTP (getRouteHealth's `windows`): the route's attempts on each target over the
 * last 5 minutes, hour and day, counted as a connection's health counts them (attempts, errors, p50/p95/p99 latency
 * and time to first token), from upstreams that answer after known delays, checked against the invocations the
 * database holds; a direct call to a target's connection counts in the connection's health, not in the route's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant } from '../gateway/gateway-support.js';
import { startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { createProviderConnection, createRoute, getProviderConnectionHealth, getRouteHealth } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let first: FakeUpstream;
let second: FakeUpstream;
const KEY = testProviderKey('route-target-health');

beforeAll(async () => {
  t = await startTestApp();
  first = await startFakeUpstream('openai', [KEY]);
  second = await startFakeUpstream('openai', [KEY]);
});
afterAll(async () => {
  await first?.close();
  await second?.close();
  await t?.close();
});

async function call(baseUrl: string, apiKey: string, stream = false) {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-health', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10, stream }),
  });
  await res.arrayBuffer();
  return res.status;
}

/** A continuous percentile (PostgreSQL's percentile_cont): linear between the two nearest of the sorted values. */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const at = p * (sorted.length - 1);
  const low = Math.floor(at);
  return sorted[low]! + (sorted[Math.ceil(at)]! - sorted[low]!) * (at - low);
}

interface Attempt {
  connection: string;
  status: string;
  ms: number;
  ttft: number | null;
}

/** Every attempt of the route's calls, as the database holds them: the answering one and those before it. */
async function routeAttempts(routeId: string): Promise<Attempt[]> {
  const rows: {
    provider_connection_id: string;
    attempt_status: string | null;
    attempt_duration_ms: number;
    ttft: number | null;
    attempts: { providerConnectionId: string; status: string; durationMs: number }[] | null;
  }[] = await t.database
    .db('invocations')
    .where({ route_id: routeId })
    .select(
      'provider_connection_id',
      'attempt_status',
      'attempt_duration_ms',
      'attempts',
      t.database.db.raw('extract(epoch from attempt_first_token_at - attempt_started_at) * 1000 as ttft'),
    );
  return rows.flatMap((r) => [
    ...(r.attempts ?? []).map((e) => ({ connection: e.providerConnectionId, status: e.status, ms: e.durationMs, ttft: null })),
    ...(r.attempt_status
      ? [
          {
            connection: r.provider_connection_id,
            status: r.attempt_status,
            ms: Number(r.attempt_duration_ms),
            ttft: r.ttft === null ? null : Number(r.ttft),
          },
        ]
      : []),
  ]);
}

const close = (api: number | undefined, expected: number) => expect(Math.abs(api! - expected)).toBeLessThanOrEqual(0.051);

describe("a route target's health", () => {
  it("has a connection's windows, for the route's attempts on the target only", async () => {
    const tenant = await createTenant(t, { baseUrl: first.url, providerKey: KEY });
    const other = await createProviderConnection({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'second', protocolProfile: 'openai', baseUrl: second.url, apiKey: KEY },
    });
    const [a, b] = [tenant.connectionId, other.data!.id];
    const route = await createRoute({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'two targets', targets: [{ providerConnectionId: a }, { providerConnectionId: b }] },
    });
    expect(route.response.status).toBe(201);
    const via = route.data!.gatewayBaseUrl;

    // The first target answers five calls after 40 to 200 ms (one streamed), then fails two (500) that the second answers.
    for (const [i, delay] of [40, 80, 120, 160, 200].entries()) {
      first.delayMs = delay;
      expect(await call(via, tenant.apiKey, i === 4)).toBe(200);
    }
    first.delayMs = 0;
    first.forceStatus = 500;
    second.delayMs = 60;
    for (let i = 0; i < 2; i++) expect(await call(via, tenant.apiKey)).toBe(200);
    // A direct call to the second target's connection: its connection's, not the route's.
    expect(await call(other.data!.gatewayBaseUrl, tenant.apiKey)).toBe(200);
    await t.nexus.gateway.drain();

    const health = (await getRouteHealth({ client: t.client, path: { routeId: route.data!.id } })).data!;
    const attempts = await routeAttempts(route.data!.id);
    expect(attempts.length).toBe(9);
    for (const target of health.targets) {
      const mine = attempts.filter((x) => x.connection === target.providerConnectionId);
      const errors = mine.filter((x) => x.status === 'UPSTREAM_ERROR' || x.status === 'FAILED').length;
      expect(target.windows.map((w) => w.window)).toEqual(['5m', '1h', '1d']);
      for (const w of target.windows) {
        expect(w).toMatchObject({ attempts: mine.length, errors, errorRate: errors / mine.length });
        const ms = mine.map((x) => x.ms);
        close(w.latencyMs!.p50, percentile(ms, 0.5));
        close(w.latencyMs!.p95, percentile(ms, 0.95));
        close(w.latencyMs!.p99, percentile(ms, 0.99));
        const ttft = mine.flatMap((x) => (x.ttft === null ? [] : [x.ttft]));
        if (ttft.length) close(w.timeToFirstTokenMs!.p99, percentile(ttft, 0.99));
        else expect(w.timeToFirstTokenMs).toBeUndefined();
      }
      // The median of the last hour, as the route's health has always given it.
      close(target.windows[1]!.latencyMs!.p50, target.p50LatencyMs!);
    }
    const recent = (id: string) => health.targets.find((x) => x.providerConnectionId === id)!.windows[0]!;
    const [ofA, ofB] = [recent(a), recent(b)];
    // Five answers and two 500s on the first target; its answers waited 40 to 200 ms upstream.
    expect(ofA).toMatchObject({ attempts: 7, errors: 2 });
    expect(ofA.latencyMs!.p99).toBeGreaterThanOrEqual(190);
    expect(ofA.latencyMs!.p95).toBeLessThanOrEqual(ofA.latencyMs!.p99);
    expect(ofA.timeToFirstTokenMs!.p50).toBeGreaterThanOrEqual(200);
    // The second target answered the two calls the first failed, after 60 ms each.
    expect(ofB).toMatchObject({ attempts: 2, errors: 0, errorRate: 0 });
    expect(ofB.latencyMs!.p50).toBeGreaterThanOrEqual(60);
    // Its connection's health counts the direct call too.
    const connection = (await getProviderConnectionHealth({ client: t.client, path: { providerConnectionId: b } })).data!;
    expect(connection.windows[0]).toMatchObject({ attempts: 3, errors: 0 });
  });

  it('has empty windows for a target without attempts', async () => {
    const tenant = await createTenant(t, { baseUrl: first.url, providerKey: KEY });
    const route = await createRoute({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'idle', targets: [{ providerConnectionId: tenant.connectionId }] },
    });
    const health = (await getRouteHealth({ client: t.client, path: { routeId: route.data!.id } })).data!;
    expect(health.targets[0]!.windows).toEqual([
      expect.objectContaining({ window: '5m', attempts: 0, errors: 0 }),
      expect.objectContaining({ window: '1h', attempts: 0, errors: 0 }),
      expect.objectContaining({ window: '1d', attempts: 0, errors: 0 }),
    ]);
    expect(health.targets[0]!.windows[0]!.latencyMs).toBeUndefined();
  });
});

/**
 * A connection's health through HTTP (getProviderConnectionHealth): every attempt that reached its provider, direct
 * and through a route (the route's attempts that failed before another target answered included), with its errors,
 * latency and time to first token over the last 5 minutes, hour and day; a failed Verify makes it failing, and the
 * connection says so; the metric counts the same attempts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenant } from '../gateway/gateway-support.js';
import { startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import {
  createProviderConnection,
  createRoute,
  getProviderConnection,
  getProviderConnectionHealth,
  verifyProviderConnection,
} from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let up: FakeUpstream;
let broken: FakeUpstream;
const KEY = testProviderKey('connection-health');

beforeAll(async () => {
  t = await startTestApp();
  up = await startFakeUpstream('openai', [KEY]);
  broken = await startFakeUpstream('openai', [KEY]);
  broken.forceStatus = 500;
});
afterAll(async () => {
  await up?.close();
  await broken?.close();
  await t?.close();
});

async function call(baseUrl: string, apiKey: string, o: { stream?: boolean; fault?: string } = {}) {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...(o.fault ? { 'x-fake-fault': o.fault } : {}) },
    body: JSON.stringify({ model: 'gpt-health', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10, stream: o.stream ?? false }),
  });
  await res.arrayBuffer();
  return res.status;
}

describe("a connection's health", () => {
  it('counts direct and route attempts, their errors and latencies; a failed Verify turns it failing', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const good = tenant.connectionId;
    const bad = await createProviderConnection({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'broken', protocolProfile: 'openai', baseUrl: broken.url, apiKey: KEY },
    });
    const route = await createRoute({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'fallback', targets: [{ providerConnectionId: bad.data!.id }, { providerConnectionId: good }] },
    });
    expect(route.response.status).toBe(201);

    // Direct: 3 answered (one streamed), 1 provider error. Through the route: the broken target fails twice, the good one answers.
    for (let i = 0; i < 2; i++) expect(await call(tenant.gatewayBaseUrl, tenant.apiKey)).toBe(200);
    expect(await call(tenant.gatewayBaseUrl, tenant.apiKey, { stream: true })).toBe(200);
    expect(await call(tenant.gatewayBaseUrl, tenant.apiKey, { fault: 'status-500' })).toBe(500);
    for (let i = 0; i < 2; i++) expect(await call(route.data!.gatewayBaseUrl, tenant.apiKey)).toBe(200);
    // A call refused before any provider (an unknown key) reaches none.
    expect(await call(tenant.gatewayBaseUrl, 'nx-not-a-key')).toBe(401);
    await t.nexus.gateway.drain();

    const health = (await getProviderConnectionHealth({ client: t.client, path: { providerConnectionId: good } })).data!;
    expect(health.windows.map((w) => w.window)).toEqual(['5m', '1h', '1d']);
    // The streamed answer's first byte came within its attempt, so within the slowest attempt (which p99, interpolated
    // between the two slowest of six, may be below: when the stream is the slowest, its first byte can pass p99).
    const [{ slowest }] = await t.database.db('invocations').where({ provider_connection_id: good }).max({ slowest: 'attempt_duration_ms' });
    for (const w of health.windows) {
      expect(w).toMatchObject({ attempts: 6, errors: 1, errorRate: 1 / 6 });
      expect(w.latencyMs!.p50).toBeGreaterThan(0);
      expect(w.latencyMs!.p50).toBeLessThanOrEqual(w.latencyMs!.p95);
      expect(w.latencyMs!.p95).toBeLessThanOrEqual(w.latencyMs!.p99);
      // Read for every answer (a fast upstream on loopback may give its first byte within the millisecond).
      expect(w.timeToFirstTokenMs!.p50).toBeGreaterThanOrEqual(0);
      expect(w.timeToFirstTokenMs!.p50).toBeLessThanOrEqual(Number(slowest));
    }
    // One error in six: degraded.
    expect(health.status).toBe('degraded');
    expect(health.verify).toBeUndefined();
    // The same attempts, as the database has them.
    const rows = await t.database.db('invocations').where({ workspace_id: tenant.workspaceId }).select('attempt_status', 'attempts');
    const answered = rows.filter((r: { attempt_status: string | null }) => r.attempt_status !== null).length;
    expect(answered).toBe(6);

    const failing = (await getProviderConnectionHealth({ client: t.client, path: { providerConnectionId: bad.data!.id } })).data!;
    expect(failing.windows[0]).toMatchObject({ attempts: 2, errors: 2, errorRate: 1 });
    expect(failing.windows[0]!.timeToFirstTokenMs).toBeUndefined();
    // Two attempts are too few to call it failing on traffic alone...
    expect(failing.status).toBe('degraded');
    // ...but a failed Verify is.
    const verified = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: bad.data!.id } });
    expect(verified.data!.outcome).not.toBe('reachable');
    const after = (await getProviderConnectionHealth({ client: t.client, path: { providerConnectionId: bad.data!.id } })).data!;
    expect(after).toMatchObject({ status: 'failing', verify: { outcome: verified.data!.outcome } });
    const listed = (await getProviderConnection({ client: t.client, path: { providerConnectionId: bad.data!.id } })).data!;
    expect(listed.lastVerify).toMatchObject({ outcome: verified.data!.outcome });
    expect(listed.lastVerifiedAt).toBeUndefined();

    // A Verify that passes clears it.
    broken.forceStatus = undefined;
    await verifyProviderConnection({ client: t.client, path: { providerConnectionId: bad.data!.id } });
    const healed = (await getProviderConnectionHealth({ client: t.client, path: { providerConnectionId: bad.data!.id } })).data!;
    expect(healed.verify!.outcome).toBe('reachable');
    expect(healed.status).toBe('degraded');

    // The metric: every attempt on each connection, by outcome.
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    const attempts = (connection: string, outcome: string) =>
      Number(
        new RegExp(
          `nexus_gateway_upstream_attempts_total\\{workspace="${tenant.workspaceId}",connection="${connection}",outcome="${outcome}"\\} (\\d+)`,
        ).exec(metrics)?.[1] ?? 0,
      );
    expect([attempts(good, 'succeeded'), attempts(good, 'upstream_error'), attempts(bad.data!.id, 'upstream_error')]).toEqual([5, 1, 2]);
  });

  it('is 404 for a connection of another workspace or none', async () => {
    const res = await getProviderConnectionHealth({ client: t.client, path: { providerConnectionId: crypto.randomUUID() } });
    expect(res.response.status).toBe(404);
  });
});

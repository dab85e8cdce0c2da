/**
 * Hundreds of parallel calls against a small quota: no overspend, every 200 has
 * exactly one usage event, every refusal is a 429 that never reached the
 * upstream, and the reserved units return to zero.
 */
import { SECRET_MARKER } from '../security/secret-marker.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, periodOf, type Tenant } from './gateway-support.js';

let t: TestApp;
let up: FakeUpstream;
const KEY = `${SECRET_MARKER}-upstream-concurrency-0123456789`;
const CALLS = 300;
// Each call reserves bytes(body) + 2 * 10 units and consumes 10 + 2 * 5 = 20.
const QUOTA = 2000n;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

describe.each([false, true])('parallel calls (stream: %s)', (stream) => {
  it('never overspends and accounts for every call exactly once', async () => {
    const tenant: Tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: QUOTA, cachedPpm: 1_000_000n });
    const before = await periodOf(t, tenant.accessId);
    const upstreamBefore = up.requests.length;
    const body = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10, stream });
    const results = await Promise.all(
      Array.from({ length: CALLS }, async () => {
        const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0' },
          body,
        });
        const text = await res.text();
        return { status: res.status, requestId: res.headers.get('x-nexus-request-id')!, text };
      }),
    );
    await t.nexus.gateway.drain();
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 429);
    expect(ok.length + refused.length).toBe(CALLS);
    expect(ok.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) expect(JSON.parse(r.text).error.code).toBe('quota_insufficient');
    // Refusals never reached the upstream.
    expect(up.requests.length - upstreamBefore).toBe(ok.length);
    const after = await periodOf(t, tenant.accessId);
    expect(after.reserved).toBe(0n);
    expect(after.consumed - before.consumed).toBe(BigInt(ok.length) * 20n);
    expect(after.consumed).toBeLessThanOrEqual(after.granted);
    // Exactly one usage event per successful call, none for refusals.
    const invocations = await t.database
      .db('invocations')
      .whereIn(
        'request_id',
        results.map((r) => r.requestId),
      )
      .select('id', 'request_id', 'status');
    expect(invocations).toHaveLength(CALLS);
    const okIds = new Set(ok.map((r) => r.requestId));
    const events = await t.database
      .db('usage_events')
      .whereIn(
        'invocation_id',
        invocations.map((i) => i.id),
      )
      .select('invocation_id', 'kind', 'units');
    const perInvocation = new Map<string, number>();
    for (const e of events) perInvocation.set(e.invocation_id, (perInvocation.get(e.invocation_id) ?? 0) + 1);
    for (const inv of invocations) {
      if (okIds.has(inv.request_id)) {
        expect(inv.status).toBe('SUCCEEDED');
        expect(perInvocation.get(inv.id)).toBe(1);
      } else {
        expect(inv.status).toBe('REJECTED');
        expect(perInvocation.get(inv.id)).toBeUndefined();
      }
    }
    expect(events.every((e) => e.kind === 'USAGE' && BigInt(e.units) === 20n)).toBe(true);
  }, 60_000);
});

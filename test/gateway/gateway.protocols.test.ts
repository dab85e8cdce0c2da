/**
 * Every rule on every protocol: one row a protocol (protocol-rows.ts: its profile, its official SDK
 * as its users configure it, its fake upstream), and the same scenarios run over each row: exact
 * metering of a JSON answer and a stream, the model allow-list, the output cap's clamp, rate limits,
 * quota, the free model list, /v1/me, the output-bound cut, a malformed answer (charged by the
 * missing-usage rule and counted), the gateway's refusals in the API's own error shape, and a path of
 * another protocol refused with 409. Crash-safe metering (a stream's lease reclaimed under it) is
 * gateway.protocols.leases.test.ts. A new protocol adds a row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeUpstream } from '../support/fake-upstreams.js';
import type { TenantSpec } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, invocationByRequestId, periodOf, type Tenant } from './gateway-support.js';
import { KEY, rawStream, requestIdOf, ROWS, USAGE, USAGE_HEADER, type Row } from './protocol-rows.js';

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
  createTenant(t, { baseUrl: upstreams.get(row)!.url, providerKey: KEY, profile: row.profile, ...row.connection, ...spec });

const invocationOf = (tenant: Tenant, requestId: string) => invocationByRequestId(t, tenant.workspaceId, requestId);

/** The SDK's call refused: what its error shows. */
async function refusal(row: Row, call: Promise<unknown>) {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'the call was refused').toBeDefined();
  return row.shown(err);
}

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
    expect(seen.url).toBe(row.meteredPath('gpt-4o', stream));
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

  it('refuses a wrong key with 401 before the connection is known, in the shape of the API its path belongs to', async () => {
    const tenant = await tenantFor(row);
    const last = tenant.apiKey.at(-1) === 'A' ? 'B' : 'A';
    const wrong = { ...tenant, apiKey: tenant.apiKey.slice(0, -1) + last };
    const shown = await refusal(row, row.call(wrong, { model: 'gpt-4o', maxTokens: 10, stream: false }));
    expect(shown.status).toBe(401);
    expect(shown.message).toMatch(/\S/);
    expect(shown.requestId).toMatch(/\S/);
  });

  // A row whose API has no model list says why (its `models`); the scenario does not apply to it.
  it.skipIf(typeof row.models === 'string')('filters the free model list by the allow-list, taking no quota', async () => {
    const models = row.models as Exclude<Row['models'], string>;
    const tenant = await tenantFor(row, { allowedModels: ['gpt-4o', 'claude-sonnet-4-5'] });
    expect((await models(tenant)).sort()).toEqual(['claude-sonnet-4-5', 'gpt-4o']);
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

  it('charges a JSON answer without usage its whole bound, by the missing-usage rule, and counts it', async () => {
    const tenant = await tenantFor(row);
    const up = upstreams.get(row)!;
    const labels = [`protocol="${row.system}"`, 'kind="json"'];
    const before = await metric('nexus_gateway_usage_missing_total', labels);
    up.forceBody = { contentType: 'application/json', body: '{"id":"no-usage"}' };
    try {
      const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/${row.meteredPath('gpt-4o').slice(1)}`, {
        method: 'POST',
        headers: { ...row.credential(tenant), 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'gpt-4o',
          max_tokens: 50,
          generationConfig: { maxOutputTokens: 50 },
          inferenceConfig: { maxTokens: 50 },
          messages: [],
        }),
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ id: 'no-usage' });
      const inv = await invocationOf(tenant, requestIdOf(res.headers));
      expect(inv).toMatchObject({ status: 'SUCCEEDED', errorCode: 'usage_missing' });
      expect(inv.usageEvents![0]).toMatchObject({ outputTokens: '50' });
    } finally {
      up.forceBody = undefined;
    }
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
    expect(body.error.message).toMatch(/which meters (chat\/completions|messages|generateContent|converse)/);
    expect(up.requests.length).toBe(before);
  });
});

/**
 * Money through HTTP (docs/pricing.md "Cost" and "Budgets"): the price book and its bad input, the LiteLLM import,
 * each call's cost under the price in force when it started, the summary's cost against its events', unpriced calls
 * counted, and a hard budget refusing the next call on a second process.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import {
  closeModelPrice,
  createModelPrice,
  createWebhookEndpoint,
  getInvocation,
  getUsageSummary,
  getWorkspaceBudget,
  importModelPrices,
  listInvocations,
  listModelPrices,
  listUsageEvents,
  listWebhookMessages,
  setWorkspaceBudget,
  updateWorkspace,
} from '../support/sdk.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, openAiFor, until, type Tenant } from '../gateway/gateway-support.js';

let t: TestApp;
let upstream: FakeUpstream;
const KEY = `${SECRET_MARKER}-money-openai-0123456789`;
const LITELLM = JSON.parse(readFileSync(new URL('../fixtures/litellm-prices-sample.json', import.meta.url), 'utf8')) as Record<
  string,
  unknown
>;

beforeAll(async () => {
  t = await startTestApp();
  upstream = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const tenantOf = () => createTenant(t, { baseUrl: upstream.url, providerKey: KEY });
const hourAgo = () => new Date(Date.now() - 3_600_000).toISOString();

/** gpt-4o's list price: 2.50 / 1.25 cached / 10.00 per million tokens. */
const GPT_4O = { modelPattern: 'gpt-4o*', inputPerMillion: '2.50', cachedInputPerMillion: '1.25', outputPerMillion: '10' };

async function invocationOf(tenant: Tenant, requestId: string) {
  await t.nexus.gateway.drain();
  const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 100 } });
  const found = list.data!.find((i) => i.requestId === requestId);
  expect(found, `invocation ${requestId}`).toBeTruthy();
  const full = await getInvocation({ client: t.client, path: { invocationId: found!.id } });
  // The list and the invocation agree on the cost.
  expect(full.data!.costMicros).toBe(found!.costMicros);
  return full.data!;
}

async function call(tenant: Tenant, model: string, usage: string): Promise<string> {
  const res = await openAiFor(tenant, { 'x-fake-usage': usage })
    .chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 })
    .withResponse();
  return res.response.headers.get('x-nexus-request-id')!;
}

describe('the price book', () => {
  it('creates, lists and closes prices; the workspace currency is USD unless set', async () => {
    const tenant = await tenantOf();
    const created = await createModelPrice({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { ...GPT_4O, protocolProfile: 'openai', effectiveFrom: hourAgo() },
    });
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ currency: 'USD', inputPerMillion: '2.5', outputPerMillion: '10', source: 'manual' });
    expect(created.data!.effectiveTo).toBeUndefined();

    const listed = await listModelPrices({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { at: new Date().toISOString() },
    });
    expect(listed.data!.map((p) => p.id)).toEqual([created.data!.id]);

    const closed = await closeModelPrice({ client: t.client, path: { priceId: created.data!.id }, body: {} });
    expect(closed.response.status).toBe(200);
    expect(closed.data!.effectiveTo).toBeDefined();
    const again = await closeModelPrice({ client: t.client, path: { priceId: created.data!.id }, body: {} });
    expect(again.response.status).toBe(409);
    expect(again.error!.error.code).toBe('price_closed');
    const inForce = await listModelPrices({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { at: new Date().toISOString() },
    });
    expect(inForce.data).toEqual([]);
  });

  it('refuses an overlapping price of the same pattern and scope with 409, and allows it on another scope', async () => {
    const tenant = await tenantOf();
    const path = { workspaceId: tenant.workspaceId };
    const first = await createModelPrice({ client: t.client, path, body: { ...GPT_4O, effectiveFrom: hourAgo() } });
    expect(first.response.status).toBe(201);
    // Even one that starts later: the first is open-ended.
    const later = await createModelPrice({
      client: t.client,
      path,
      body: { ...GPT_4O, effectiveFrom: new Date(Date.now() + 86_400_000).toISOString() },
    });
    expect(later.response.status).toBe(409);
    expect(later.error!.error).toMatchObject({ code: 'price_overlap', param: 'modelPattern' });
    const onConnection = await createModelPrice({
      client: t.client,
      path,
      body: { ...GPT_4O, providerConnectionId: tenant.connectionId, effectiveFrom: hourAgo() },
    });
    expect(onConnection.response.status).toBe(201);
  });

  const bad: [string, Record<string, unknown>, string][] = [
    ['an unknown currency code', { currency: 'XYZ' }, 'currency'],
    ['another currency than the workspace', { currency: 'EUR' }, 'currency'],
    ['a negative price', { inputPerMillion: '-1' }, 'inputPerMillion'],
    ['a price that is not decimal', { outputPerMillion: '1e5' }, 'outputPerMillion'],
    ['a price with too many decimals', { cachedInputPerMillion: '0.0000000000001' }, 'cachedInputPerMillion'],
    ['a pattern with glob syntax Nexus does not read', { modelPattern: 'gpt-?o' }, 'modelPattern'],
    [
      'a connection and a protocol both',
      { protocolProfile: 'openai', providerConnectionId: '00000000-0000-7000-8000-000000000000' },
      'protocolProfile',
    ],
    ['an unknown protocol', { protocolProfile: 'smtp' }, 'protocolProfile'],
  ];
  it.each(bad)('refuses %s with 400 naming the field, and creates nothing', async (_name, change, param) => {
    const tenant = await tenantOf();
    const res = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/prices`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.config.managementKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...GPT_4O, effectiveFrom: hourAgo(), ...change }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { param: string } };
    expect(body.error.param).toContain(param);
    const listed = await listModelPrices({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: {} });
    expect(listed.data).toEqual([]);
  });

  it("keeps the workspace's currency while it has prices (409), and takes a known one before", async () => {
    const tenant = await tenantOf();
    const path = { workspaceId: tenant.workspaceId };
    const eur = await updateWorkspace({ client: t.client, path, body: { currency: 'EUR' } });
    expect(eur.data!.currency).toBe('EUR');
    const unknown = await updateWorkspace({ client: t.client, path, body: { currency: 'ABC' } });
    expect(unknown.response.status).toBe(400);
    expect(unknown.error!.error.param).toBe('currency');
    await createModelPrice({ client: t.client, path, body: { ...GPT_4O, effectiveFrom: hourAgo() } });
    const change = await updateWorkspace({ client: t.client, path, body: { currency: 'USD' } });
    expect(change.response.status).toBe(409);
  });
});

describe("LiteLLM's price file", () => {
  it('imports the per-token entries, converted exactly to per million, and lists the rest as skipped', async () => {
    const tenant = await tenantOf();
    const res = await importModelPrices({ client: t.client, path: { workspaceId: tenant.workspaceId }, body: { prices: LITELLM } });
    expect(res.response.status).toBe(200);
    expect(res.data!.created).toBe(4);
    expect(res.data!.skipped.sort()).toEqual(['dall-e-3', 'sample_spec']);
    const listed = await listModelPrices({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 100 } });
    const byModel = new Map(listed.data!.map((p) => [p.modelPattern, p]));
    expect(byModel.get('gpt-4o')).toMatchObject({
      inputPerMillion: '2.5',
      cachedInputPerMillion: '1.25',
      outputPerMillion: '10',
      source: 'litellm',
    });
    expect(byModel.get('gpt-4o-mini')).toMatchObject({ inputPerMillion: '0.15', cachedInputPerMillion: '0.075', outputPerMillion: '0.6' });
    expect(byModel.get('claude-3-5-haiku-20241022')).toMatchObject({ cacheWritePerMillion: '1', cachedInputPerMillion: '0.08' });
    // Imported again at the same time: every entry overlaps its first import.
    const twice = await importModelPrices({ client: t.client, path: { workspaceId: tenant.workspaceId }, body: { prices: LITELLM } });
    expect(twice.response.status).toBe(409);
  });

  const badFiles: [string, Record<string, unknown>, string][] = [
    ['an entry that is not an object', { 'gpt-4o': 3 }, 'prices.gpt-4o'],
    [
      'a price that is a string',
      { 'gpt-4o': { input_cost_per_token: '0.1', output_cost_per_token: 1e-6 } },
      'prices.gpt-4o.input_cost_per_token',
    ],
    [
      'a negative price',
      { ok: { input_cost_per_token: 1e-6, output_cost_per_token: 1e-6 }, bad: { input_cost_per_token: 1e-6, output_cost_per_token: -1 } },
      'prices.bad.output_cost_per_token',
    ],
  ];
  it.each(badFiles)('refuses %s with 400 naming the first offending key, and imports nothing', async (_name, prices, param) => {
    const tenant = await tenantOf();
    const res = await importModelPrices({ client: t.client, path: { workspaceId: tenant.workspaceId }, body: { prices } });
    expect(res.response.status).toBe(400);
    expect(res.error!.error.param).toBe(param);
    const listed = await listModelPrices({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: {} });
    expect(listed.data).toEqual([]);
  });
});

describe('the cost of a call', () => {
  it('is charged under the price in force when the call started, and a later price never rewrites it', async () => {
    const tenant = await tenantOf();
    const path = { workspaceId: tenant.workspaceId };
    const first = await createModelPrice({ client: t.client, path, body: { ...GPT_4O, effectiveFrom: hourAgo() } });
    // 1000 input of which 200 cached, 500 output: 800 * 2.5 + 200 * 1.25 + 500 * 10 = 7250 micro-dollars.
    const before = await invocationOf(tenant, await call(tenant, 'gpt-4o', '1000,500,200'));
    expect(before.costMicros).toBe('7250');
    expect(before.priceId).toBe(first.data!.id);
    expect(before.usageEvents!.find((e) => e.kind === 'USAGE')).toMatchObject({ costMicros: '7250', priceId: first.data!.id });

    // The price doubles from now: the old one is closed where the new one starts.
    const now = new Date().toISOString();
    await closeModelPrice({ client: t.client, path: { priceId: first.data!.id }, body: { effectiveTo: now } });
    const second = await createModelPrice({
      client: t.client,
      path,
      body: { modelPattern: 'gpt-4o*', inputPerMillion: '5', cachedInputPerMillion: '2.5', outputPerMillion: '20', effectiveFrom: now },
    });
    const after = await invocationOf(tenant, await call(tenant, 'gpt-4o', '1000,500,200'));
    expect(after.costMicros).toBe('14500');
    expect(after.priceId).toBe(second.data!.id);
    // The first call keeps the price it started under.
    const reread = await getInvocation({ client: t.client, path: { invocationId: before.id } });
    expect(reread.data).toMatchObject({ costMicros: '7250', priceId: first.data!.id });
  });

  it('rounds to the nearest micro-unit, and prefers a price of the connection to one of every connection', async () => {
    const tenant = await tenantOf();
    const path = { workspaceId: tenant.workspaceId };
    await createModelPrice({ client: t.client, path, body: { ...GPT_4O, effectiveFrom: hourAgo() } });
    const own = await createModelPrice({
      client: t.client,
      path,
      body: {
        modelPattern: 'gpt-4o',
        providerConnectionId: tenant.connectionId,
        inputPerMillion: '0.333',
        outputPerMillion: '0',
        effectiveFrom: hourAgo(),
      },
    });
    // 3 input tokens at 0.333 per million: 0.999 micro-dollars, rounded to 1. The price of `gpt-4o` prices the call
    // the provider answered as `gpt-4o-2026-01-01`.
    const inv = await invocationOf(tenant, await call(tenant, 'gpt-4o', '3,0,0'));
    expect(inv).toMatchObject({ costMicros: '1', priceId: own.data!.id });
  });

  it("sums in the usage summary to its events' costs, and counts the calls no price matched", async () => {
    const tenant = await tenantOf();
    const path = { workspaceId: tenant.workspaceId };
    await createModelPrice({ client: t.client, path, body: { ...GPT_4O, effectiveFrom: hourAgo() } });
    await call(tenant, 'gpt-4o', '1000,500,200');
    await call(tenant, 'gpt-4o-mini', '12345,678,90');
    await call(tenant, 'unpriced-model', '100,100,0');
    await call(tenant, 'unpriced-model', '100,100,0');
    await t.nexus.gateway.drain();
    const unpriced = await invocationOf(tenant, await call(tenant, 'unpriced-model', '1,1,0'));
    expect(unpriced.costMicros).toBeUndefined();

    const events = await listUsageEvents({ client: t.client, path, query: { limit: 100 } });
    const eventCost = events.data!.reduce((sum, e) => sum + BigInt(e.costMicros ?? '0'), 0n);
    expect(eventCost).toBeGreaterThan(0n);
    const summary = await getUsageSummary({ client: t.client, path, query: { groupBy: 'model' } });
    expect(summary.data!.currency).toBe('USD');
    const summaryCost = summary.data!.buckets.reduce((sum, b) => sum + BigInt(b.costMicros), 0n);
    expect(summaryCost).toBe(eventCost);
    // The model the provider said answered (the fake upstream dates it).
    const unpricedBuckets = summary.data!.buckets.filter((b) => b.key.startsWith('unpriced-model'));
    expect(unpricedBuckets.reduce((n, b) => n + b.unpricedEvents, 0)).toBe(3);
    expect(summary.data!.buckets.filter((b) => b.key.startsWith('gpt-4o')).every((b) => b.unpricedEvents === 0)).toBe(true);

    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(
      new RegExp(
        `nexus_gateway_unpriced_calls_total\\{workspace="${tenant.workspaceId}",connection="${tenant.connectionId}",model="unpriced-model-2026-01-01"\\} 3`,
      ),
    );
    expect(metrics).toMatch(
      new RegExp(
        `nexus_gateway_cost_micros_total\\{workspace="${tenant.workspaceId}",connection="${tenant.connectionId}",model="gpt-4o-2026-01-01"\\} 7250`,
      ),
    );
  });
});

describe('workspace budgets', () => {
  const bad: [string, Record<string, unknown>, string][] = [
    ['a negative hard level', { period: 'DAY', hardLimitMicros: '-1' }, 'hardLimitMicros'],
    ['a negative soft level', { period: 'MONTH', softLimitMicros: '-100' }, 'softLimitMicros'],
    ['a level that is not a whole number', { period: 'DAY', hardLimitMicros: '1.5' }, 'hardLimitMicros'],
  ];
  it.each(bad)('refuses %s with 400 naming the field', async (_name, body, param) => {
    const tenant = await tenantOf();
    const res = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/budget`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t.config.managementKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe(param);
    const none = await getWorkspaceBudget({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    expect(none.response.status).toBe(404);
    expect(none.error!.error.code).toBe('budget_not_found');
  });

  it('reports the soft level, and at the hard level refuses the next metered call with 402 on another process too', async () => {
    const tenant = await tenantOf();
    const path = { workspaceId: tenant.workspaceId };
    await createModelPrice({ client: t.client, path, body: { ...GPT_4O, effectiveFrom: hourAgo() } });
    const set = await setWorkspaceBudget({
      client: t.client,
      path,
      body: { period: 'DAY', softLimitMicros: '5000', hardLimitMicros: '10000' },
    });
    expect(set.data).toMatchObject({ spentMicros: '0', softCrossed: false, hardCrossed: false, currency: 'USD' });
    const endpoint = await createWebhookEndpoint({
      client: t.client,
      path,
      body: { url: 'http://127.0.0.1:9/hooks', eventTypes: ['workspace.budget_crossed'] },
    });
    expect(endpoint.response.status).toBe(201);

    // A second Nexus on the same database: it has admitted a call already, so its lookup of the key is cached.
    const other = await t.withEnv({});
    try {
      await call(tenant, 'gpt-4o', '10,5,0');
      await other.nexus.gateway.drain();
      // 7250: past the soft level only.
      await call(tenant, 'gpt-4o', '1000,500,200');
      await t.nexus.gateway.drain();
      const soft = await getWorkspaceBudget({ client: t.client, path });
      expect(soft.data).toMatchObject({ softCrossed: true, hardCrossed: false });
      expect(BigInt(soft.data!.spentMicros)).toBeGreaterThanOrEqual(7250n);
      // Another 7250 crosses the hard level.
      await call(tenant, 'gpt-4o', '1000,500,200');
      await t.nexus.gateway.drain();
      const hard = await getWorkspaceBudget({ client: t.client, path });
      expect(hard.data).toMatchObject({ softCrossed: true, hardCrossed: true });

      const refused = await t.fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o', messages: [], max_tokens: 5 }),
      });
      expect(refused.status).toBe(402);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('workspace_budget_exceeded');
      expect(refused.headers.get('x-should-retry')).toBe('false');
      // Each level crossed is one workspace.budget_crossed event, written with the crossing (docs/events.md).
      const messages = await listWebhookMessages({
        client: t.client,
        path: { webhookEndpointId: endpoint.data!.id },
        query: { limit: 100 },
      });
      expect(messages.data!).toHaveLength(2);
      expect(messages.data!.map((m) => m.payload)).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            type: 'workspace.budget_crossed',
            data: expect.objectContaining({ level: 'hard', period: 'DAY', limitMicros: '10000', currency: 'USD' }),
          }),
          expect.objectContaining({
            type: 'workspace.budget_crossed',
            data: expect.objectContaining({ level: 'soft', limitMicros: '5000', currency: 'USD' }),
          }),
        ]),
      );

      // The other process: told by the change feed, it refuses too (within the bound docs/pricing.md gives).
      const otherBase = tenant.gatewayBaseUrl.replace(t.url, other.url);
      let status = 0;
      await until(async () => {
        const res = await fetch(`${otherBase}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '1,1,0' },
          body: JSON.stringify({ model: 'gpt-4o', messages: [], max_tokens: 5 }),
        });
        status = res.status;
        await res.arrayBuffer();
        return status === 402;
      }, 3000);
      expect(status).toBe(402);

      // Raising the budget lets calls through again at once.
      await setWorkspaceBudget({ client: t.client, path, body: { period: 'DAY', hardLimitMicros: '1000000000' } });
      const again = await t.fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o', messages: [], max_tokens: 5 }),
      });
      expect(again.status).toBe(200);
      await again.arrayBuffer();
    } finally {
      await other.close();
    }
  });
});

/**
 * Per-model pricing, the model allow-list, the free endpoints (model lists, token
 * counting) and the output cap policy, through the official SDKs against the fake
 * upstreams (docs/pricing.md).
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { createClient } from '../../generated/client/client/index.js';
import { getMe, revokeInferenceKey, suspendWorkspaceAccess } from '../support/sdk.js';
import { FAKE_MODEL_IDS, startAnthropicUpstream, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import {
  anthropicFor,
  createTenant,
  gatewayFetch,
  invocationByRequestId,
  openAiFor,
  periodOf,
  reclaimLease,
  type Tenant,
} from './gateway-support.js';

let t: TestApp;
let openaiUp: FakeUpstream;
let anthropicUp: FakeUpstream;
const OPENAI_KEY = `${SECRET_MARKER}-pricing-openai-0123456789`;
const ANTHROPIC_KEY = `${SECRET_MARKER}-pricing-anthropic-0123456789`;

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_AUTH_CACHE_TTL_MS: '0' } });
  openaiUp = await startOpenAiUpstream({ apiKey: OPENAI_KEY });
  anthropicUp = await startAnthropicUpstream({ apiKey: ANTHROPIC_KEY });
});
afterAll(async () => {
  await t?.close();
  await openaiUp?.close();
  await anthropicUp?.close();
});

const openai = openAiFor;
const anthropic = anthropicFor;

/** gpt-4o at 5 / 2.5 / 20 units per input / cached / output token; every other model at the default 1 / 0.5 / 2. */
const EXPENSIVE = {
  pattern: 'gpt-4o*',
  inputMultiplierPpm: '5000000',
  cachedInputMultiplierPpm: '2500000',
  outputMultiplierPpm: '20000000',
} as const;

const openaiTenant = (o: Partial<Parameters<typeof createTenant>[1]> = {}) =>
  createTenant(t, { baseUrl: openaiUp.url, providerKey: OPENAI_KEY, ...o });
const anthropicTenant = (o: Partial<Parameters<typeof createTenant>[1]> = {}) =>
  createTenant(t, { profile: 'anthropic', baseUrl: anthropicUp.url, providerKey: ANTHROPIC_KEY, ...o });

/** The access's period once the calls made so far are recorded. */
async function settled(tenant: Tenant) {
  await t.nexus.gateway.drain();
  return periodOf(t, tenant.accessId);
}

const invocationOf = (tenant: Tenant, requestId: string) => invocationByRequestId(t, tenant.workspaceId, requestId);

describe('per-model pricing', () => {
  it('charges a model its rule prices higher more than the default, on the same usage, and records the rule applied', async () => {
    const tenant = await openaiTenant({ modelRules: [EXPENSIVE] });
    const client = openai(tenant, { 'x-fake-usage': '10,5,4' });
    const before = await settled(tenant);
    const cheap = await client.chat.completions.create({ model: 'fake-model', messages: [], max_tokens: 5 }).withResponse();
    const afterCheap = await settled(tenant);
    const dear = await client.chat.completions.create({ model: 'gpt-4o', messages: [], max_tokens: 5 }).withResponse();
    const afterDear = await settled(tenant);
    // 6 uncached + 4 cached input, 5 output: default 6 + 2 + 10 = 18; gpt-4o* 30 + 10 + 100 = 140.
    expect(afterCheap.consumed - before.consumed).toBe(18n);
    expect(afterDear.consumed - afterCheap.consumed).toBe(140n);
    expect(afterDear.reserved).toBe(0n);

    const cheapInv = await invocationOf(tenant, cheap.response.headers.get('x-nexus-request-id')!);
    expect(cheapInv.quotaUnits).toBe('18');
    expect(cheapInv.usageEvents![0]).toMatchObject({
      kind: 'USAGE',
      units: '18',
      inputMultiplierPpm: '1000000',
      cachedInputMultiplierPpm: '500000',
      outputMultiplierPpm: '2000000',
    });
    expect(cheapInv.usageEvents![0]!.modelRule).toBeUndefined();
    const dearInv = await invocationOf(tenant, dear.response.headers.get('x-nexus-request-id')!);
    expect(dearInv.quotaUnits).toBe('140');
    expect(dearInv.usageEvents![0]).toMatchObject({
      kind: 'USAGE',
      units: '140',
      modelRule: 'gpt-4o*',
      inputMultiplierPpm: '5000000',
      cachedInputMultiplierPpm: '2500000',
      outputMultiplierPpm: '20000000',
    });
    // A bill recomputed from the event alone: ceil((6*5 + 4*2.5 + 5*20)).
    const e = dearInv.usageEvents![0]!;
    const recomputed =
      (BigInt(e.inputTokens) - BigInt(e.cachedInputTokens)) * BigInt(e.inputMultiplierPpm!) +
      BigInt(e.cachedInputTokens) * BigInt(e.cachedInputMultiplierPpm!) +
      BigInt(e.outputTokens) * BigInt(e.outputMultiplierPpm!);
    expect((recomputed + 999_999n) / 1_000_000n).toBe(140n);
  });

  it('bounds the call by its rule too: a quota that admits the default model refuses the dear one (429, upstream not called)', async () => {
    // Bound of a small chat call: ~60 body bytes at the dearer input price + 5 output tokens. Default: < 100 units; gpt-4o*: > 300.
    const tenant = await openaiTenant({ modelRules: [EXPENSIVE], quotaUnits: 200n });
    const client = openai(tenant);
    await client.chat.completions.create({ model: 'fake-model', messages: [], max_tokens: 5 });
    const seen = openaiUp.requests.length;
    const refused = await client.chat.completions.create({ model: 'gpt-4o', messages: [], max_tokens: 5 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect(openaiUp.requests.length).toBe(seen);
  });

  it('keeps the rule of the model the request names when the upstream reports a dated alias', async () => {
    // The fake upstream answers `<model>-2026-01-01`: that name would match the cheap glob, the request's matches the exact rule first.
    const tenant = await openaiTenant({
      modelRules: [
        { pattern: 'gpt-4o', inputMultiplierPpm: '3000000', cachedInputMultiplierPpm: '3000000', outputMultiplierPpm: '3000000' },
        { pattern: 'gpt-4o-*', inputMultiplierPpm: '1', cachedInputMultiplierPpm: '1', outputMultiplierPpm: '1' },
      ],
    });
    const { data, response } = await openai(tenant, { 'x-fake-usage': '10,5,0' })
      .chat.completions.create({ model: 'gpt-4o', messages: [], max_tokens: 5 })
      .withResponse();
    expect(data.model).toBe('gpt-4o-2026-01-01');
    const inv = await invocationOf(tenant, response.headers.get('x-nexus-request-id')!);
    expect(inv.quotaUnits).toBe('45');
    expect(inv.usageEvents![0]).toMatchObject({
      model: 'gpt-4o-2026-01-01',
      modelRule: 'gpt-4o',
      units: '45',
      inputMultiplierPpm: '3000000',
    });
  });

  it('a call in flight that a reclaim charges (its process lost) keeps its rule: the heartbeat writes it, the event carries it', async () => {
    const tenant = await openaiTenant({ modelRules: [EXPENSIVE] });
    const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${tenant.apiKey}`,
        'content-type': 'application/json',
        'x-fake-fault': 'slow',
        'x-fake-delay-ms': '400',
      },
      body: JSON.stringify({ model: 'gpt-4o', messages: [], max_tokens: 10, stream: true }),
    });
    expect(res.status).toBe(200);
    await t.nexus.gateway.heartbeat();
    const [inFlight] = await t.database
      .db('lease_calls')
      .whereIn('lease_id', t.database.db('quota_leases').select('id').where({ workspace_access_id: tenant.accessId }));
    expect(inFlight).toMatchObject({ model_rule: 'gpt-4o*' });
    expect(BigInt(inFlight.output_multiplier_ppm)).toBe(20_000_000n);
    // As if its process had died: another process's sweeper reclaims the lease and charges the call as its heartbeat left it.
    await reclaimLease(t, tenant.accessId);
    await res.text();
    await t.nexus.gateway.drain();
    const [invocation] = await t.database.db('invocations').where({ request_id: res.headers.get('x-nexus-request-id')! });
    // Recorded by the reclaim (the stream was still running), not by its own process.
    expect(invocation).toMatchObject({ status: 'FAILED', error_code: 'gateway_lost' });
    const events = await t.database.db('usage_events').where({ invocation_id: invocation.id });
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ kind: 'USAGE', model_rule: 'gpt-4o*' });
    expect(BigInt(events[0].input_multiplier_ppm)).toBe(5_000_000n);
  });

  it('streams are priced by the same rule (anthropic, first match in list order)', async () => {
    const tenant = await anthropicTenant({
      modelRules: [
        { pattern: 'claude-3-5-haiku-*', inputMultiplierPpm: '250000', cachedInputMultiplierPpm: '25000', outputMultiplierPpm: '1250000' },
        { pattern: 'claude-*', inputMultiplierPpm: '3000000', cachedInputMultiplierPpm: '300000', outputMultiplierPpm: '15000000' },
      ],
    });
    const before = await settled(tenant);
    const stream = anthropic(tenant, { 'x-fake-usage': '100,8,0' }).messages.stream({
      model: 'claude-3-5-haiku-20241022',
      max_tokens: 50,
      messages: [{ role: 'user', content: 'hi' }],
    });
    await stream.finalMessage();
    await t.nexus.gateway.drain();
    const after = await settled(tenant);
    // 100 * 0.25 + 8 * 1.25 = 35.
    expect(after.consumed - before.consumed).toBe(35n);
  });
});

describe('model allow-list', () => {
  it('refuses a model outside the list with 403 model_not_allowed before the upstream, taking no quota', async () => {
    const tenant = await openaiTenant({ allowedModels: ['gpt-4o*', 'fake-model'] });
    const client = openai(tenant);
    await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [], max_tokens: 5 });
    const seen = openaiUp.requests.length;
    const before = await settled(tenant);
    const refused = await client.chat.completions.create({ model: 'gpt-3.5-turbo', messages: [], max_tokens: 5 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((refused as InstanceType<typeof OpenAI.PermissionDeniedError>).error).toMatchObject({
      code: 'model_not_allowed',
      type: 'permission_error',
      param: 'model',
    });
    // A request naming no model cannot be checked against the list: refused the same way.
    const unnamed = await client.chat.completions.create({ messages: [], max_tokens: 5 } as never).catch((e: unknown) => e);
    expect(unnamed).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(openaiUp.requests.length).toBe(seen);
    const after = await settled(tenant);
    expect(after).toEqual(before);
    const inv = await invocationOf(
      tenant,
      (refused as InstanceType<typeof OpenAI.PermissionDeniedError>).headers.get('x-nexus-request-id')!,
    );
    expect(inv).toMatchObject({ status: 'REJECTED', errorCode: 'model_not_allowed', requestedModel: 'gpt-3.5-turbo', quotaUnits: '0' });
    // The end user can read the list: GET /v1/me.
    const me = await getMe({
      client: createClient({ baseUrl: t.url, fetch: gatewayFetch(), headers: { Authorization: `Bearer ${tenant.apiKey}` } }),
    });
    expect(me.response.status).toBe(200);
    expect(me.data!.allowedModels).toEqual(['gpt-4o*', 'fake-model']);
  });
});

describe('model lists and token counting: governed, free, on by default', () => {
  it('openai models.list answers the allowed models only, and takes no quota (workspace without unmetered passthrough)', async () => {
    const tenant = await openaiTenant({ allowedModels: ['gpt-4o*'] });
    const before = await settled(tenant);
    const ids: string[] = [];
    for await (const model of openai(tenant).models.list()) ids.push(model.id);
    expect(ids).toEqual(['gpt-4o', 'gpt-4o-mini']);
    expect((await openai(tenant).models.retrieve('gpt-4o')).id).toBe('gpt-4o');
    const hidden = await openai(tenant)
      .models.retrieve('claude-sonnet-4-5')
      .catch((e: unknown) => e);
    expect(hidden).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(await settled(tenant)).toEqual(before);

    // Without an allow-list the upstream's list passes as it is.
    const open = await openaiTenant();
    const all: string[] = [];
    for await (const model of openai(open).models.list()) all.push(model.id);
    expect(all).toEqual(FAKE_MODEL_IDS);
  });

  it('anthropic models.list and models.retrieve are filtered the same way; its page cursors follow the models kept', async () => {
    const tenant = await anthropicTenant({ allowedModels: ['claude-*'] });
    const before = await settled(tenant);
    const page = await anthropic(tenant).models.list();
    expect(page.data.map((m) => m.id)).toEqual(['claude-3-5-haiku-20241022', 'claude-sonnet-4-5']);
    const { response } = await anthropic(tenant).models.list().withResponse();
    expect(response.headers.get('x-nexus-metering-status')).toBe('unmetered');
    const raw = (await (
      await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/models`, {
        headers: { 'x-api-key': tenant.apiKey, 'anthropic-version': '2023-06-01' },
      })
    ).json()) as { first_id: string; last_id: string };
    expect(raw).toMatchObject({ first_id: 'claude-3-5-haiku-20241022', last_id: 'claude-sonnet-4-5' });
    expect((await anthropic(tenant).models.retrieve('claude-sonnet-4-5')).id).toBe('claude-sonnet-4-5');
    const hidden = await anthropic(tenant)
      .models.retrieve('gpt-4o')
      .catch((e: unknown) => e);
    expect(hidden).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(await settled(tenant)).toEqual(before);
  });

  it('count_tokens is free and answered by the upstream; a model outside the list is refused', async () => {
    const tenant = await anthropicTenant({ allowedModels: ['claude-*'], quotaUnits: 10n });
    const before = await settled(tenant);
    const body = { model: 'claude-sonnet-4-5', messages: [{ role: 'user' as const, content: 'How many tokens is this? '.repeat(40) }] };
    // The request is far larger than the 10 units the access has: a metered call of it would be refused 429.
    const counted = await anthropic(tenant).messages.countTokens(body);
    expect(counted.input_tokens).toBeGreaterThan(10);
    expect(anthropicUp.requests.at(-1)!.url).toBe('/v1/messages/count_tokens');
    const seen = anthropicUp.requests.length;
    const refused = await anthropic(tenant)
      .messages.countTokens({ ...body, model: 'gpt-4o' })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(anthropicUp.requests.length).toBe(seen);
    expect(await settled(tenant)).toEqual(before);
  });

  it('checks the key and the access: a revoked key is 401, a suspended access 403', async () => {
    const tenant = await anthropicTenant();
    expect((await anthropic(tenant).models.list()).data.length).toBe(FAKE_MODEL_IDS.length);
    const seen = anthropicUp.requests.length;
    await suspendWorkspaceAccess({ client: t.client, path: { accessId: tenant.accessId } });
    const suspended = await anthropic(tenant)
      .messages.countTokens({ model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(suspended).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect((suspended as InstanceType<typeof Anthropic.PermissionDeniedError>).error).toMatchObject({
      error: { code: 'access_suspended' },
    });

    const other = await openaiTenant();
    const revoked = await revokeInferenceKey({ client: t.client, path: { accessId: other.accessId, keyId: other.apiKeyId } });
    expect(revoked.response.status).toBe(204);
    const unauthorized = await openai(other)
      .models.list()
      .catch((e: unknown) => e);
    expect(unauthorized).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(anthropicUp.requests.length).toBe(seen);
  });
});

describe('output cap policy', () => {
  it('clamp (the default): a cap above maxOutputTokens is lowered, said in a header, and the bound follows it', async () => {
    // max_tokens 64000 at 2 units per output token would need 128000 units; the access has 5000.
    const tenant = await anthropicTenant({ maxOutputTokens: 512, quotaUnits: 5000n });
    const { data, response } = await anthropic(tenant)
      // An explicit timeout: without one the SDK refuses a non-streamed call this large itself.
      .messages.create({ model: 'claude-sonnet-4-5', max_tokens: 64000, messages: [{ role: 'user', content: 'hi' }] }, { timeout: 30_000 })
      .withResponse();
    expect(data.type).toBe('message');
    expect(response.headers.get('x-nexus-output-cap')).toBe('512; requested=64000');
    expect(JSON.parse(anthropicUp.requests.at(-1)!.body).max_tokens).toBe(512);
  });

  it('the charge follows the clamped cap: an answer without usage is charged at the bound it was admitted with', async () => {
    const tenant = await openaiTenant({ maxOutputTokens: 300, quotaUnits: 100_000n });
    openaiUp.forceBody = { contentType: 'application/json', body: '{"id":"no-usage","choices":[]}' };
    try {
      const { response } = await openai(tenant)
        .chat.completions.create({ model: 'gpt-4o', messages: [], max_completion_tokens: 20_000 })
        .withResponse();
      expect(response.headers.get('x-nexus-output-cap')).toBe('300; requested=20000');
      expect(JSON.parse(openaiUp.requests.at(-1)!.body).max_completion_tokens).toBe(300);
      const inv = await invocationOf(tenant, response.headers.get('x-nexus-request-id')!);
      // Input bound (the body's bytes, at 1 unit) + 300 output tokens at 2 units: far below 20000 * 2.
      const charged = BigInt(inv.quotaUnits);
      expect(charged).toBeGreaterThanOrEqual(600n);
      expect(charged).toBeLessThan(1000n);
    } finally {
      openaiUp.forceBody = undefined;
    }
  });

  it('a cap within maxOutputTokens is sent as it is, without the header', async () => {
    const tenant = await openaiTenant({ maxOutputTokens: 300 });
    const { response } = await openai(tenant).chat.completions.create({ model: 'gpt-4o', messages: [], max_tokens: 300 }).withResponse();
    expect(response.headers.get('x-nexus-output-cap')).toBeNull();
    expect(JSON.parse(openaiUp.requests.at(-1)!.body).max_tokens).toBe(300);
  });

  it('refuse: a cap above maxOutputTokens is still 400 max_tokens_exceeded, upstream not called', async () => {
    const tenant = await anthropicTenant({ maxOutputTokens: 512, outputCapPolicy: 'refuse' });
    const seen = anthropicUp.requests.length;
    const refused = await anthropic(tenant)
      .messages.create({ model: 'claude-sonnet-4-5', max_tokens: 64000, messages: [{ role: 'user', content: 'hi' }] }, { timeout: 30_000 })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.BadRequestError);
    expect((refused as InstanceType<typeof Anthropic.BadRequestError>).error).toMatchObject({
      error: { code: 'max_tokens_exceeded', param: 'max_tokens' },
    });
    expect(anthropicUp.requests.length).toBe(seen);
  });
});

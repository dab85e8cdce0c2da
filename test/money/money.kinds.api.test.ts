/**
 * The kinds beyond text tokens (docs/pricing.md, "Kinds"), through the Admin API and the gateway against real
 * PostgreSQL: a strategy's and a model rule's multipliers of each kind, the price book's prices of each kind and per
 * call, the cost the record statement computes from them, LiteLLM's per-image, per-second, per-character and audio
 * and image token prices, an OpenAI chat completion's audio tokens recorded, charged and priced (through the `openai`
 * SDK), and a passed-through call recorded with its price per call, which counts against the budget.
 */
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateQuotaStrategyDto } from '../../generated/client/types.gen.js';
import { priceOfCall } from '../../src/domain/recording/price-sql.js';
import {
  createModelPrice,
  createQuotaStrategy,
  getPlanStrategy,
  getUsageSummary,
  importModelPrices,
  listModelPrices,
  listPlanStrategies,
  setWorkspaceBudget,
} from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, invocationByRequestId, openAiFor, periodOf, type Tenant } from '../gateway/gateway-support.js';

const KEY = testProviderKey('kinds');
let t: TestApp;
let up: FakeUpstream;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const hourAgo = () => new Date(Date.now() - 3_600_000).toISOString();
const auth = () => ({ authorization: `Bearer ${t.config.managementKey}` });

describe("a quota strategy's multipliers per kind", () => {
  it('are kept on the strategy and its model rules, as given, and left out where not given', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const path = { workspaceId: tenant.workspaceId };
    const created = await createQuotaStrategy({
      client: t.client,
      path,
      body: {
        key: 'kinds',
        resetInterval: 'MONTH',
        quotaUnits: '1000000',
        inputMultiplierPpm: '1000000',
        outputMultiplierPpm: '4000000',
        cachedInputMultiplierPpm: '250000',
        audioInputMultiplierPpm: '10000000',
        audioOutputMultiplierPpm: '20000000',
        imageMultiplierPpm: '40000000',
        imageTierMultipliersPpm: { 'hd/1024x1792': '120000000' },
        secondMultiplierPpm: '100000',
        characterMultiplierPpm: '15',
        maxOutputTokens: 100,
        modelRules: [
          {
            pattern: 'dall-e-3',
            inputMultiplierPpm: '0',
            cachedInputMultiplierPpm: '0',
            outputMultiplierPpm: '0',
            imageTierMultipliersPpm: { 'standard/1024x1024': '40000000' },
          },
        ],
      },
    });
    expect(created.response.status).toBe(201);
    const read = await getPlanStrategy({ client: t.client, path: { strategyId: created.data!.id } });
    expect(read.data).toMatchObject({
      audioInputMultiplierPpm: '10000000',
      audioOutputMultiplierPpm: '20000000',
      imageMultiplierPpm: '40000000',
      imageTierMultipliersPpm: { 'hd/1024x1792': '120000000' },
      secondMultiplierPpm: '100000',
      characterMultiplierPpm: '15',
      modelRules: [{ pattern: 'dall-e-3', imageTierMultipliersPpm: { 'standard/1024x1024': '40000000' } }],
    });
    expect(read.data!.imageInputMultiplierPpm).toBeUndefined();
    expect(read.data!.modelRules[0]!.imageMultiplierPpm).toBeUndefined();
    // The tenant's own strategy sets none: none is shown.
    const own = await getPlanStrategy({ client: t.client, path: { strategyId: tenant.strategyId } });
    expect(Object.keys(own.data!).filter((k) => /^(audio|image|second|character)/.test(k))).toEqual([]);
  });

  it('refuses a tier that is not {quality}/{size}, and a multiplier that is not a count, with 400 naming it; nothing is created', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const path = { workspaceId: tenant.workspaceId };
    const body: CreateQuotaStrategyDto = {
      key: 'bad-kinds',
      resetInterval: 'MONTH',
      quotaUnits: '1000',
      inputMultiplierPpm: '1000000',
      outputMultiplierPpm: '1000000',
      cachedInputMultiplierPpm: '1000000',
      maxOutputTokens: 100,
    };
    // What a caller may send, checked by the server, not by the types.
    const unchecked = (value: string) => value as `${bigint}`;
    const tier = await createQuotaStrategy({ client: t.client, path, body: { ...body, imageTierMultipliersPpm: { 'HD 1024': '1' } } });
    expect(tier.response.status).toBe(400);
    expect(JSON.stringify(tier.error)).toMatch(/imageTierMultipliersPpm/);
    const negative = await createQuotaStrategy({ client: t.client, path, body: { ...body, secondMultiplierPpm: unchecked('-1') } });
    expect(negative.response.status).toBe(400);
    expect(JSON.stringify(negative.error)).toMatch(/secondMultiplierPpm/);
    const rule = await createQuotaStrategy({
      client: t.client,
      path,
      body: {
        ...body,
        modelRules: [
          {
            pattern: 'x',
            inputMultiplierPpm: '1',
            cachedInputMultiplierPpm: '1',
            outputMultiplierPpm: '1',
            imageMultiplierPpm: unchecked('1.5'),
          },
        ],
      },
    });
    expect(rule.response.status).toBe(400);
    expect(JSON.stringify(rule.error)).toMatch(/imageMultiplierPpm/);
    const listed = await listPlanStrategies({ client: t.client, path, query: { key: 'bad-kinds' } });
    expect(listed.data).toEqual([]);
  });
});

describe("the price book's kinds", () => {
  it('keeps each price as given, and refuses a bad tier or amount with 400 naming it', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const path = { workspaceId: tenant.workspaceId };
    const created = await createModelPrice({
      client: t.client,
      path,
      body: {
        modelPattern: 'dall-e-3',
        inputPerMillion: '0',
        outputPerMillion: '0',
        perImage: '0.04',
        perImageTier: { 'hd/1024x1792': '0.120', 'standard/1024x1024': '0.04' },
        perCall: '0.001',
        effectiveFrom: hourAgo(),
      },
    });
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({
      perImage: '0.04',
      perImageTier: { 'hd/1024x1792': '0.12', 'standard/1024x1024': '0.04' },
      perCall: '0.001',
    });
    expect(created.data!.perSecond).toBeUndefined();
    const bad = await createModelPrice({
      client: t.client,
      path,
      body: {
        modelPattern: 'x',
        inputPerMillion: '1',
        outputPerMillion: '1',
        perImageTier: { '1024x1024': '1' },
        effectiveFrom: hourAgo(),
      },
    });
    expect(bad.response.status).toBe(400);
    expect(JSON.stringify(bad.error)).toMatch(/perImageTier/);
    const amount = await createModelPrice({
      client: t.client,
      path,
      body: { modelPattern: 'y', inputPerMillion: '1', outputPerMillion: '1', perSecond: '1e-4', effectiveFrom: hourAgo() },
    });
    expect(amount.response.status).toBe(400);
    expect(JSON.stringify(amount.error)).toMatch(/perSecond/);
    const listed = await listModelPrices({ client: t.client, path });
    expect(listed.data!.map((p) => p.modelPattern)).toEqual(['dall-e-3']);
  });

  it('costs images at their tier (else per image), seconds, characters and the call, in the record statement', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const path = { workspaceId: tenant.workspaceId };
    const price = await createModelPrice({
      client: t.client,
      path,
      body: {
        modelPattern: 'media-*',
        inputPerMillion: '2',
        outputPerMillion: '8',
        imageOutputPerMillion: '40',
        perImage: '0.04',
        perImageTier: { 'hd/1024x1792': '0.12' },
        perSecond: '0.0001',
        charactersPerMillion: '15',
        perCall: '0.002',
        effectiveFrom: hourAgo(),
      },
    });
    expect(price.response.status).toBe(201);
    // A row as the record statement settles it (settlement-sql.ts), priced by its price part.
    const costOf = async (row: Record<string, unknown>) => {
      const columns = {
        workspace_id: tenant.workspaceId,
        model: 'media-1',
        call_requested_model: 'media-1',
        call_started_at: new Date(),
        call_connection_id: tenant.connectionId,
        input_tokens: 0,
        cached_tokens: 0,
        output_tokens: 0,
        cache_write_tokens: null,
        reasoning_tokens: null,
        audio_input_tokens: null,
        audio_output_tokens: null,
        image_input_tokens: null,
        image_output_tokens: null,
        images: null,
        image_tier: null,
        audio_ms: null,
        characters: null,
        ...row,
      };
      const result = await t.database.db.raw(
        `with s as (select * from json_to_record(cast(? as json)) as x(workspace_id uuid, model text, call_requested_model text,
           call_started_at timestamptz, call_connection_id uuid, input_tokens bigint, cached_tokens bigint, output_tokens bigint,
           cache_write_tokens bigint, reasoning_tokens bigint, audio_input_tokens bigint, audio_output_tokens bigint,
           image_input_tokens bigint, image_output_tokens bigint, images bigint, image_tier text, audio_ms bigint, characters bigint))
         select mp.cost_micros::text as cost from s ${priceOfCall('s')}`,
        [JSON.stringify(columns)],
      );
      return (result.rows as { cost: string }[])[0]!.cost;
    };
    // Every call: 0.002 per call = 2000 micro-units.
    expect(await costOf({})).toBe('2000');
    // 2 hd images: 2 x 0.12; a tier not listed: 0.04 each.
    expect(await costOf({ images: 2, image_tier: 'hd/1024x1792' })).toBe(`${2000 + 240_000}`);
    expect(await costOf({ images: 3, image_tier: 'low/256x256' })).toBe(`${2000 + 120_000}`);
    // 90.5 s of audio at 0.0001 a second; 1000 characters at 15 per million.
    expect(await costOf({ audio_ms: 90_500 })).toBe(`${2000 + 9050}`);
    expect(await costOf({ characters: 1000 })).toBe(`${2000 + 15_000}`);
    // 1000 output tokens of which 800 image tokens: 200 x 8 + 800 x 40 per million.
    expect(await costOf({ output_tokens: 1000, image_output_tokens: 800 })).toBe(`${2000 + 1600 + 32_000}`);
  });
});

describe("LiteLLM's prices of the kinds", () => {
  it('reads per-image (and per-pixel tiers), per-second, per-character, audio and image token prices', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const path = { workspaceId: tenant.workspaceId };
    const prices = JSON.parse(readFileSync(new URL('../fixtures/litellm-kinds.json', import.meta.url), 'utf8')) as Record<string, unknown>;
    const imported = await importModelPrices({ client: t.client, path, body: { prices } });
    expect(imported.response.status).toBe(200);
    expect(imported.data!.skipped.sort()).toEqual(['omni-moderation-latest', 'sample_spec']);
    const listed = await listModelPrices({ client: t.client, path, query: { limit: 100 } });
    const byModel = Object.fromEntries(listed.data!.map((p) => [p.modelPattern, p]));
    expect(Object.keys(byModel).sort()).toEqual([
      'dall-e-2',
      'dall-e-3',
      'gemini-2.5-flash-image',
      'gpt-4o-audio-preview',
      'gpt-image-1',
      'tts-1',
      'whisper-1',
    ]);
    expect(byModel['gpt-4o-audio-preview']).toMatchObject({
      inputPerMillion: '2.5',
      outputPerMillion: '10',
      audioInputPerMillion: '40',
      audioOutputPerMillion: '80',
    });
    expect(byModel['whisper-1']).toMatchObject({ inputPerMillion: '0', outputPerMillion: '0', perSecond: '0.0001' });
    expect(byModel['tts-1']).toMatchObject({ charactersPerMillion: '15' });
    expect(byModel['gemini-2.5-flash-image']).toMatchObject({ inputPerMillion: '0.3', outputPerMillion: '2.5', perImage: '0.039' });
    // Per pixel times the tier's pixels, rounded up at the 12th decimal; the price per image is the dearest tier's.
    expect(byModel['dall-e-3']).toMatchObject({
      perImageTier: { 'standard/1024x1024': '0.039999923815', 'hd/1024x1792': '0.11999117312' },
      perImage: '0.11999117312',
    });
    expect(byModel['dall-e-2']).toMatchObject({ perImageTier: { 'standard/1024x1024': '0.019922944' }, perImage: '0.019922944' });
    // A model priced by tokens and by tier: one price holds both.
    expect(byModel['gpt-image-1']).toMatchObject({
      inputPerMillion: '5',
      outputPerMillion: '0',
      imageInputPerMillion: '10',
      imageOutputPerMillion: '40',
      perImageTier: { 'low/1024x1024': '0.010999999497' },
    });
  });
});

describe("an OpenAI chat completion's audio tokens", () => {
  let tenant: Tenant;
  let requestId: string;
  beforeAll(async () => {
    tenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      kindMultipliers: { audioInputMultiplierPpm: '10000000', audioOutputMultiplierPpm: '20000000' },
    });
    const price = await createModelPrice({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        modelPattern: 'gpt-4o-audio-preview',
        inputPerMillion: '2.5',
        outputPerMillion: '10',
        audioInputPerMillion: '40',
        audioOutputPerMillion: '80',
        effectiveFrom: hourAgo(),
      },
    });
    expect(price.response.status).toBe(201);
    // 100 input tokens, 40 of them audio; 50 output tokens, 30 of them audio.
    const answer = await openAiFor(tenant, { 'x-fake-usage': '100,50,0', 'x-fake-audio': '40,30' })
      .chat.completions.create({
        model: 'gpt-4o-audio-preview',
        modalities: ['text', 'audio'],
        audio: { voice: 'alloy', format: 'wav' },
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 100,
      })
      .withResponse();
    expect(answer.data.usage?.completion_tokens_details?.audio_tokens).toBe(30);
    requestId = answer.response.headers.get('x-nexus-request-id')!;
  });

  it('are recorded, charged at the strategy’s audio multipliers and priced at the audio prices', async () => {
    const invocation = await invocationByRequestId(t, tenant.workspaceId, requestId);
    // Text input 60 x 1 + audio input 40 x 10 + text output 20 x 2 + audio output 30 x 20.
    expect(invocation.quotaUnits).toBe(`${60 + 400 + 40 + 600}`);
    expect(invocation).toMatchObject({ inputTokens: '100', outputTokens: '50', audioInputTokens: '40', audioOutputTokens: '30' });
    expect(invocation.images).toBeUndefined();
    // Bounded at the audio rates (the dearest of each side): charged within its bound, no ADJUSTMENT.
    expect(invocation.usageEvents!.map((e) => e.kind)).toEqual(['USAGE']);
    const usage = invocation.usageEvents![0]!;
    expect(usage).toMatchObject({ audioInputTokens: '40', audioOutputTokens: '30' });
    // 60 x 2.5 + 40 x 40 + 20 x 10 + 30 x 80 micro-units.
    expect(invocation.costMicros).toBe(`${150 + 1600 + 200 + 2400}`);
    const period = await periodOf(t, tenant.accessId);
    expect(period.consumed).toBe(1100n);
    expect(period.reserved).toBe(0n);
  });

  it('are summed in the usage summary and carried by both CSV exports, a column per kind', async () => {
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const until = new Date(Date.now() + 3_600_000).toISOString();
    const summary = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { since, until, granularity: 'day' },
    });
    expect(summary.response.status).toBe(200);
    const bucket = summary.data!.buckets.find((b) => b.key === 'gpt-4o-audio-preview-2026-01-01' || b.key === 'gpt-4o-audio-preview')!;
    expect(bucket).toMatchObject({ audioInputTokens: '40', audioOutputTokens: '30', inputTokens: '100' });
    expect(bucket.images).toBeUndefined();

    const query = `since=${encodeURIComponent(since)}&until=${encodeURIComponent(until)}`;
    const invocations = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/invocations/export?${query}`, {
      headers: auth(),
    });
    const [head, row] = (await invocations.text()).trimEnd().split('\r\n');
    const cells = Object.fromEntries(head!.split(',').map((name, i) => [name, row!.split(',')[i]]));
    expect(cells).toMatchObject({ audio_input_tokens: '40', audio_output_tokens: '30', images: '', image_tier: '', characters: '' });
    const summaryCsv = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary/export?${query}`, {
      headers: auth(),
    });
    const [sumHead, sumRow] = (await summaryCsv.text()).trimEnd().split('\r\n');
    const sums = Object.fromEntries(sumHead!.split(',').map((name, i) => [name, sumRow!.split(',')[i]]));
    expect(sums).toMatchObject({ audio_input_tokens: '40', audio_output_tokens: '30', images: '0', audio_ms: '0', characters: '0' });
  });
});

describe('a passed-through call', () => {
  const files = (tenant: Tenant) => openAiFor(tenant).files.list().withResponse();

  it('is recorded with 0 units and the cost of its price per call, which counts against the budget', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, passthroughClasses: ['files'] });
    const path = { workspaceId: tenant.workspaceId };
    await createModelPrice({
      client: t.client,
      path,
      body: { modelPattern: '*', inputPerMillion: '1', outputPerMillion: '1', perCall: '0.01', effectiveFrom: hourAgo() },
    });
    const before = await periodOf(t, tenant.accessId);
    const first = await files(tenant);
    expect(first.response.headers.get('x-nexus-metering-status')).toBe('unmetered');
    const invocation = await invocationByRequestId(t, tenant.workspaceId, first.response.headers.get('x-nexus-request-id')!);
    expect(invocation).toMatchObject({ status: 'SUCCEEDED', quotaUnits: '0', costMicros: '10000' });
    expect(invocation.usageEvents).toMatchObject([{ kind: 'USAGE', units: '0', costMicros: '10000', inputTokens: '0', outputTokens: '0' }]);
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed).toBe(before.consumed);
    expect(after.reserved).toBe(0n);

    // A hard budget of 0.015: the second call's cost reaches it, and the next is refused.
    expect((await setWorkspaceBudget({ client: t.client, path, body: { period: 'DAY', hardLimitMicros: '15000' } })).response.status).toBe(
      200,
    );
    await files(tenant);
    await t.nexus.gateway.drain();
    await expect
      .poll(async () => {
        const refused = await files(tenant).catch((e: unknown) => e);
        return refused instanceof OpenAI.APIError ? refused.status : 200;
      })
      .toBe(402);
  });

  it('is recorded with its price per call on an access whose quota is used up: it never needs quota', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, passthroughClasses: ['files'], quotaUnits: 0n });
    await createModelPrice({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { modelPattern: '*', inputPerMillion: '1', outputPerMillion: '1', perCall: '0.5', effectiveFrom: hourAgo() },
    });
    for (let i = 0; i < 2; i++) {
      const call = await files(tenant);
      const invocation = await invocationByRequestId(t, tenant.workspaceId, call.response.headers.get('x-nexus-request-id')!);
      expect(invocation).toMatchObject({ status: 'SUCCEEDED', quotaUnits: '0', costMicros: '500000' });
    }
    expect(await periodOf(t, tenant.accessId)).toEqual({ granted: 0n, reserved: 0n, consumed: 0n });
  });

  it('has no usage event where its price sets no price per call', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, passthroughClasses: ['files'] });
    await createModelPrice({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { modelPattern: '*', inputPerMillion: '1', outputPerMillion: '1', effectiveFrom: hourAgo() },
    });
    const call = await files(tenant);
    const invocation = await invocationByRequestId(t, tenant.workspaceId, call.response.headers.get('x-nexus-request-id')!);
    expect(invocation).toMatchObject({ status: 'SUCCEEDED', quotaUnits: '0' });
    expect(invocation.usageEvents).toEqual([]);
    expect(invocation.costMicros).toBeUndefined();
  });
});

/**
 * Images through the `openai` SDK (docs/modalities.md, "Images"): gpt-image-1 charged exactly what its usage
 * reports (JSON and stream), dall-e per image of its tier (it reports nothing), an edit's 20 MB upload streamed
 * through, a bad size refused before anything is charged, and quota refusing images as it refuses chat.
 */
import OpenAI, { toFile } from 'openai';
import { describe, expect, it } from 'vitest';
import { createModelPrice, setWorkspaceBudget } from '../support/sdk.js';
import { gatewayFetch, openAiFor } from './gateway-support.js';
import { mediaRig } from './media-support.js';

const rig = mediaRig();
const PROMPT = 'a lighthouse at dawn';

describe('images through the openai SDK', () => {
  it('charges gpt-image-1 what its usage reports: text input, image output', async () => {
    const before = await rig.consumed();
    const { data, response } = await openAiFor(rig.tenant, { 'x-fake-usage': '50,4160' })
      .images.generate({ model: 'gpt-image-1', prompt: PROMPT, size: '1024x1024', quality: 'high' })
      .withResponse();
    expect(data.data?.[0]?.b64_json).toBeTruthy();
    expect(data.usage).toMatchObject({ input_tokens: 50, output_tokens: 4160 });
    // 50 input tokens at 1 unit, 4,160 output (image) tokens at 2.
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({
      status: 'SUCCEEDED',
      units: 8370n,
      errorCode: undefined,
      kinds: { imageOutputTokens: '4160' },
    });
    expect((await rig.consumed()) - before).toBe(8370n);
  });

  it('streams gpt-image-1 partial images and charges the usage of image_generation.completed', async () => {
    const before = await rig.consumed();
    const { data: events, response } = await openAiFor(rig.tenant, { 'x-fake-usage': '40,4360' })
      .images.generate({ model: 'gpt-image-1', prompt: PROMPT, stream: true, partial_images: 2 })
      .withResponse();
    const types: string[] = [];
    for await (const event of events) types.push(event.type);
    expect(types).toEqual(['image_generation.partial_image', 'image_generation.partial_image', 'image_generation.completed']);
    expect((await rig.charged(response.headers.get('x-nexus-request-id'))).units).toBe(40n + 2n * 4360n);
    expect((await rig.consumed()) - before).toBe(8760n);
  });

  it('charges dall-e-3, which reports no usage, per image of its tier (an image as 4,160 output tokens)', async () => {
    const before = await rig.consumed();
    const { data, response } = await openAiFor(rig.tenant)
      .images.generate({ model: 'dall-e-3', prompt: PROMPT, size: '1024x1792', quality: 'hd' })
      .withResponse();
    expect(data.data?.[0]?.url).toBe('https://images.invalid/1.png');
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({
      units: 8320n,
      errorCode: undefined,
      kinds: { images: '1', imageTier: 'hd/1024x1792' },
    });
    expect((await rig.consumed()) - before).toBe(8320n);
  });

  it('streams a 20 MB image edit through to the upstream, charged what gpt-image-1 reports', async () => {
    const before = await rig.consumed();
    const image = Buffer.alloc(20 * 1024 * 1024, 0x42);
    Buffer.from('\x89PNG\r\n\x1a\n', 'latin1').copy(image);
    const { data, response } = await openAiFor(rig.tenant, { 'x-fake-usage': '300,4160', 'x-fake-image-input': '200' })
      .images.edit({ model: 'gpt-image-1', image: await toFile(image, 'big.png', { type: 'image/png' }), prompt: PROMPT })
      .withResponse();
    expect(data.data?.[0]?.b64_json).toBeTruthy();
    const seen = rig.up.requests.at(-1)!;
    expect(seen.url).toBe('/v1/images/edits');
    expect(seen.fields).toMatchObject({ model: 'gpt-image-1', prompt: PROMPT });
    expect(seen.files).toEqual([{ field: 'image', filename: 'big.png', size: image.length }]);
    expect(seen.headers.authorization).toMatch(/^Bearer sk-nexus-test-SECRET-media-/);
    expect((await rig.charged(response.headers.get('x-nexus-request-id'))).units).toBe(300n + 2n * 4160n);
    expect((await rig.consumed()) - before).toBe(8620n);
  });

  it('refuses a size it cannot bound (400), before the upstream and without a charge', async () => {
    const before = await rig.consumed();
    const calls = rig.up.requests.length;
    const err = await openAiFor(rig.tenant)
      .images.generate({ model: 'gpt-image-1', prompt: PROMPT, size: 'huge' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ code: 'invalid_parameter', param: 'size' });
    expect(rig.up.requests.length).toBe(calls);
    expect((await rig.consumed()) - before).toBe(0n);
  });

  it('refuses 3 images to an end user with 10 units left, as it refuses chat; 2 fit', async () => {
    // An image is 4,160 output tokens at 0.001 unit: 5 units for one, 9 for two, 13 for three.
    const small = await rig.tenantWith({ quotaUnits: 10n, outputPpm: 1_000n });
    const client = new OpenAI({ baseURL: small.gatewayBaseUrl + '/v1', apiKey: small.apiKey, fetch: gatewayFetch(), maxRetries: 0 });
    const err = await client.images.generate({ model: 'dall-e-2', prompt: PROMPT, n: 3 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).error).toMatchObject({ code: 'quota_insufficient' });
    expect(await rig.consumed(small)).toBe(0n);
    const two = await client.images.generate({ model: 'dall-e-2', prompt: PROMPT, n: 2 }).withResponse();
    expect(two.data.data).toHaveLength(2);
    expect(two.response.headers.get('x-nexus-quota-remaining')).toBe('1');
    expect(await rig.consumed(small)).toBe(9n);
  });

  it("refuses images and an upload with 402 once the workspace's hard budget is reached, the upstream not called", async () => {
    const tenant = await rig.tenantWith({});
    const path = { workspaceId: tenant.workspaceId };
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    const body = { modelPattern: 'gpt-image-*', inputPerMillion: '5', outputPerMillion: '40', effectiveFrom: hourAgo };
    expect((await createModelPrice({ client: rig.t.client, path, body })).response.status).toBe(201);
    const budget = await setWorkspaceBudget({ client: rig.t.client, path, body: { period: 'DAY', hardLimitMicros: '1' } });
    expect(budget.response.status).toBe(200);
    const client = () =>
      new OpenAI({ baseURL: tenant.gatewayBaseUrl + '/v1', apiKey: tenant.apiKey, fetch: gatewayFetch(), maxRetries: 0 });
    // One priced image spends more than the hard level.
    await client().images.generate({ model: 'gpt-image-1', prompt: PROMPT }, { headers: { 'x-fake-usage': '20,272' } });
    await rig.t.nexus.gateway.drain();
    const refusedCode = (e: unknown) => (e instanceof OpenAI.APIError ? `${e.status} ${(e.error as { code?: string }).code}` : String(e));
    await expect
      .poll(async () =>
        refusedCode(
          await client()
            .images.generate({ model: 'dall-e-2', prompt: PROMPT })
            .catch((e: unknown) => e),
        ),
      )
      .toBe('402 workspace_budget_exceeded');
    const calls = rig.up.requests.length;
    const consumed = await rig.consumed(tenant);
    const upload = await client()
      .images.edit({ model: 'gpt-image-1', image: await toFile(Buffer.alloc(4096, 1), 'a.png', { type: 'image/png' }), prompt: PROMPT })
      .catch((e: unknown) => e);
    expect(refusedCode(upload)).toBe('402 workspace_budget_exceeded');
    expect(rig.up.requests.length).toBe(calls);
    expect(await rig.consumed(tenant)).toBe(consumed);
  });
});

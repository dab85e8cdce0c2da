/**
 * Amazon Nova Canvas through `@aws-sdk/client-bedrock-runtime`'s InvokeModel (docs/modalities.md, "Amazon Nova
 * Canvas"): its images charged per image of their tier, in units by the strategy and in cost by the price book, the
 * answer relayed as it came; a request it cannot bound refused before the upstream; quota refusing images as it
 * refuses chat; and another model's InvokeModel still refused.
 */
import { InvokeModelCommand } from '@aws-sdk/client-bedrock-runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startBedrockUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { createModelPrice } from '../support/sdk.js';
import type { TenantSpec } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { bedrockFor, createTenant, invocationByRequestId, periodOf, type Tenant } from './gateway-support.js';

const API_KEY = `${SECRET_MARKER}-nova-canvas-key-0123456789`;
const MODEL = 'amazon.nova-canvas-v1:0';
/** Nova Canvas's prices per image (USD), by quality and size class, as the price book holds them. */
const TIERS = { 'standard/1024x1024': '0.04', 'standard/2048x2048': '0.06', 'premium/1024x1024': '0.06', 'premium/2048x2048': '0.08' };
/** The strategy's units per image, by tier (a unit a cent): ppm per image. */
const UNITS_PPM = {
  'standard/1024x1024': '4000000',
  'standard/2048x2048': '6000000',
  'premium/1024x1024': '6000000',
  'premium/2048x2048': '8000000',
} as const;

let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;

const novaTenant = (o: Partial<TenantSpec> = {}) =>
  createTenant(t, {
    profile: 'bedrock',
    baseUrl: up.url,
    providerKey: API_KEY,
    aws: { awsRegion: 'us-east-1' },
    quotaUnits: 1_000n,
    kindMultipliers: { imageMultiplierPpm: '8000000', imageTierMultipliersPpm: UNITS_PPM },
    ...o,
  });

beforeAll(async () => {
  t = await startTestApp();
  up = await startBedrockUpstream({ apiKeys: [API_KEY] });
  tenant = await novaTenant();
  const price = await createModelPrice({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: {
      modelPattern: 'amazon.nova-canvas*',
      protocolProfile: 'bedrock',
      inputPerMillion: '0',
      outputPerMillion: '0',
      perImage: '0.08',
      perImageTier: TIERS,
      effectiveFrom: new Date(Date.now() - 3_600_000).toISOString(),
    },
  });
  expect(price.response.status).toBe(201);
}, 60_000);
afterAll(async () => {
  await t?.close();
  await up?.close();
});

/** An InvokeModel of Nova Canvas through the SDK: the images it answered, and the gateway's request id. */
async function invoke(body: object, who: Tenant = tenant) {
  const seen: { requestId?: string } = {};
  const out = await bedrockFor(who, {}, seen).send(
    new InvokeModelCommand({ modelId: MODEL, contentType: 'application/json', accept: 'application/json', body: JSON.stringify(body) }),
  );
  const answer = JSON.parse(Buffer.from(out.body).toString('utf8')) as { images: string[]; error: string | null };
  return { images: answer.images, requestId: seen.requestId! };
}

async function charged(requestId: string, who: Tenant = tenant) {
  const inv = await invocationByRequestId(t, who.workspaceId, requestId);
  return {
    status: inv.status,
    units: inv.quotaUnits,
    costMicros: inv.costMicros,
    images: inv.images,
    imageTier: inv.imageTier,
    events: inv.usageEvents!.map((e) => e.kind),
  };
}

const textImage = (config: object) => ({
  taskType: 'TEXT_IMAGE',
  textToImageParams: { text: 'a lighthouse at dawn' },
  imageGenerationConfig: config,
});

describe('Nova Canvas through InvokeModel', () => {
  it('charges two premium 2048x2048 images at their tier: the strategy in units, the price book in cost', async () => {
    const before = (await periodOf(t, tenant.accessId)).consumed;
    const { images, requestId } = await invoke(textImage({ numberOfImages: 2, quality: 'premium', width: 2048, height: 2048, seed: 7 }));
    expect(images).toHaveLength(2);
    expect(Buffer.from(images[0]!, 'base64').subarray(0, 4).toString('latin1')).toBe('\x89PNG');
    const seen = up.requests.at(-1)!;
    expect(seen.url).toBe(`/model/${encodeURIComponent(MODEL)}/invoke`);
    expect(seen.headers.authorization).toBe(`Bearer ${API_KEY}`);
    // 2 images x 8 units; 2 x $0.08.
    expect(await charged(requestId)).toEqual({
      status: 'SUCCEEDED',
      units: '16',
      costMicros: '160000',
      images: '2',
      imageTier: 'premium/2048x2048',
      events: ['USAGE'],
    });
    expect((await periodOf(t, tenant.accessId)).consumed - before).toBe(16n);
  });

  it('takes an image of no config at standard quality and 1024x1024, its default', async () => {
    const { images, requestId } = await invoke({ taskType: 'TEXT_IMAGE', textToImageParams: { text: 'a kite' } });
    expect(images).toHaveLength(1);
    expect(await charged(requestId)).toMatchObject({ units: '4', costMicros: '40000', images: '1', imageTier: 'standard/1024x1024' });
  });

  it('takes a size above 1024x1024 pixels at the larger class, and an edit of an input image at it too', async () => {
    const wide = await invoke(textImage({ numberOfImages: 3, width: 1280, height: 896 }));
    expect(await charged(wide.requestId)).toMatchObject({
      units: '18',
      costMicros: '180000',
      images: '3',
      imageTier: 'standard/2048x2048',
    });
    // Background removal: one image, of its input's size.
    const cut = await invoke({ taskType: 'BACKGROUND_REMOVAL', backgroundRemovalParams: { image: 'iVBORw0KGgo=' } });
    expect(cut.images).toHaveLength(1);
    expect(await charged(cut.requestId)).toMatchObject({ units: '6', costMicros: '60000', images: '1', imageTier: 'standard/2048x2048' });
  });

  it('refuses a request it cannot bound (400 ValidationException), the upstream not called and nothing charged', async () => {
    const before = (await periodOf(t, tenant.accessId)).consumed;
    const calls = up.requests.length;
    for (const [body, param] of [
      [textImage({ quality: 'ultra' }), 'imageGenerationConfig.quality'],
      [textImage({ numberOfImages: 6 }), 'imageGenerationConfig.numberOfImages'],
      [{ textToImageParams: { text: 'no task' } }, 'taskType'],
    ] as const) {
      const err = (await invoke(body).catch((e: unknown) => e)) as Error & { $metadata: { httpStatusCode: number } };
      expect(err.name).toBe('ValidationException');
      expect(err.$metadata.httpStatusCode).toBe(400);
      expect(err.message).toContain(param);
    }
    expect(up.requests.length).toBe(calls);
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(before);
  });

  it('refuses 3 premium images to an end user with 20 units left, as it refuses chat; 2 fit', async () => {
    const small = await novaTenant({ quotaUnits: 20n });
    const calls = up.requests.length;
    const config = { quality: 'premium', width: 2048, height: 2048 };
    const err = (await invoke(textImage({ ...config, numberOfImages: 3 }), small).catch((e: unknown) => e)) as Error;
    expect(err.name).toBe('ServiceQuotaExceededException');
    expect(err.message).toMatch(/up to 24 units; 20 are available$/);
    expect(up.requests.length).toBe(calls);
    const two = await invoke(textImage({ ...config, numberOfImages: 2 }), small);
    expect(two.images).toHaveLength(2);
    await t.nexus.gateway.drain();
    expect((await periodOf(t, small.accessId)).consumed).toBe(16n);
  });

  it("still refuses another model's InvokeModel (409), whose body it cannot bound", async () => {
    const calls = up.requests.length;
    const err = (await bedrockFor(tenant)
      .send(new InvokeModelCommand({ modelId: 'amazon.titan-image-generator-v2:0', body: JSON.stringify(textImage({})) }))
      .catch((e: unknown) => e)) as Error & { $metadata: { httpStatusCode: number } };
    expect(err.$metadata.httpStatusCode).toBe(409);
    expect(up.requests.length).toBe(calls);
  });
});

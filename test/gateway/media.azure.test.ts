/**
 * Azure OpenAI's media endpoints (docs/modalities.md): the `AzureOpenAI` client's images and speech on deployment
 * paths, the deployment as the model they are charged by; the plain `OpenAI` client on the v1 paths, an upload
 * among them.
 */
import OpenAI, { AzureOpenAI, toFile } from 'openai';
import { describe, expect, it } from 'vitest';
import { gatewayFetch } from './gateway-support.js';
import { mediaRig } from './media-support.js';
import { wavOf } from '../support/wav.js';

const rig = mediaRig({ profile: 'azure-openai' });
const API_VERSION = '2025-04-01-preview';

const azure = (headers: Record<string, string> = {}) =>
  new AzureOpenAI({
    endpoint: rig.tenant.gatewayBaseUrl,
    apiKey: rig.tenant.apiKey,
    apiVersion: API_VERSION,
    fetch: gatewayFetch(),
    maxRetries: 0,
    defaultHeaders: headers,
  });

describe('AzureOpenAI pointed at the gateway base URL', () => {
  it('meters an image on its deployment path, charged what the deployment (gpt-image-1) reports', async () => {
    const { data, response } = await azure({ 'x-fake-usage': '30,1056' })
      .images.generate({ model: 'gpt-image-1', prompt: 'a fox', quality: 'medium', size: '1024x1024' })
      .withResponse();
    expect(data.data?.[0]?.b64_json).toBeTruthy();
    const seen = rig.up.requests.at(-1)!;
    expect(seen.url).toBe(`/openai/deployments/gpt-image-1/images/generations?api-version=${API_VERSION}`);
    expect(seen.headers['api-key']).toMatch(/^sk-nexus-test-SECRET-media-/);
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({ status: 'SUCCEEDED', units: 30n + 2n * 1056n });
  });

  it('meters speech on its deployment path, tts-1 per character', async () => {
    const before = await rig.consumed();
    const { data, response } = await azure()
      .audio.speech.create({ model: 'tts-1', input: 'Hello from Azure', voice: 'alloy' })
      .withResponse();
    expect((await data.arrayBuffer()).byteLength).toBe(4096);
    expect(rig.up.requests.at(-1)!.url).toBe(`/openai/deployments/tts-1/audio/speech?api-version=${API_VERSION}`);
    expect((await rig.charged(response.headers.get('x-nexus-request-id'))).units).toBe(16n);
    expect((await rig.consumed()) - before).toBe(16n);
  });

  it('meters the v1 paths for the plain OpenAI client: an upload streamed, whisper-1 by its seconds', async () => {
    const client = new OpenAI({
      baseURL: `${rig.tenant.gatewayBaseUrl}/openai/v1`,
      apiKey: rig.tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
    });
    const { response } = await client.audio.transcriptions
      .create({ file: await toFile(wavOf(1), 'a.wav', { type: 'audio/wav' }), model: 'whisper-1' }, { headers: { 'x-fake-seconds': '2' } })
      .withResponse();
    expect(rig.up.requests.at(-1)!.url).toBe('/openai/v1/audio/transcriptions');
    expect((await rig.charged(response.headers.get('x-nexus-request-id'))).units).toBe(40n);
  });
});

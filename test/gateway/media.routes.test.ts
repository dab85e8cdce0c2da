/**
 * An upload through a route (docs/routes.md, docs/modalities.md "Uploads"): an Azure target whose model map names its
 * deployment gets the upload as it came, its `model` field replaced.
 */
import OpenAI, { toFile } from 'openai';
import { describe, expect, it } from 'vitest';
import { createProviderConnection, createRoute } from '../support/sdk.js';
import { gatewayFetch } from './gateway-support.js';
import { MEDIA_KEY, mediaRig } from './media-support.js';
import { wavOf } from '../support/wav.js';

const rig = mediaRig();

describe('an upload through a route', () => {
  it("reaches an Azure target with its model field replaced by the target's deployment, its file intact", async () => {
    const path = { workspaceId: rig.tenant.workspaceId };
    const azure = await createProviderConnection({
      client: rig.t.client,
      path,
      body: { name: 'azure-media', protocolProfile: 'azure-openai', baseUrl: rig.up.url, apiKey: MEDIA_KEY },
    });
    expect(azure.response.status).toBe(201);
    const route = await createRoute({
      client: rig.t.client,
      path,
      body: { name: 'media-route', targets: [{ providerConnectionId: azure.data!.id, modelMap: { 'whisper-1': 'whisper-prod' } }] },
    });
    expect(route.response.status).toBe(201);
    await rig.t.nexus.gateway.refreshRoutes();
    const client = new OpenAI({
      baseURL: route.data!.gatewayBaseUrl + '/v1',
      apiKey: rig.tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
    });
    const wav = wavOf(2);
    const { data, response } = await client.audio.transcriptions
      .create(
        { file: await toFile(wav, 'two.wav', { type: 'audio/wav' }), model: 'whisper-1', language: 'en' },
        { headers: { 'x-fake-seconds': '2' } },
      )
      .withResponse();
    expect(data.text).toBe('hello from the fake transcriber');
    const seen = rig.up.requests.at(-1)!;
    expect(seen.url).toBe('/openai/v1/audio/transcriptions');
    expect(seen.headers['api-key']).toBe(MEDIA_KEY);
    expect(seen.fields).toEqual({ model: 'whisper-prod', language: 'en' });
    expect(seen.files).toEqual([{ field: 'file', filename: 'two.wav', size: wav.length }]);
    // Priced by the model the request named: 2 seconds of whisper-1, at 20 input tokens a second.
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({ status: 'SUCCEEDED', units: 40n });
  });
});

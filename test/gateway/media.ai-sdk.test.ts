/**
 * The AI SDK (`ai` with `@ai-sdk/openai`) through the gateway, unchanged: generateImage, experimental_generateSpeech
 * and experimental_transcribe, each metered (docs/modalities.md).
 */
import { createOpenAI } from '@ai-sdk/openai';
import { experimental_generateSpeech, experimental_transcribe, generateImage } from 'ai';
import { describe, expect, it } from 'vitest';
import { gatewayFetch } from './gateway-support.js';
import { mediaRig } from './media-support.js';
import { wavOf } from '../support/wav.js';

const rig = mediaRig();

/** The provider pointed at the gateway; each answer's request id kept, to find its invocation. */
function provider(seen: string[]) {
  const inner = gatewayFetch();
  return createOpenAI({
    baseURL: rig.tenant.gatewayBaseUrl + '/v1',
    apiKey: rig.tenant.apiKey,
    fetch: async (input, init) => {
      const res = await inner(input, init);
      seen.push(res.headers.get('x-nexus-request-id') ?? '');
      return res;
    },
  });
}

describe('the AI SDK through the gateway', () => {
  it('generateImage: gpt-image-1 charged what it reports', async () => {
    const seen: string[] = [];
    const { images } = await generateImage({
      model: provider(seen).image('gpt-image-1'),
      prompt: 'a quiet harbour',
      maxRetries: 0,
      headers: { 'x-fake-usage': '25,272' },
    });
    expect(images).toHaveLength(1);
    expect(images[0]!.uint8Array.length).toBeGreaterThan(0);
    expect(await rig.charged(seen.at(-1)!)).toMatchObject({ status: 'SUCCEEDED', units: 25n + 2n * 272n });
  });

  it('experimental_generateSpeech: tts-1 per character, its audio as it came', async () => {
    const seen: string[] = [];
    const { audio } = await experimental_generateSpeech({ model: provider(seen).speech('tts-1'), text: 'Good morning', maxRetries: 0 });
    expect(audio.uint8Array.length).toBe(4096);
    expect((await rig.charged(seen.at(-1)!)).units).toBe(12n);
  });

  it('experimental_transcribe: whisper-1 (verbose_json) by its duration, billed in whole seconds', async () => {
    const seen: string[] = [];
    const before = await rig.consumed();
    const result = await experimental_transcribe({
      model: provider(seen).transcription('whisper-1'),
      audio: wavOf(2),
      maxRetries: 0,
      headers: { 'x-fake-seconds': '6' },
    });
    expect(result.text).toBe('hello from the fake transcriber');
    expect(rig.up.requests.at(-1)!.fields).toMatchObject({ model: 'whisper-1', response_format: 'verbose_json' });
    // verbose_json says its duration (5.5 s) and no usage: 6 seconds, at 20 input tokens each.
    expect((await rig.charged(seen.at(-1)!)).units).toBe(120n);
    expect((await rig.consumed()) - before).toBe(120n);
  });
});

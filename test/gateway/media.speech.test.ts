/**
 * Speech and moderations through the `openai` SDK (docs/modalities.md, "Speech", "Moderations"): tts-1 per
 * character, gpt-4o-mini-tts by its usage in an SSE stream and by the rule when its binary answer reports none, the
 * audio relayed as it came; moderations free and recorded; rate limits refusing speech as they refuse chat.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { gatewayFetch, openAiFor } from './gateway-support.js';
import { mediaRig } from './media-support.js';

const rig = mediaRig();
const INPUT = 'Hello there, world';

describe('speech through the openai SDK', () => {
  it('charges tts-1 per character of its input and relays the audio as it came', async () => {
    const before = await rig.consumed();
    const { data, response } = await openAiFor(rig.tenant, { 'x-fake-audio-bytes': '70000' })
      .audio.speech.create({ model: 'tts-1', input: INPUT, voice: 'alloy' })
      .withResponse();
    expect(data.headers.get('content-type')).toBe('audio/mpeg');
    expect((await data.arrayBuffer()).byteLength).toBe(70_000);
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({
      status: 'SUCCEEDED',
      units: 18n,
      errorCode: undefined,
      kinds: { characters: '18' },
    });
    expect((await rig.consumed()) - before).toBe(18n);
  });

  it('charges gpt-4o-mini-tts by the rule when its binary answer reports no usage: its bytes in, 6 audio tokens a character out', async () => {
    const { data, response } = await openAiFor(rig.tenant)
      .audio.speech.create({ model: 'gpt-4o-mini-tts', input: INPUT, voice: 'alloy', instructions: 'calm' })
      .withResponse();
    expect((await data.arrayBuffer()).byteLength).toBe(4096);
    // 22 bytes of input and instructions at 1 unit; 18 x 6 + 1 audio output tokens at 2.
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({
      units: 22n + 2n * 109n,
      kinds: { audioOutputTokens: '109' },
    });
  });

  it('charges gpt-4o-mini-tts what speech.audio.done reports in an SSE stream', async () => {
    const before = await rig.consumed();
    const { data, response } = await openAiFor(rig.tenant, { 'x-fake-usage': '12,300' })
      .audio.speech.create({ model: 'gpt-4o-mini-tts', input: INPUT, voice: 'alloy', stream_format: 'sse' })
      .withResponse();
    const text = await data.text();
    expect(text).toContain('speech.audio.delta');
    expect(text).toContain('"type":"speech.audio.done"');
    expect((await rig.charged(response.headers.get('x-nexus-request-id'))).units).toBe(12n + 600n);
    expect((await rig.consumed()) - before).toBe(612n);
  });

  it('refuses speech without input (400), nothing charged nor sent', async () => {
    const calls = rig.up.requests.length;
    const before = await rig.consumed();
    const err = await openAiFor(rig.tenant)
      .audio.speech.create({ model: 'tts-1', voice: 'alloy' } as unknown as OpenAI.Audio.SpeechCreateParams)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ code: 'invalid_parameter', param: 'input' });
    expect(rig.up.requests.length).toBe(calls);
    expect((await rig.consumed()) - before).toBe(0n);
  });

  it("refuses speech past the plan's requests per minute, as it refuses chat", async () => {
    const limited = await rig.tenantWith({ rateLimits: { requestsPerMinute: 1 } });
    const client = new OpenAI({ baseURL: limited.gatewayBaseUrl + '/v1', apiKey: limited.apiKey, fetch: gatewayFetch(), maxRetries: 0 });
    await (await client.audio.speech.create({ model: 'tts-1', input: INPUT, voice: 'alloy' })).arrayBuffer();
    const err = await client.audio.speech.create({ model: 'tts-1', input: INPUT, voice: 'alloy' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).error).toMatchObject({ code: 'rate_limited' });
    expect(await rig.consumed(limited)).toBe(18n);
  });
});

describe('moderations through the openai SDK', () => {
  it('are free: recorded, 0 units', async () => {
    const before = await rig.consumed();
    const { data, response } = await openAiFor(rig.tenant)
      .moderations.create({ model: 'omni-moderation-latest', input: 'is this fine?' })
      .withResponse();
    expect(data.results[0]?.flagged).toBe(false);
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({
      status: 'SUCCEEDED',
      units: 0n,
      errorCode: undefined,
    });
    expect((await rig.consumed()) - before).toBe(0n);
  });
});

/**
 * Transcription and translation through the `openai` SDK (docs/modalities.md, "Transcription"): whisper-1 by the
 * seconds it reports, gpt-4o-transcribe by its tokens (JSON and stream), a text answer by its WAV header's duration,
 * the upload streamed through; a body that is no form refused.
 */
import { toFile } from 'openai';
import { describe, expect, it } from 'vitest';
import { gatewayFetch, openAiFor } from './gateway-support.js';
import { mediaRig } from './media-support.js';
import { wavOf } from '../support/wav.js';

const rig = mediaRig();
const audio = () => toFile(wavOf(3.2), 'hello.wav', { type: 'audio/wav' });

describe('transcription through the openai SDK', () => {
  it('charges whisper-1 the seconds its usage reports (a second as 20 input tokens)', async () => {
    const before = await rig.consumed();
    const { data, response } = await openAiFor(rig.tenant, { 'x-fake-seconds': '7' })
      .audio.transcriptions.create({ file: await audio(), model: 'whisper-1' })
      .withResponse();
    expect(data.text).toBe('hello from the fake transcriber');
    const seen = rig.up.requests.at(-1)!;
    expect(seen.files).toEqual([{ field: 'file', filename: 'hello.wav', size: wavOf(3.2).length }]);
    expect(seen.fields).toMatchObject({ model: 'whisper-1' });
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({
      status: 'SUCCEEDED',
      units: 140n,
      errorCode: undefined,
      kinds: { audioMs: '7000' },
    });
    expect((await rig.consumed()) - before).toBe(140n);
  });

  it('charges a text answer, which reports nothing, by the WAV header: 3.2 s billed as 4', async () => {
    const { data, response } = await openAiFor(rig.tenant)
      .audio.transcriptions.create({ file: await audio(), model: 'whisper-1', response_format: 'text' })
      .withResponse();
    expect(data).toBe('hello from the fake transcriber');
    expect(await rig.charged(response.headers.get('x-nexus-request-id'))).toMatchObject({
      units: 80n,
      errorCode: undefined,
      kinds: { audioMs: '4000' },
    });
  });

  it('charges gpt-4o-transcribe its tokens (audio among the input)', async () => {
    const { data, response } = await openAiFor(rig.tenant, { 'x-fake-usage': '120,20' })
      .audio.transcriptions.create({ file: await audio(), model: 'gpt-4o-transcribe' })
      .withResponse();
    expect(data.text).toBeTruthy();
    expect((await rig.charged(response.headers.get('x-nexus-request-id'))).units).toBe(120n + 40n);
  });

  it('charges a gpt-4o-transcribe stream what transcript.text.done reports', async () => {
    const before = await rig.consumed();
    const { data: events, response } = await openAiFor(rig.tenant, { 'x-fake-usage': '90,12' })
      .audio.transcriptions.create({ file: await audio(), model: 'gpt-4o-transcribe', stream: true })
      .withResponse();
    const types: string[] = [];
    for await (const event of events) types.push(event.type);
    expect(types).toEqual(['transcript.text.delta', 'transcript.text.delta', 'transcript.text.done']);
    expect((await rig.charged(response.headers.get('x-nexus-request-id'))).units).toBe(90n + 24n);
    expect((await rig.consumed()) - before).toBe(114n);
  });

  it('charges a whisper-1 translation the seconds it reports', async () => {
    const { response } = await openAiFor(rig.tenant, { 'x-fake-seconds': '5' })
      .audio.translations.create({ file: await audio(), model: 'whisper-1' })
      .withResponse();
    expect(rig.up.requests.at(-1)!.url).toBe('/v1/audio/translations');
    expect((await rig.charged(response.headers.get('x-nexus-request-id'))).units).toBe(100n);
  });

  it('refuses a transcription whose body is JSON, not a form (400), nothing charged nor sent', async () => {
    const calls = rig.up.requests.length;
    const res = await gatewayFetch()(`${rig.tenant.gatewayBaseUrl}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${rig.tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'whisper-1', file: 'nope' }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe('content-type');
    expect(rig.up.requests.length).toBe(calls);
    const cut = await gatewayFetch()(`${rig.tenant.gatewayBaseUrl}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${rig.tenant.apiKey}`, 'content-type': 'multipart/form-data; boundary=xyz' },
      body: '--xyz\r\ncontent-disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n',
    });
    expect(cut.status).toBe(400);
    expect(((await cut.json()) as { error: { message: string } }).error.message).toMatch(/ends before its closing boundary/);
    expect(rig.up.requests.length).toBe(calls);
  });
});

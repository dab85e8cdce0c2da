/**
 * The media endpoints' rules without the app (docs/modalities.md): an audio file's duration bound, a multipart body
 * read as it comes and spooled, each endpoint's bounds and its charge when the answer reports no usage, and the usage
 * of their answers (Gemini's tokens by modality among them).
 */
import { readdirSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { PassThrough } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { charge } from '../../src/gateway/charge.js';
import { FormScanner } from '../../src/protocols/multipart.js';
import { readUpload, type Upload } from '../../src/gateway/upload.js';
import { audioBoundMs, LOWEST_BITRATE } from '../../src/protocols/audio-duration.js';
import { inspectorFor, prepareCall, prepareForm, usageFromJson } from '../../src/protocols/inspectors.js';
import type { FormRead } from '../../src/protocols/protocol.js';
import type { Pricing } from '../../src/domain/quota/model-pricing.js';
import { wavOf } from '../support/wav.js';

const caps = { maxOutputTokens: 4096, clamp: true };
const openai = (path: string) => inspectorFor('openai', 'POST', path)!;
const json = (body: unknown) => Buffer.from(JSON.stringify(body));
const file = (name: string, head: Buffer, size: number, contentType = '') => ({ field: 'file', filename: name, contentType, size, head });
const form = (fields: Record<string, string>, files: FormRead['files']): FormRead => ({ fields, files, bytes: 0 });

describe("an audio file's duration bound", () => {
  it("reads a WAV header's byte rate, every byte after its data chunk's header counted", () => {
    const wav = wavOf(3.2);
    expect(audioBoundMs(file('a.wav', wav.subarray(0, 4096), wav.length))).toBe(3200n);
    // A header that declares less data than the file holds bounds by what the file holds.
    const lying = Buffer.from(wav);
    lying.writeUInt32LE(100, 40);
    expect(audioBoundMs(file('a.wav', lying.subarray(0, 4096), lying.length))).toBe(3200n);
  });

  it("reads a FLAC's STREAMINFO (samples over rate)", () => {
    const head = Buffer.alloc(42);
    head.write('fLaC', 0, 'latin1');
    // STREAMINFO at 8: 10 bytes of sizes, then 44,100 Hz (20 bits), channels and bits, 441,000 samples (36 bits).
    const at = 18;
    head[at] = 44_100 >> 12;
    head[at + 1] = (44_100 >> 4) & 0xff;
    head[at + 2] = (44_100 & 0x0f) << 4;
    head.writeUInt32BE(441_000, at + 4);
    expect(audioBoundMs(file('a.flac', head, 1_000_000))).toBe(10_000n);
  });

  it("takes any other file at its format's lowest bitrate", () => {
    const mp3 = Buffer.from('ID3\x04\x00', 'latin1');
    expect(audioBoundMs(file('a.mp3', mp3, 1_000_000))).toBe((1_000_000n * 8000n) / BigInt(LOWEST_BITRATE.mp3));
    expect(audioBoundMs(file('a.webm', Buffer.from([0x1a, 0x45, 0xdf, 0xa3]), 6_000))).toBe(8000n);
    expect(audioBoundMs(file('x.bin', Buffer.from('????'), 1000, 'application/octet-stream'))).toBe(8000n);
  });
});

const BODY = [
  '--b0undary\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-4o-transcribe\r\n',
  '--b0undary\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n',
];

/** A multipart body of a model field and a file of `data`. */
const multipart = (data: Buffer) => Buffer.concat([Buffer.from(BODY.join('')), data, Buffer.from('\r\n--b0undary--\r\n')]);

/** An upload read from `body`, sent in chunks of `size` bytes. */
async function uploadOf(body: Buffer, size: number, limit = 1 << 30): Promise<Upload> {
  const req = new PassThrough();
  const read = readUpload(req as unknown as IncomingMessage, limit, 'b0undary');
  for (let at = 0; at < body.length; at += size) req.write(body.subarray(at, at + size));
  req.end();
  return read;
}

const bytesOf = async (upload: Upload) => {
  const chunks: Buffer[] = [];
  for await (const chunk of upload.open()) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

describe('a multipart upload, read as it comes', () => {
  it('finds its fields and files whatever its chunks, one byte at a time included', () => {
    const body = multipart(wavOf(0.5));
    for (const size of [1, 7, 64, body.length]) {
      const scanner = new FormScanner('b0undary');
      for (let at = 0; at < body.length; at += size) scanner.push(body.subarray(at, at + size));
      const read = scanner.end();
      expect(read.fields).toEqual({ model: 'gpt-4o-transcribe' });
      expect(read.files).toMatchObject([{ field: 'file', filename: 'a.wav', contentType: 'audio/wav', size: wavOf(0.5).length }]);
      expect(read.files[0]!.head.subarray(0, 4).toString()).toBe('RIFF');
    }
  });

  it('refuses a body cut before its closing boundary, and a part without a name', () => {
    const cut = new FormScanner('b0undary');
    cut.push(Buffer.from(BODY[0]!));
    expect(() => cut.end()).toThrow(/ends before its closing boundary/);
    const nameless = new FormScanner('b0undary');
    expect(() => nameless.push(Buffer.from('--b0undary\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b0undary--'))).toThrow(/no name/);
  });

  it('sends its bytes as they came, from memory or from its spool file, a field replaced for a route target', async () => {
    for (const seconds of [0.5, 40]) {
      const body = multipart(wavOf(seconds));
      const upload = await uploadOf(body, 65_536);
      expect(upload.length).toBe(body.length);
      expect((await bytesOf(upload)).equals(body)).toBe(true);
      const mapped = upload.withField('model', 'my-deployment');
      expect((await bytesOf(mapped)).toString('latin1')).toBe(body.toString('latin1').replace('gpt-4o-transcribe', 'my-deployment'));
      expect(mapped.length).toBe(body.length - 'gpt-4o-transcribe'.length + 'my-deployment'.length);
      await upload.dispose();
    }
  });

  it("closes its spool file when an attempt's stream is destroyed mid-read, and the next attempt sends it whole", async () => {
    // The descriptors this process holds open on a spool file (Linux: /proc).
    const spoolFds = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`).includes('nexus-upload-');
        } catch {
          return false;
        }
      }).length;
    const body = multipart(wavOf(40));
    const upload = await uploadOf(body, 65_536);
    await expect.poll(spoolFds).toBe(0);
    const attempt = upload.open();
    const first = await new Promise<Buffer>((resolve) => attempt.once('data', resolve));
    expect(first.equals(body.subarray(0, first.length))).toBe(true);
    expect(spoolFds()).toBe(1);
    // Its next read is under way: the file is closed once that read is back, and the stream then closes.
    attempt.destroy();
    await new Promise((resolve) => attempt.once('close', resolve));
    expect(spoolFds()).toBe(0);
    expect((await bytesOf(upload)).equals(body)).toBe(true);
    expect(spoolFds()).toBe(0);
    await upload.dispose();
  });

  it('deletes the spool file of an upload whose client leaves before its end', async () => {
    const spools = () => readdirSync(tmpdir()).filter((name) => name.startsWith('nexus-upload-')).length;
    const before = spools();
    const req = new PassThrough();
    const read = readUpload(req as unknown as IncomingMessage, 1 << 30, 'b0undary');
    req.write(multipart(wavOf(40)).subarray(0, 2 << 20));
    await new Promise((r) => setTimeout(r, 50));
    expect(spools()).toBe(before + 1);
    req.destroy();
    await expect(read).rejects.toThrow(/closed the connection/);
    await expect.poll(spools).toBe(before);
  });

  it('refuses an upload past the limit (413)', async () => {
    await expect(uploadOf(multipart(wavOf(1)), 1024, 10_000)).rejects.toMatchObject({ code: 'payload_too_large' });
  });
});

const PRICING = { inputMultiplierPpm: 1_000_000n, cachedInputMultiplierPpm: 500_000n, outputMultiplierPpm: 2_000_000n } as Pricing;
const unanswered = { usage: null, complete: false, outputEstimate: 0n, cut: false, model: null, upstreamEnded: true };

describe("each endpoint's bounds, and its charge when the answer reports no usage", () => {
  it('images: n x the largest output of the size and quality; dall-e by its images of a tier', () => {
    const gpt = prepareCall(
      openai('v1/images/generations'),
      json({ model: 'gpt-image-1', prompt: 'abc', n: 2, size: '1024x1536', quality: 'high' }),
      caps,
    );
    expect(gpt).toMatchObject({ inputBound: 3n, outputBound: 2n * 6240n, stream: false });
    expect(gpt.unreported).toMatchObject({ outputTokens: 12_480n, imageOutputTokens: 12_480n });
    const auto = prepareCall(
      openai('v1/images/generations'),
      json({ model: 'gpt-image-1', prompt: '', stream: true, partial_images: 3 }),
      caps,
    );
    expect(auto.outputBound).toBe(6240n + 300n);
    const dalle = prepareCall(
      openai('v1/images/generations'),
      json({ model: 'dall-e-3', prompt: 'x', size: '1792x1024', quality: 'hd' }),
      caps,
    );
    expect(dalle).toMatchObject({ inputBound: 0n, outputBound: 0n, boundKinds: { images: 1n, imageTier: 'hd/1792x1024' } });
    const c = charge(unanswered, dalle, PRICING);
    expect(c).toMatchObject({ units: 8320n, images: 1n, imageTier: 'hd/1792x1024', usageMissing: false, malformed: false });
    expect(() => prepareCall(openai('v1/images/generations'), json({ model: 'dall-e-2', n: 0 }), caps)).toThrow(/n must be a whole number/);
    const odd = json({ model: 'gpt-image-1', quality: 'constructor' });
    expect(prepareCall(openai('v1/images/generations'), odd, caps).outputBound).toBe(6240n);
    expect(() => prepareCall(openai('v1/images/generations'), json({ model: 'dall-e-3', quality: 'x y' }), caps)).toThrow(/quality/);
  });

  it('speech: characters for tts-1; bytes in and 6 audio tokens a character out (more when slower) otherwise', () => {
    const tts = prepareCall(openai('v1/audio/speech'), json({ model: 'tts-1-hd', input: 'héllo', voice: 'alloy' }), caps);
    expect(tts).toMatchObject({ inputBound: 0n, outputBound: 0n, unreported: { characters: 5n } });
    const mini = prepareCall(
      openai('v1/audio/speech'),
      json({ model: 'gpt-4o-mini-tts', input: 'héllo', voice: 'alloy', speed: 0.5 }),
      caps,
    );
    expect(mini).toMatchObject({ inputBound: 6n, outputBound: 61n, boundKinds: { audioOutputTokens: 61n } });
    expect(() => prepareCall(openai('v1/audio/speech'), json({ model: 'tts-1', input: 'x', speed: 9 }), caps)).toThrow(/speed/);
  });

  it('transcription: whisper by seconds (whole ones), the others by audio tokens from the duration', () => {
    const wav = wavOf(2.4);
    const files = [file('a.wav', wav.subarray(0, 4096), wav.length)];
    const whisper = prepareForm(openai('v1/audio/transcriptions'), form({ model: 'whisper-1', response_format: 'srt' }, files));
    expect(whisper).toMatchObject({ inputBound: 0n, outputBound: 0n, unreported: { audioMs: 3000n } });
    const tokens = prepareForm(
      openai('v1/audio/translations'),
      form({ model: 'gpt-4o-mini-transcribe', stream: 'true', prompt: 'ab' }, files),
    );
    expect(tokens).toMatchObject({ stream: true, inputBound: 62n, outputBound: 49n, boundKinds: { audioInputTokens: 60n } });
    expect(() => prepareForm(openai('v1/audio/transcriptions'), form({ model: 'whisper-1' }, []))).toThrow(/file is required/);
    expect(() => prepareCall(openai('v1/audio/transcriptions'), json({ model: 'whisper-1' }), caps)).toThrow(/multipart/);
    expect(() => prepareForm(openai('v1/chat/completions'), form({}, []))).toThrow(/takes a JSON body/);
  });

  it('moderations: free', () => {
    const mod = prepareCall(openai('v1/moderations'), json({ input: 'x' }), caps);
    expect(charge(unanswered, mod, PRICING)).toMatchObject({ units: 0n, usageMissing: false });
    expect(usageFromJson(openai('v1/moderations'), '{"results":[]}').usage).toMatchObject({ inputTokens: 0n, outputTokens: 0n });
  });
});

describe('the usage their answers report', () => {
  it('images: image tokens in and out', () => {
    const { usage } = usageFromJson(
      openai('v1/images/edits'),
      JSON.stringify({ usage: { input_tokens: 90, input_tokens_details: { text_tokens: 10, image_tokens: 80 }, output_tokens: 272 } }),
    );
    expect(usage).toMatchObject({ inputTokens: 90n, imageInputTokens: 80n, outputTokens: 272n, imageOutputTokens: 272n });
  });

  it('transcription: seconds, tokens with their audio, or a verbose_json duration in whole seconds', () => {
    const t = openai('v1/audio/transcriptions');
    expect(usageFromJson(t, '{"text":"","usage":{"type":"duration","seconds":3}}').usage).toMatchObject({ audioMs: 3000n });
    const tokens = '{"usage":{"type":"tokens","input_tokens":20,"input_token_details":{"audio_tokens":18},"output_tokens":4}}';
    expect(usageFromJson(t, tokens).usage).toMatchObject({ inputTokens: 20n, audioInputTokens: 18n, outputTokens: 4n });
    expect(usageFromJson(t, '{"text":"","duration":2.1}').usage).toMatchObject({ audioMs: 3000n });
  });

  it('Gemini: image and audio tokens by modality, as parts of the totals', () => {
    const generate = inspectorFor('gemini', 'POST', 'v1beta/models/gemini-2.5-flash-image:generateContent')!;
    const answer = {
      usageMetadata: {
        promptTokenCount: 300,
        candidatesTokenCount: 1300,
        promptTokensDetails: [
          { modality: 'TEXT', tokenCount: 42 },
          { modality: 'AUDIO', tokenCount: 258 },
        ],
        candidatesTokensDetails: [
          { modality: 'TEXT', tokenCount: 10 },
          { modality: 'IMAGE', tokenCount: 1290 },
        ],
      },
    };
    expect(usageFromJson(generate, JSON.stringify(answer)).usage).toEqual({
      inputTokens: 300n,
      cachedInputTokens: 0n,
      outputTokens: 1300n,
      reasoningTokens: undefined,
      audioInputTokens: 258n,
      imageOutputTokens: 1290n,
    });
  });
});

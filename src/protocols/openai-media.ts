/**
 * OpenAI's endpoints beyond text (which azure-openai.ts shares through OPENAI_SHAPE): images (generations, edits,
 * variations), speech, transcriptions and translations, and moderations. Each reads its own request for its
 * bounds (a JSON body, or a multipart upload's fields and files as the gateway read them on their way through), and
 * its answer's usage where the provider reports it; where it reports none, the call's `unreported` charge is its
 * endpoint's documented rule (docs/modalities.md), never less than the provider bills.
 */
import { AppError } from '../errors.js';
import { audioBoundMs } from './audio-duration.js';
import type { EndpointSpec, FormRead, PreparedCall } from './protocol.js';
import { jsonObjectOf } from './request-body.js';
import { sseEvent, type StreamCut, type StreamReader, type StreamState } from './stream.js';
import { big, type Usage, type UsageKinds } from './usage.js';

type Json = Record<string, any>;

const NOT_SENT = Buffer.alloc(0);

/**
 * gpt-image-1's output tokens for a 1024x1024 image at each quality; another size in proportion to its area (what
 * its price table shows: 1024x1536 at high quality is 6,240 tokens). A quality it does not name (`auto`, dall-e's
 * `hd` or `standard`) is taken at `high`, a size it does not name (`auto`) at the largest, 1536x1024.
 */
const IMAGE_OUTPUT_TOKENS_1024 = { low: 272, medium: 1056, high: 4160 } as const;
const LARGEST_AREA = 1536 * 1024;
/** Each partial image a stream asks for costs 100 output tokens more. */
const PARTIAL_IMAGE_TOKENS = 100;
/**
 * Tokens an input image of an edit may cost at most: gpt-4o's high-detail tiling of the largest image it keeps
 * (1,445) and a high input fidelity's own (up to 6,240), rounded up.
 */
const IMAGE_INPUT_TOKEN_BOUND = 8_192;
/** More images per call than any provider makes (OpenAI: n <= 10). */
const MAX_IMAGES = 128;
/**
 * Audio output tokens a character of speech may take, at speed 1 (a slower speed, in proportion): gpt-4o-mini-tts
 * makes about 21 audio tokens a second and speaks about 14 characters a second; a number or a symbol reads as words.
 */
const AUDIO_TOKENS_PER_CHARACTER = 6;
/** Audio input tokens a second of audio may take (OpenAI's transcription models read about 17). */
const AUDIO_TOKENS_PER_SECOND = 20;
/** Text output tokens a second of audio may take (a fast speaker says about 4 words a second). */
const TRANSCRIPT_TOKENS_PER_SECOND = 16;

/** A request's fields as an endpoint reads them: a JSON body's, or a form's (whose values are strings). */
type Fields = Readonly<Record<string, unknown>>;

const invalid = (param: string, message: string) => new AppError('invalid_parameter', message, { param });

/** A whole number field (a form's as text) in [min, max]; `otherwise` when absent. */
function count(fields: Fields, param: string, min: number, max: number, otherwise: number): number {
  const value = fields[param];
  if (value === undefined || value === null || value === '') return otherwise;
  const n = typeof value === 'string' && /^\d{1,6}$/.test(value.trim()) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max)
    throw invalid(param, `${param} must be a whole number from ${min} to ${max}`);
  return n;
}

/** A true-or-false field (a form's as `true` or `false`). */
function flag(fields: Fields, param: string): boolean {
  const value = fields[param];
  if (value === undefined || value === null || value === false || value === 'false') return false;
  if (value === true || value === 'true') return true;
  throw invalid(param, `${param} must be true or false`);
}

/** A text field; `required`: 400 without it. */
function text(fields: Fields, param: string, required = false): string | undefined {
  const value = fields[param];
  if (value === undefined || value === null) {
    if (required) throw invalid(param, `${param} is required`);
    return undefined;
  }
  if (typeof value !== 'string') throw invalid(param, `${param} must be a string`);
  return value;
}

const bytes = (value: string | undefined) => (value ? Buffer.byteLength(value) : 0);
const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b;

/**
 * A call bounded by its tokens and kinds, and charged that bound when its answer reports nothing (the rule of an
 * endpoint whose provider reports no usage: the bound is what it can have made at most).
 */
function boundCall(
  requestedModel: string,
  stream: boolean,
  input: bigint,
  output: bigint,
  kinds: UsageKinds,
  body = NOT_SENT,
): PreparedCall {
  return {
    requestedModel,
    stream,
    body,
    inputBound: input,
    outputBound: output,
    outputCeiling: 0n,
    usageInjected: false,
    previousResponseId: null,
    outputCap: undefined,
    boundKinds: kinds,
    unreported: { inputTokens: input, cachedInputTokens: 0n, outputTokens: output, ...kinds },
  };
}

/** How a model's calls are billed: by the tokens it reports, by the kind of its own (images, characters, seconds), or either (a model Nexus does not know). */
type Billing = 'tokens' | 'kind' | 'both';

function billingOf(model: string, byKind: RegExp, byTokens: RegExp): Billing {
  return byKind.test(model) ? 'kind' : byTokens.test(model) ? 'tokens' : 'both';
}

/** A size's pixels: `auto` (or none) at the largest. */
function areaOf(size: string | undefined): number {
  if (size === undefined || size === 'auto') return LARGEST_AREA;
  const match = /^(\d{2,5})x(\d{2,5})$/.exec(size);
  if (!match) throw invalid('size', 'size must be auto or WIDTHxHEIGHT (1024x1024)');
  return Number(match[1]) * Number(match[2]);
}

/** The most output tokens one image of `quality` and `area` (pixels) takes, with its partial images. */
function imageOutputBound(quality: string | undefined, area: number, partials: number): bigint {
  const named = quality !== undefined && Object.hasOwn(IMAGE_OUTPUT_TOKENS_1024, quality);
  const perMegapixel = named ? IMAGE_OUTPUT_TOKENS_1024[quality as keyof typeof IMAGE_OUTPUT_TOKENS_1024] : IMAGE_OUTPUT_TOKENS_1024.high;
  return BigInt(Math.ceil((perMegapixel * area) / (1024 * 1024)) + partials * PARTIAL_IMAGE_TOKENS);
}

/**
 * An image call's bounds: n images, each at the most its quality and size take (a token-billed model's output
 * tokens; a dall-e model's images of the tier `{quality}/{size}`), its prompt's bytes and each input image at its
 * bound.
 */
function imageCall(fields: Fields, model: string, inputImages: number): PreparedCall {
  const n = count(fields, 'n', 1, MAX_IMAGES, 1);
  const size = text(fields, 'size');
  const area = areaOf(size);
  const quality = text(fields, 'quality');
  if (quality !== undefined && !/^[a-z_-]{1,32}$/i.test(quality))
    throw invalid('quality', 'quality must be a word (low, medium, high, auto, standard, hd)');
  const stream = flag(fields, 'stream');
  const partials = stream ? count(fields, 'partial_images', 0, 3, 0) : 0;
  const prompt = text(fields, 'prompt');
  const billing = billingOf(model, /^dall-e/i, /^gpt-image/i);
  const output = billing === 'kind' ? 0n : BigInt(n) * imageOutputBound(quality, area, partials);
  const imageInput = billing === 'kind' ? 0n : BigInt(inputImages * IMAGE_INPUT_TOKEN_BOUND);
  const input = billing === 'kind' ? 0n : BigInt(bytes(prompt)) + imageInput;
  const kinds: UsageKinds = { imageInputTokens: imageInput, imageOutputTokens: output };
  if (billing !== 'tokens') Object.assign(kinds, { images: BigInt(n), imageTier: `${quality ?? 'standard'}/${size ?? '1024x1024'}` });
  return boundCall(model, stream, input, output, kinds);
}

/** The model a request names: its path's (an Azure deployment), else its own field. */
const modelOf = (fields: Fields, routeModel: string | undefined) => routeModel ?? text(fields, 'model') ?? '';

/** An image generation's JSON request. */
function readImageGeneration(raw: Buffer, routeModel: string | undefined): PreparedCall {
  const body = jsonObjectOf(raw);
  return { ...imageCall(body, modelOf(body, routeModel), 0), body: raw };
}

/** An image edit's JSON request (gpt-image-1's `images` by URL or file id), or a variation's. */
function readImageEdit(raw: Buffer, routeModel: string | undefined): PreparedCall {
  const body = jsonObjectOf(raw);
  const images = Array.isArray(body.images) ? body.images.length : body.image ? 1 : 0;
  return { ...imageCall(body, modelOf(body, routeModel), images + (body.mask ? 1 : 0)), body: raw };
}

/** An image edit or variation uploaded: its images (and mask) each at their bound. */
function formImages(form: FormRead, routeModel: string | undefined): PreparedCall {
  const images = form.files.filter((f) => /^(image|image\[\]|mask)$/.test(f.field)).length;
  if (!images) throw invalid('image', 'image is required: the image to edit, as a file');
  return imageCall(form.fields, modelOf(form.fields, routeModel), images);
}

/**
 * A speech request: its input's characters (tts-1 and tts-1-hd are billed by them), or its text as input tokens
 * (at most its bytes) and its audio output at AUDIO_TOKENS_PER_CHARACTER a character, more at a slower speed.
 */
function readSpeech(raw: Buffer, _caps: unknown, routeModel: string | undefined): PreparedCall {
  const body = jsonObjectOf(raw);
  const model = modelOf(body, routeModel);
  const input = text(body, 'input', true)!;
  const speed = body.speed ?? 1;
  if (typeof speed !== 'number' || !(speed >= 0.25 && speed <= 4)) throw invalid('speed', 'speed must be a number from 0.25 to 4');
  const format = text(body, 'stream_format');
  if (format !== undefined && format !== 'audio' && format !== 'sse') throw invalid('stream_format', 'stream_format must be audio or sse');
  const stream = format === 'sse';
  const characters = BigInt(input.length);
  if (/^tts-1/i.test(model)) return { ...boundCall(model, stream, 0n, 0n, { characters }), body: raw };
  const output = ceilDiv(characters * BigInt(AUDIO_TOKENS_PER_CHARACTER) * 100n, BigInt(Math.floor(Math.min(speed, 1) * 100))) + 1n;
  const inputTokens = BigInt(bytes(input) + bytes(text(body, 'instructions')));
  return { ...boundCall(model, stream, inputTokens, output, { audioOutputTokens: output }), body: raw };
}

/**
 * A transcription or translation uploaded: its audio's duration bound (audio-duration.ts). whisper models are
 * billed by the second; the others by audio input tokens (AUDIO_TOKENS_PER_SECOND, with the prompt's bytes) and text
 * output (TRANSCRIPT_TOKENS_PER_SECOND).
 */
function formTranscription(form: FormRead, routeModel: string | undefined): PreparedCall {
  const file = form.files.find((f) => f.field === 'file');
  if (!file) throw invalid('file', 'file is required: the audio to transcribe, as a file');
  const model = modelOf(form.fields, routeModel);
  const stream = flag(form.fields, 'stream');
  const ms = ceilDiv(audioBoundMs(file), 1000n) * 1000n;
  const billing = billingOf(model, /^whisper/i, /transcribe/i);
  const audio = billing === 'kind' ? 0n : ceilDiv(ms * BigInt(AUDIO_TOKENS_PER_SECOND), 1000n);
  const input = billing === 'kind' ? 0n : audio + BigInt(bytes(text(form.fields, 'prompt')));
  const output = billing === 'kind' ? 0n : ceilDiv(ms * BigInt(TRANSCRIPT_TOKENS_PER_SECOND), 1000n) + 1n;
  const kinds: UsageKinds = { audioInputTokens: audio };
  if (billing !== 'tokens') kinds.audioMs = ms;
  return boundCall(model, stream, input, output, kinds);
}

/** A moderation: free (no bound, no charge), recorded as every metered call is. */
function readModeration(raw: Buffer, _caps: unknown, routeModel: string | undefined): PreparedCall {
  const body = jsonObjectOf(raw);
  if (body.input === undefined) throw invalid('input', 'input is required');
  return { ...boundCall(modelOf(body, routeModel), false, 0n, 0n, {}), body: raw };
}

const multipartOnly = (): PreparedCall => {
  throw new AppError('invalid_request', 'This endpoint takes a multipart/form-data body (the audio as a file)', { param: 'content-type' });
};

/** A number of seconds in milliseconds, rounded up. */
const msOf = (seconds: unknown): bigint | null =>
  typeof seconds === 'number' && Number.isFinite(seconds) && seconds >= 0 ? BigInt(Math.ceil(seconds * 1000)) : null;

/**
 * A media answer's usage object: a transcription's `{ type: 'duration', seconds }`, or tokens (`input_tokens`, their
 * details by modality, `output_tokens`), whose output is all of `output`'s modality (an image's, speech's audio).
 */
function mediaUsage(u: Json | null | undefined, output: 'image' | 'audio' | 'text'): Usage | null {
  if (!u || typeof u !== 'object') return null;
  if (u.type === 'duration') {
    const ms = msOf(u.seconds);
    return ms === null ? null : { inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n, audioMs: ms };
  }
  if (typeof u.input_tokens !== 'number') return null;
  const details = (u.input_tokens_details ?? u.input_token_details) as Json | undefined;
  const outputTokens = big(u.output_tokens);
  const outDetails = u.output_tokens_details as Json | undefined;
  const usage: Usage = {
    inputTokens: big(u.input_tokens),
    cachedInputTokens: big(details?.cached_tokens),
    outputTokens,
    audioInputTokens: typeof details?.audio_tokens === 'number' ? big(details.audio_tokens) : null,
    imageInputTokens: typeof details?.image_tokens === 'number' ? big(details.image_tokens) : null,
  };
  if (output === 'image')
    usage.imageOutputTokens = typeof outDetails?.image_tokens === 'number' ? big(outDetails.image_tokens) : outputTokens;
  if (output === 'audio') usage.audioOutputTokens = outputTokens;
  return usage;
}

/** A media stream: its usage in the event that ends it (`image_generation.completed`, `speech.audio.done`, `transcript.text.done`). */
class MediaStream implements StreamReader {
  /** A transcript's text so far (for the end of a stream cut at its bound), up to a megabyte. */
  private transcript = '';

  constructor(
    private readonly output: 'image' | 'audio' | 'text',
    private readonly ends: RegExp,
  ) {}

  read(event: Json, state: StreamState): void {
    if (typeof event.type !== 'string' || !this.ends.test(event.type)) return;
    const usage = mediaUsage(event.usage, this.output);
    if (!usage) return;
    state.usage = usage;
    state.complete = true;
  }

  /** A transcript's text delta, in bytes (images and audio are output of another kind). */
  text(event: Json): number {
    return this.output === 'text' && event.type === 'transcript.text.delta' && typeof event.delta === 'string' ? bytes(event.delta) : 0;
  }

  otherOutput(event: Json): boolean {
    return typeof event.type === 'string' && /partial_image|audio\.delta/.test(event.type);
  }

  forwarded(event: Json): void {
    if (
      this.output === 'text' &&
      event.type === 'transcript.text.delta' &&
      typeof event.delta === 'string' &&
      this.transcript.length < 1 << 20
    )
      this.transcript += event.delta;
  }

  /** Only a transcript's stream can pass its output bound: it ends with its text so far and the usage charged. */
  ending(_state: StreamState, cut: StreamCut): string {
    if (this.output !== 'text') return '';
    const usage = {
      type: 'tokens',
      input_tokens: cut.inputTokens,
      output_tokens: cut.outputTokens,
      total_tokens: cut.inputTokens + cut.outputTokens,
    };
    return sseEvent('transcript.text.done', { text: this.transcript, usage });
  }
}

/** A whole transcription answer's usage: its usage object, else a verbose_json answer's `duration` (seconds, billed whole). */
function transcriptionUsage(answer: Json): Usage | null {
  const usage = mediaUsage(answer.usage as Json | undefined, 'text');
  if (usage) return usage;
  const ms = msOf(answer.duration);
  return ms === null ? null : { inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n, audioMs: ceilDiv(ms, 1000n) * 1000n };
}

const ZERO: Usage = Object.freeze({ inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n });
const noInput = () => {
  throw new Error('a media endpoint reads its own request');
};

export type OpenAiMediaEndpoint =
  'images' | 'image_edits' | 'image_variations' | 'speech' | 'transcriptions' | 'translations' | 'moderations';

const transcription = (label: string): EndpointSpec => ({
  label,
  operation: 'transcription',
  capFields: [],
  input: noInput,
  read: multipartOnly,
  form: formTranscription,
  stream: () => new MediaStream('text', /^transcript\.text\.done$/),
  usageOfAnswer: transcriptionUsage,
});

/** An images endpoint: JSON, or a multipart form (`form`), its stream ending with an `.completed` event's usage. */
const image = (label: string, operation: string, read: EndpointSpec['read'], form?: EndpointSpec['form']): EndpointSpec => ({
  label,
  operation,
  capFields: [],
  input: noInput,
  read,
  ...(form ? { form } : {}),
  stream: () => new MediaStream('image', /\.completed$/),
  usageOf: (u) => mediaUsage(u, 'image'),
});

/** The media endpoints of OpenAI's shape, by name (openai.ts's OPENAI_SHAPE spreads them). */
export const OPENAI_MEDIA: Record<OpenAiMediaEndpoint, EndpointSpec> = {
  images: image('images/generations', 'image_generation', (raw, _caps, routeModel) => readImageGeneration(raw, routeModel)),
  image_edits: image('images/edits', 'image_edit', (raw, _caps, routeModel) => readImageEdit(raw, routeModel), formImages),
  image_variations: image('images/variations', 'image_variation', (raw, _caps, routeModel) => readImageEdit(raw, routeModel), formImages),
  speech: {
    label: 'audio/speech',
    operation: 'text_to_speech',
    capFields: [],
    input: noInput,
    read: readSpeech,
    stream: () => new MediaStream('audio', /^speech\.audio\.done$/),
    usageOf: (u) => mediaUsage(u, 'audio'),
  },
  transcriptions: transcription('audio/transcriptions'),
  translations: transcription('audio/translations'),
  moderations: {
    label: 'moderations',
    operation: 'moderation',
    capFields: [],
    input: noInput,
    read: readModeration,
    stream: () => new MediaStream('text', /^$/),
    usageOfAnswer: () => ZERO,
  },
};

/** The metered paths of the media endpoints, after `prefix` (a pattern: openai's any, Azure's deployment or v1 path). */
export function openAiMediaPaths(prefix: string): [RegExp, OpenAiMediaEndpoint][] {
  const at = (path: string) => new RegExp(`${prefix}${path}$`, 'i');
  return [
    [at('images\\/generations'), 'images'],
    [at('images\\/edits'), 'image_edits'],
    [at('images\\/variations'), 'image_variations'],
    [at('audio\\/speech'), 'speech'],
    [at('audio\\/transcriptions'), 'transcriptions'],
    [at('audio\\/translations'), 'translations'],
    [at('moderations'), 'moderations'],
  ];
}

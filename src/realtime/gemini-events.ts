/**
 * What a Gemini Live API session's relay reads of its messages (`BidiGenerateContent`, docs/realtime.md): each
 * message is a JSON object whose one key names it (client: `setup`, `clientContent`, `realtimeInput`,
 * `toolResponse`; server: `setupComplete`, `serverContent`, `toolCall`, `toolCallCancellation`, `goAway`,
 * `sessionResumptionUpdate`, with `usageMetadata` beside any of them). Server messages may come as binary frames (the
 * same JSON). Audio (`realtimeInput.audio`, a `serverContent.modelTurn` part's `inlineData`) is passed on as it came:
 * only a frame's first bytes are read to tell what it is, and only the few messages a turn is admitted and settled
 * by are parsed whole:
 *
 *   - client `setup`: its model and its output cap (`generationConfig.maxOutputTokens`);
 *   - client `clientContent` (`turnComplete: true` asks for a turn), and a small `realtimeInput` (`activityEnd`, under
 *     manual activity detection, asks for one);
 *   - a server frame naming `turnComplete` or `usageMetadata` (its turn's end and its usage by modality).
 */
import { AppError } from '../errors.js';
import { big, type Usage } from '../protocols/usage.js';
import { parseEvent } from './realtime-events.js';

/** How many bytes of a frame are decoded to tell what it is. */
export const HEAD_BYTES = 200;
/** A `realtimeInput` frame at most this large is parsed whole (its `activityEnd`); a larger one carries media. */
export const SMALL_FRAME = 512;
/** A WebSocket close frame's reason holds at most 123 bytes. */
const CLOSE_REASON_BYTES = 123;

/** Markers of a server frame to parse whole (JSON keys; base64 media never holds a quote). */
const TURN_COMPLETE = Buffer.from('"turnComplete"');
const USAGE = Buffer.from('"usageMetadata"');

type Json = Record<string, unknown>;

const objectAt = (value: unknown): Json | undefined =>
  value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : undefined;

/**
 * The name of a message: the first key of its JSON object, read in its first bytes, in camelCase (the API takes
 * `client_content` as `clientContent`); '' when none is found there.
 */
export function messageKey(head: string): string {
  const key = /^\s*\{\s*"([A-Za-z_]{1,40})"/.exec(head)?.[1] ?? '';
  return key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** A field of `holder` as the API takes it: camelCase, or its snake_case. */
const field = (holder: Json | undefined, camel: string): unknown =>
  holder?.[camel] ?? holder?.[camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)];

/** Whether a server frame must be parsed whole: it may end a turn or report usage. */
export function endsOrCounts(frame: Buffer): boolean {
  return frame.includes(TURN_COMPLETE) || frame.includes(USAGE);
}

/** A frame parsed as a message (undefined: not a JSON object). */
export function parseMessage(frame: Buffer): Json | undefined {
  return parseEvent(frame.toString('utf8'));
}

/** The model a `setup` names, without its `models/` prefix. */
export function setupModel(setup: Json): string {
  return typeof setup.model === 'string' ? setup.model.replace(/^models\//, '') : '';
}

/** The output cap a `setup` asks of the session's turns (`generationConfig.maxOutputTokens`); undefined: none. */
export function setupCap(setup: Json): number | undefined {
  const cap = field(objectAt(field(setup, 'generationConfig')), 'maxOutputTokens');
  return typeof cap === 'number' && Number.isInteger(cap) && cap > 0 ? cap : undefined;
}

/** The `setup` message to send upstream: its model `model` (a route's map applied) and, if given, its output cap `cap`. */
export function setupMessage(setup: Json, model: string, cap: number | undefined): string {
  const next: Json = { ...setup, model: `models/${model}` };
  if (cap !== undefined) {
    // In the spelling the setup used (snake_case `generation_config.max_output_tokens`, else camelCase).
    const snake = !('generationConfig' in setup) && 'generation_config' in setup;
    const config: Json = { ...objectAt(field(setup, 'generationConfig')) };
    delete config.maxOutputTokens;
    delete config.max_output_tokens;
    config[snake ? 'max_output_tokens' : 'maxOutputTokens'] = cap;
    next[snake ? 'generation_config' : 'generationConfig'] = config;
  }
  return JSON.stringify({ setup: next });
}

/** Whether a client message asks the model for a turn: `clientContent` with `turnComplete: true`, or `realtimeInput.activityEnd`. */
export function asksForTurn(key: string, message: Json | undefined): boolean {
  if (key === 'clientContent') return field(objectAt(field(message, 'clientContent')), 'turnComplete') === true;
  if (key === 'realtimeInput') return field(objectAt(field(message, 'realtimeInput')), 'activityEnd') !== undefined;
  return false;
}

/** Whether a server message carries a turn's output (its model's content, or a tool call), and whether that is audio. */
export function outputOf(key: string, head: string): { output: boolean; audio: boolean } {
  const output = (key === 'serverContent' && head.includes('"modelTurn"')) || key === 'toolCall';
  return { output, audio: output && head.includes('"audio/') };
}

/** The tokens of one modality in a list by modality (`[{ modality: 'AUDIO', tokenCount }]`); 0 when it names none. */
function modality(details: unknown, ...names: string[]): bigint {
  if (!Array.isArray(details)) return 0n;
  let found = 0n;
  for (const entry of details as Json[]) if (names.includes(entry?.modality as string)) found += big(entry.tokenCount);
  return found;
}

/**
 * A message's `usageMetadata`, by kind: all input tokens (`promptTokenCount`, and `toolUsePromptTokenCount`), the
 * cached ones (`cachedContentTokenCount`), all output tokens (`responseTokenCount`, its thinking
 * `thoughtsTokenCount` included), and the audio and image parts (`promptTokensDetails`, `responseTokensDetails` by
 * modality; VIDEO frames are images). The audio and image input counted apart are the uncached ones
 * (`cacheTokensDetails`): cached media is priced with the cached input, as in OpenAI's sessions. null: none reported.
 */
export function liveUsage(message: Json | undefined): Usage | null {
  const u = objectAt(message?.usageMetadata);
  if (!u || typeof u.promptTokenCount !== 'number') return null;
  const inputTokens = big(u.promptTokenCount) + big(u.toolUsePromptTokenCount);
  const cached = big(u.cachedContentTokenCount);
  const response = u.responseTokenCount ?? u.candidatesTokenCount;
  const uncached = (all: bigint, inCache: bigint) => (all > inCache ? all - inCache : 0n);
  const responseDetails = u.responseTokensDetails ?? u.candidatesTokensDetails;
  return {
    inputTokens,
    cachedInputTokens: cached > inputTokens ? inputTokens : cached,
    outputTokens: big(response) + big(u.thoughtsTokenCount),
    reasoningTokens: typeof u.thoughtsTokenCount === 'number' ? big(u.thoughtsTokenCount) : null,
    audioInputTokens: uncached(modality(u.promptTokensDetails, 'AUDIO'), modality(u.cacheTokensDetails, 'AUDIO')),
    imageInputTokens: uncached(modality(u.promptTokensDetails, 'IMAGE', 'VIDEO'), modality(u.cacheTokensDetails, 'IMAGE', 'VIDEO')),
    audioOutputTokens: modality(responseDetails, 'AUDIO'),
    imageOutputTokens: modality(responseDetails, 'IMAGE'),
  };
}

/** Whether a server message ends its turn (`serverContent.turnComplete`). */
export function turnComplete(message: Json | undefined): boolean {
  return objectAt(message?.serverContent)?.turnComplete === true;
}

/** Whether a server message carries its turn's output beyond usage (so a usage after a turn's end is not its). */
export function carriesContent(message: Json | undefined): boolean {
  const content = objectAt(message?.serverContent);
  return Boolean(content?.modelTurn ?? message?.toolCall);
}

/**
 * The close reason of a session a refusal ends: its code, then its message, cut to a close frame's 123 bytes (on a
 * character's boundary). Gemini's Live API has no error message that leaves a session open: the close says why.
 */
export function refusalReason(err: AppError): string {
  const full = Buffer.from(`${err.code}: ${err.message}`);
  if (full.length <= CLOSE_REASON_BYTES) return full.toString('utf8');
  let end = CLOSE_REASON_BYTES;
  while (end > 0 && (full[end]! & 0xc0) === 0x80) end--;
  return full.subarray(0, end).toString('utf8');
}

/** The refusal of a session whose first message is not its `setup`. */
export const setupFirst = (): AppError => new AppError('invalid_request', 'The first message of a Live session must be its setup');

/** A message's part named `key`, if it is an object. */
export const partOf = (message: Json | undefined, key: string): Json | undefined => objectAt(message?.[key]);

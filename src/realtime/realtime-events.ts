/**
 * What a Realtime session's relay reads of its events (OpenAI's Realtime API, GA and beta shapes alike): only the
 * type of each text frame, found in its first bytes without parsing it, and, parsed whole, the few events a turn is
 * admitted and settled by. Audio deltas and appends are passed on as they came, never parsed.
 *
 *   - client `response.create`: its output cap (`response.max_output_tokens`, beta `max_response_output_tokens`);
 *   - server `session.created` / `session.updated`: the session's output cap (`session.max_output_tokens`, beta
 *     `max_response_output_tokens`);
 *   - server `response.created`: its response's id (a turn begins upstream);
 *   - server `response.done`: its status and `usage`, the turn's exact count by kind;
 *   - server `error`: passed on, and logged.
 */
import { errorBody, type AppError } from '../errors.js';
import type { Usage } from '../protocols/usage.js';
import { big } from '../protocols/usage.js';

/** The server events a relay parses; every other one it only passes on. */
export const PARSED_SERVER_EVENTS = new Set(['session.created', 'session.updated', 'response.created', 'response.done', 'error']);

/** How far into a frame its `"type"` is looked for before the frame is parsed to find it. */
const TYPE_WINDOW = 160;

/**
 * The `type` of an event frame: read where it usually is (its first key), else from the frame parsed; '' when the
 * frame is not a JSON object with a string type.
 */
export function eventType(text: string): string {
  const at = text.indexOf('"type"');
  if (at >= 0 && at < TYPE_WINDOW) {
    const match = /^"type"\s*:\s*"([^"\\]{1,100})"/.exec(text.slice(at, at + 120));
    if (match) return match[1]!;
  }
  const parsed = parseEvent(text);
  return typeof parsed?.type === 'string' ? parsed.type : '';
}

/** An event frame parsed; undefined when it is not a JSON object. */
export function parseEvent(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

const objectAt = (value: unknown): Record<string, unknown> | undefined =>
  value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

/**
 * An output cap as an event states it: a positive integer; 'inf' (or absent: undefined) means the model's own maximum,
 * which the plan's maxOutputTokens stands for.
 */
function capOf(holder: Record<string, unknown> | undefined): number | 'inf' | undefined {
  if (!holder) return undefined;
  const value = holder.max_output_tokens ?? holder.max_response_output_tokens;
  if (value === 'inf') return 'inf';
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : undefined;
}

/** The output cap a `session.created`/`session.updated` event states for the session's turns. */
export function sessionCap(event: Record<string, unknown>): number | 'inf' | undefined {
  return capOf(objectAt(event.session));
}

/** The output cap a client's `response.create` asks of its turn. */
export function responseCap(event: Record<string, unknown>): number | 'inf' | undefined {
  return capOf(objectAt(event.response));
}

/** The response a `response.created` or `response.done` event is about: its id and status. */
export function responseOf(event: Record<string, unknown>): { id: string | null; status: string | null } {
  const response = objectAt(event.response);
  return {
    id: typeof response?.id === 'string' ? response.id : null,
    status: typeof response?.status === 'string' ? response.status : null,
  };
}

/**
 * A `response.done`'s usage, by kind: all input tokens (cached ones included), the cached ones, all output tokens,
 * and the audio parts. The audio input counted apart is the uncached one: cached audio is priced with the cached
 * input, as cached text is (quota-math.ts computes text input as the uncached input less its audio part). null:
 * the event reports no usage.
 */
export function usageOf(event: Record<string, unknown>): Usage | null {
  const usage = objectAt(objectAt(event.response)?.usage);
  if (!usage || typeof usage.input_tokens !== 'number' || typeof usage.output_tokens !== 'number') return null;
  const input = objectAt(usage.input_token_details);
  const output = objectAt(usage.output_token_details);
  const cachedDetails = objectAt(input?.cached_tokens_details);
  const inputTokens = big(usage.input_tokens);
  const cachedInputTokens = big(input?.cached_tokens);
  const audioIn = big(input?.audio_tokens);
  const cachedAudio = big(cachedDetails?.audio_tokens);
  return {
    inputTokens,
    cachedInputTokens: cachedInputTokens > inputTokens ? inputTokens : cachedInputTokens,
    outputTokens: big(usage.output_tokens),
    audioInputTokens: audioIn > cachedAudio ? audioIn - cachedAudio : 0n,
    audioOutputTokens: big(output?.audio_tokens),
  };
}

/** A server event's frame that carries a turn's output (a delta of text, audio or its transcript). */
export function carriesOutput(type: string): boolean {
  return type.startsWith('response.') && type.endsWith('.delta');
}

/**
 * `event` (a client's `response.create` or `session.update`) with its output cap (in `holder`: its `response` or
 * `session`) set to `cap`, in the field it already names, else in the field of its protocol's version (`beta`:
 * `max_response_output_tokens`; GA: `max_output_tokens`), as the frame to send upstream.
 */
export function withCap(event: Record<string, unknown>, holder: 'response' | 'session', cap: number, beta: boolean): string {
  const inner = { ...objectAt(event[holder]) };
  const field =
    'max_response_output_tokens' in inner
      ? 'max_response_output_tokens'
      : 'max_output_tokens' in inner
        ? 'max_output_tokens'
        : beta
          ? 'max_response_output_tokens'
          : 'max_output_tokens';
  inner[field] = cap;
  return JSON.stringify({ ...event, [holder]: inner });
}

/** A server event's frame that carries a turn's audio (GA `response.output_audio.delta`, beta `response.audio.delta`). */
export function carriesAudio(type: string): boolean {
  return type.endsWith('audio.delta');
}

/** A Realtime `error` event, as the gateway tells its client why it refuses a turn or ends a session. */
export function errorEvent(code: string, message: string, eventId?: string): string {
  return JSON.stringify({
    type: 'error',
    event_id: `event_nexus_${Date.now().toString(36)}`,
    error: { type: 'invalid_request_error', code, message, param: null, event_id: eventId ?? null },
  });
}

/**
 * A Realtime `error` event refusing a client's event (`eventId`: its `event_id`), its `error` as Nexus's HTTP answers
 * shape it (`type`, `code`, `message`, `param`: `rate_limit_error` / `rate_limited` / `tokensPerMinute` for a turn
 * the plan's tokens per minute cannot hold), with `retry_after` (seconds) where the refusal knows it.
 */
export function refusalEvent(err: AppError, eventId?: string): string {
  const { error } = errorBody(err, undefined);
  const retry = err.extras.retry_after;
  return JSON.stringify({
    type: 'error',
    event_id: `event_nexus_${Date.now().toString(36)}`,
    error: { ...error, event_id: eventId ?? null, ...(retry !== undefined ? { retry_after: retry } : {}) },
  });
}

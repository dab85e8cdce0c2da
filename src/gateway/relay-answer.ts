/**
 * What a relay (relay.ts) is asked to do, and what it reads of the answer on the way: the usage a metered
 * answer reports (a stream's through its meter, a JSON answer's whole at its end), the model and response id,
 * the start of an error answer's body for its message, and how the call ended. `AnswerRead` holds that state;
 * `Relay` extends it with the relaying itself (undici's dispatch callbacks, backpressure, the cut, failover).
 */
import type { Dispatcher } from 'undici';
import type { RelaySaw } from './charge.js';
import { usageFromJson, type Inspector, type PreparedCall, type Usage } from '../protocols/inspectors.js';
import { SecretMask, type MaskedKey } from './secret-mask.js';
import type { StreamMeter } from './stream-meter.js';
import type { AnswerCapture } from '../records/request-log.js';
import type { Sendable } from './upload.js';

/** A JSON answer larger than this is passed through but not read for usage (charged at the call's bound). */
const MAX_JSON_USAGE_BYTES = 32 * 1024 * 1024;
/** An error answer's body is read this far for its message. */
const MAX_ERROR_BYTES = 4096;

/** The message an error body carries: `error.message`, `message`, `error` or `detail` of a JSON body, else its text. */
function messageOfErrorBody(text: string): string | null {
  const trimmed = text.trim();
  if (!trimmed) return null;
  try {
    const body = JSON.parse(trimmed) as unknown;
    const found = messageIn(Array.isArray(body) ? body[0] : body);
    if (found) return found;
  } catch {
    // Not JSON (or cut short): its text as it came.
  }
  return trimmed;
}

function messageIn(body: unknown): string | null {
  if (!body || typeof body !== 'object') return null;
  const b = body as Record<string, unknown>;
  const error = b.error;
  if (error && typeof error === 'object' && typeof (error as Record<string, unknown>).message === 'string')
    return (error as Record<string, unknown>).message as string;
  for (const field of ['message', 'error', 'detail']) if (typeof b[field] === 'string' && b[field]) return b[field];
  return null;
}

export const now = () => process.hrtime.bigint();

interface RelayRequest {
  method: string;
  path: string;
  /** Name, value, name, value... as undici takes them. */
  headers: string[];
  /** A JSON body's bytes, or an upload sent as a stream (upload.ts). */
  body: Sendable;
  timeoutMs: number;
}

export interface RelayOptions {
  /** The gateway's request id: the answer's x-request-id too, unless the provider sent its own. */
  requestId: string;
  /** Where and what the attempt sends: its origin's pool, and the request. */
  pool: Dispatcher;
  request: RelayRequest;
  /** When the attempt began (the call's clock): its record's attempt_started_at. */
  startedAt: Date;
  /**
   * Headers every answer carries (x-nexus-request-id, metering status, quota): the call's own list, to
   * which the relay adds the answer's headers.
   */
  answerHeaders: string[];
  /** The call's inspector and what it made of the request; none for an unmetered call. */
  inspector: Inspector | undefined;
  prepared: PreparedCall | undefined;
  /** The provider's key as the mask looks for it (null: too short to look for). */
  maskedKey: MaskedKey | null;
  /** The answer's headers that go back to the client: its connection's protocol's (protocol.ts, passedBack). */
  passedBack: ReadonlySet<string>;
  /** Told of a Responses API answer's response id and usage as soon as they are known. */
  watcher?: ResponseWatcher | undefined;
  /**
   * A successful JSON answer is read whole and rewritten by this before it goes out (a model list
   * filtered by the strategy's allow-list); its headers wait for it.
   */
  rewriteJson?: ((text: string) => string) | undefined;
  /**
   * A route's attempt that is not the call's last (docs/routes.md): an answer with one of these statuses, no
   * byte of a stream by the first-token deadline, or an answer that broke before its first byte is not
   * relayed: the attempt ends `failedOver` and the client has received nothing. The answer's headers wait for
   * its first byte.
   */
  failover?: Failover | undefined;
  /** A call that keeps its request log: where the answer is taken (its bytes, or its stream's answer assembled). */
  capture?: AnswerCapture | undefined;
}

export interface Failover {
  retryOn: ReadonlySet<number>;
  /** A stream's first-token deadline, from the request's start (none: no deadline). */
  firstTokenMs: number | undefined;
  /**
   * Whether the call would wait this answer's Retry-After (ms) for its next attempt; false: the answer is the
   * call's, relayed (an attempt on the call's last target that no retry can follow). None: it moves on.
   */
  waitsFor?: ((retryAfterMs: number) => boolean) | undefined;
}

/** Why an attempt that is not the last moved the call on, before any byte reached the client. */
export interface FailedOver {
  /** `upstream_status`, `first_token_timeout` or `upstream_stream_broken`. */
  errorCode: string;
  status: number | undefined;
  /** The answer's Retry-After (or retry-after-ms), in ms. */
  retryAfterMs: number | undefined;
}

/** Retry-After as seconds or an HTTP date; retry-after-ms (OpenAI's, Azure's) first. */
export function retryAfterOf(headers: Record<string, string | string[] | undefined>): number | undefined {
  const ms = Number(headers['retry-after-ms']);
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = headers['retry-after'];
  if (typeof raw !== 'string' || !raw) return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : undefined;
  const at = Date.parse(raw);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

export interface ResponseWatcher {
  /** A Responses API answer's id, with its input and output tokens. */
  responseSeen(responseId: string, tokens: bigint): void;
  /** A metered stream began: its headers came with a success status. */
  streamBegan(): void;
}

/** How an upstream call ended. */
export type RelayEnd =
  /** The whole answer reached the client (or, for a call read to its end, was read). */
  | 'complete'
  /** No answer came: refused, reset, DNS failure, timeout before the headers, or cancelled first. */
  | 'unanswered'
  /** The answer broke off after its headers (reset, malformed, timeout, cancelled). */
  | 'broken';

/** What a relay reads of its answer, and how its call ended. */
export abstract class AnswerRead {
  /** The upstream's status, once its answer began. */
  status: number | undefined;
  end: RelayEnd | undefined;
  /** What stopped the call short: the upstream's error, or the reason it was cancelled. */
  error: Error | undefined;
  /** Why the call was cancelled on our side (the client left, a shutdown), if it was. */
  cancelReason: Error | undefined;
  clientGone = false;
  readonly tStart = now();
  tFirstUpstream: bigint | undefined;
  tFirstClient: bigint | undefined;
  tUpstreamEnd: bigint | undefined;
  usage: Usage | null = null;
  usageComplete = false;
  /** The output a stream that ended short is charged for (its meter's estimate). */
  outputEstimate = 0n;
  /** The stream passed the call's output bound: the client got its end there, and the upstream was aborted. */
  cut = false;
  model: string | null = null;
  responseId: string | null = null;
  /** Why a metered stream could not be read on (an event-stream frame that did not decode), if it could not. */
  malformed: string | undefined;
  /** A route's attempt that moved the call on without a byte to the client (options.failover). */
  failedOver: FailedOver | undefined;
  protected meter: StreamMeter | null = null;
  protected jsonChunks: Buffer[] | null = null;
  private jsonSize = 0;
  /** The start of an error answer's body (a status of 400 or more, not a stream), for its message in the record. */
  protected errorChunks: Buffer[] | null = null;
  private errorSize = 0;

  constructor(protected readonly options: RelayOptions) {}

  /** When the attempt began (the call's clock). */
  get startedAt(): Date {
    return this.options.startedAt;
  }

  /** Whether a metered JSON answer is read for its usage (the first wave learns from its usage). */
  get readsJson(): boolean {
    return this.jsonChunks !== null;
  }

  /** A chunk of a JSON answer read for its usage, or of an error answer read for its message. */
  protected keep(chunk: Buffer): void {
    if (this.jsonChunks && this.jsonSize <= MAX_JSON_USAGE_BYTES) {
      this.jsonChunks.push(chunk);
      this.jsonSize += chunk.length;
    } else if (this.errorChunks && this.errorSize < MAX_ERROR_BYTES) {
      this.errorChunks.push(chunk);
      this.errorSize += chunk.length;
    }
  }

  /** What the stream's meter read. */
  protected read(): void {
    const meter = this.meter;
    if (!meter) return;
    this.usage = meter.usage;
    this.usageComplete = meter.complete;
    this.outputEstimate = meter.outputEstimate;
    this.model = meter.model;
    this.responseId = meter.responseId;
    this.malformed = meter.malformed?.message;
  }

  /**
   * What a metered answer has shown of its usage so far (a stream's meter reads it as it arrives; a JSON
   * answer shows it only at its end).
   */
  usageSoFar(): RelaySaw {
    const meter = this.meter;
    const model = this.model;
    if (meter && !this.end)
      return {
        usage: meter.usage,
        complete: meter.complete,
        outputEstimate: meter.outputEstimate,
        cut: false,
        model,
        upstreamEnded: false,
      };
    return {
      usage: this.usage,
      complete: this.usageComplete,
      outputEstimate: this.outputEstimate,
      cut: this.cut,
      model,
      upstreamEnded: false,
    };
  }

  /**
   * What it saw of its answer once the call ended (`upstreamEnded`: it ended on the upstream's side): a stream's
   * usage as its meter read it; a metered JSON answer's read now from its text, its Responses API id (with its
   * usage) told to the watcher.
   */
  saw(upstreamEnded: boolean): RelaySaw & { responseId: string | null } {
    const { usage, usageComplete: complete, outputEstimate, cut, model, responseId } = this;
    const saw = { usage, complete, outputEstimate, cut, model, responseId, upstreamEnded };
    if (!this.jsonChunks) return saw;
    // An answer that came in one chunk (most) is read from it, not from a copy.
    const chunks = this.jsonChunks;
    const parsed = usageFromJson(this.options.inspector!, (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8'));
    saw.usage = parsed.usage;
    saw.complete = parsed.usage !== null;
    if (parsed.model) saw.model = parsed.model;
    if (parsed.responseId) {
      saw.responseId = parsed.responseId;
      if (parsed.usage) this.options.watcher?.responseSeen(parsed.responseId, parsed.usage.inputTokens + parsed.usage.outputTokens);
    }
    return saw;
  }

  /**
   * The message of an error answer (a status of 400 or more): its JSON error's `message` (the shapes of the
   * OpenAI, Anthropic and Gemini APIs), else the start of its text; the provider's key masked, as the client
   * saw it. Null: no error answer, or an empty one.
   */
  errorMessage(): string | null {
    if (!this.errorChunks?.length) return null;
    const text = Buffer.concat(this.errorChunks).subarray(0, MAX_ERROR_BYTES).toString('utf8');
    const key = this.options.maskedKey;
    return messageOfErrorBody(key ? new SecretMask(key).pushEvents(text) : text);
  }
}

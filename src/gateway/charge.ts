/**
 * How a call that reached its upstream ended, and what it is charged: pure functions of what its relay saw
 * (relay.ts), the bounds it was admitted with (admission.ts) and its prices. The call (metered-call.ts)
 * applies what they decide: its record, the lease's settlement, the bounds learned, the metrics and logs.
 */
import type { AttemptStatus, InvocationStatus } from '../domain/invocations/invocation-types.js';
import type { Pricing } from '../domain/quota/model-pricing.js';
import { chargeUnits } from '../domain/quota/quota-math.js';
import { storableText } from '../domain/storable-text.js';
import type { Consumption } from '../records/call-rows.js';
import type { PreparedCall, Usage } from '../protocols/inspectors.js';
import { kindsOf } from '../protocols/usage.js';
import { MAX_NAME_LENGTH } from '../records/invocation-record.js';
import type { AnswerRead } from './relay-answer.js';

/** What a relay saw of a metered answer (a stream's as its meter read it; a JSON answer's read whole at its end). */
export interface RelaySaw {
  usage: Usage | null;
  /** The upstream's final usage report was read. */
  complete: boolean;
  /** The output a stream that ended short is charged for, before its bound (sse-meter.ts). */
  outputEstimate: bigint;
  /** The stream passed its output bound and was cut there. */
  cut: boolean;
  /** The model the provider reported (null or '': none). */
  model: string | null;
  /** The answer ended on the upstream's side (answered, or its stream broke), not by its client's leaving or a shutdown. */
  upstreamEnded: boolean;
}

/** What a metered call that was answered is charged, and what its answer showed. */
export interface Charge extends Consumption {
  /** The answer passed its output bound: a stream cut there, or an answer that reports more. */
  overBound: boolean;
  /** An answer not cut that reports more output than its bound: the calls after it are admitted at that output. */
  pastBound: boolean;
  /** Its usage was not read whole: charged by the rule for missing usage. */
  usageMissing: boolean;
  /** A malformed answer (a JSON answer without usage, a stream that broke or never reported it): counted. */
  malformed: boolean;
}

/**
 * What a call that was answered is counted for. Exact when the provider reported usage. Otherwise, for an endpoint
 * whose provider may report none, its documented rule (PreparedCall's `unreported`: docs/modalities.md); else
 * (a broken or aborted stream, an answer without readable usage): the input reported so far or else
 * the input bound, and the output reported so far or else one token per event received that carried output
 * (or the output its meter counted, if more: stream-meter.ts), at most the output bound; a JSON answer without usage, and a stream cut at
 * its output bound, are counted at the whole output bound.
 */
function chargeable(saw: RelaySaw, prepared: PreparedCall): Usage {
  const { usage, complete } = saw;
  if (usage && complete) return usage;
  // An endpoint whose answer may report nothing (dall-e's images, binary speech, a text transcription): its rule.
  if (prepared.unreported) return prepared.unreported;
  const inputTokens = usage?.inputTokens ?? prepared.inputBound;
  const cachedInputTokens = usage?.cachedInputTokens ?? 0n;
  // The input reported so far is exact, its cache writes with it; the output is not: its reasoning share is unknown.
  const cacheWriteTokens = usage?.cacheWriteTokens ?? null;
  if (!prepared.stream || saw.cut) return { inputTokens, cachedInputTokens, outputTokens: prepared.outputBound, cacheWriteTokens };
  const seen = saw.outputEstimate;
  const estimate = seen < prepared.outputBound ? seen : prepared.outputBound;
  const reported = usage?.outputTokens ?? 0n;
  return { inputTokens, cachedInputTokens, outputTokens: reported > estimate ? reported : estimate, cacheWriteTokens };
}

/**
 * The charge of a metered call whose upstream answered with a success: its counted usage priced by the rule of
 * the model the request named (a dated alias the provider reports does not change it), and what the answer showed.
 * An upstream that ignored the output cap: a stream was cut at it; an answer that reports more is charged as
 * reported. A stream cut at its bound is counted as over it, not as malformed, nor is one its client or a
 * shutdown ended.
 */
export function charge(saw: RelaySaw, prepared: PreparedCall, pricing: Pricing): Charge {
  const counted = chargeable(saw, prepared);
  const past = saw.complete && saw.usage!.outputTokens > prepared.outputBound;
  // Charged by its endpoint's rule, an answer without usage is what its provider sends, not a malformed one.
  const missing = !saw.complete && !prepared.unreported;
  return {
    units: chargeUnits(counted, pricing),
    inputTokens: counted.inputTokens,
    cachedInputTokens: counted.cachedInputTokens,
    outputTokens: counted.outputTokens,
    cacheWriteTokens: counted.cacheWriteTokens ?? null,
    reasoningTokens: counted.reasoningTokens ?? null,
    ...kindsOf(counted),
    model: storableText(saw.model || prepared.requestedModel, MAX_NAME_LENGTH) || null,
    pricing,
    overBound: saw.cut || past,
    pastBound: past && !saw.cut,
    usageMissing: missing,
    malformed: missing && !saw.cut && saw.upstreamEnded,
  };
}

/** How an upstream call that ended is recorded: the invocation's and the attempt's status, and why it fell short. */
export interface Ending {
  status: InvocationStatus;
  attempt: AttemptStatus;
  errorCode: string | null;
  /** It ended on the upstream's side: answered in full (its client still there), or its stream broke. */
  upstreamEnded: boolean;
}

const ending = (status: InvocationStatus, attempt: AttemptStatus, errorCode: string | null, upstreamEnded = false): Readonly<Ending> =>
  Object.freeze({ status, attempt, errorCode, upstreamEnded });
const ANSWERED = ending('SUCCEEDED', 'SUCCEEDED', null, true);
const UPSTREAM_ERROR = ending('UPSTREAM_ERROR', 'UPSTREAM_ERROR', null);
const ANSWERED_CLIENT_GONE = ending('CLIENT_ABORTED', 'SUCCEEDED', 'client_aborted');
const UPSTREAM_ERROR_CLIENT_GONE = ending('CLIENT_ABORTED', 'UPSTREAM_ERROR', 'client_aborted');
const SHUT_DOWN = ending('FAILED', 'ABORTED', 'server_shutdown');
const CLIENT_LEFT = ending('CLIENT_ABORTED', 'ABORTED', 'client_aborted');
const BROKEN = ending('FAILED', 'FAILED', 'upstream_stream_broken', true);
const TIMED_OUT = ending('FAILED', 'FAILED', 'upstream_timeout');
const UNREACHABLE = ending('FAILED', 'FAILED', 'upstream_unavailable');

/** What a relay shows of how it ended (relay-answer.ts). */
type Ended = Pick<AnswerRead, 'end' | 'status' | 'clientGone' | 'cancelReason' | 'error'>;

/**
 * An upstream answer that did what was asked: a 2xx, or 304 Not Modified. A redirect is not:
 * the gateway follows none and passes no Location on (it would name the upstream's host).
 */
const succeeded = (status: number) => status < 300 || status === 304;

/** Why no answer came: a timeout before the headers or the connection, else an unreachable provider. */
export function unansweredCode(relay: Pick<Ended, 'error'>): 'upstream_timeout' | 'upstream_unavailable' {
  const code = (relay.error as { code?: string } | undefined)?.code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' ? 'upstream_timeout' : 'upstream_unavailable';
}

/** How an upstream call ended; `shutdown`: the reason a shutdown cancels calls with. */
export function endingOf(relay: Ended, shutdown: Error): Readonly<Ending> {
  if (relay.end === 'complete') {
    const ok = succeeded(relay.status!);
    if (relay.clientGone) return ok ? ANSWERED_CLIENT_GONE : UPSTREAM_ERROR_CLIENT_GONE;
    return ok ? ANSWERED : UPSTREAM_ERROR;
  }
  // Stopped on our side, by the shutdown or by its client's leaving.
  if (relay.cancelReason === shutdown) return SHUT_DOWN;
  if (relay.clientGone) return CLIENT_LEFT;
  if (relay.end === 'broken') return BROKEN;
  // No answer: refused, reset, DNS failure, timeout before headers.
  return unansweredCode(relay) === 'upstream_timeout' ? TIMED_OUT : UNREACHABLE;
}

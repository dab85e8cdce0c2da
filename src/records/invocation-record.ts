/**
 * A call's invocation record, made by one pure function from three plain values: what was known when the
 * call opened (CallOpened), what its request was read for (CallRead: the model it names, whether it
 * streams, the lease it was admitted on) and how it ended (CallOutcome). The record of a call that ended
 * and the snapshot of a call under way (what would be recorded were its process to die now: FAILED
 * `gateway_lost`, src/gateway/call-meter.ts) are the same function over two outcomes.
 */
import type { AttemptStatus, InvocationRow, InvocationStatus } from '../domain/invocations/invocation-types.js';
import { storableText } from '../domain/storable-text.js';

/** Model names and response ids are recorded up to this length (opaque bodies: one PostgreSQL refuses would fail the record). */
export const MAX_NAME_LENGTH = 256;
/** An error message is recorded up to this length (an upstream's error body may be long). */
const MAX_MESSAGE_LENGTH = 1000;

/** What the gateway knows of a call once its key and connection are known. */
export interface CallOpened {
  /** The invocation's id. */
  id: string;
  workspaceId: string;
  accessId: string;
  connectionId: string;
  keyId: string;
  /** The plan of the key's access (the one the call runs on). */
  planId?: string | undefined;
  requestId: string;
  /** The W3C trace id of the call (its traceparent's, or its own when traces are on). */
  traceId: string | null;
  method: string;
  /** The provider path, without a trailing slash. */
  endpoint: string;
  startedAt: Date;
  /** Its endpoint has a usage inspector. */
  metered: boolean;
  /** The route it was called through, if any. */
  routeId?: string | undefined;
}

/** What the call's request was read for: by its admission (metered), or for its model (unmetered, free). */
export interface CallRead {
  /** The model the request names ('' when it names none). */
  requestedModel: string;
  streamed: boolean;
  /** The quota lease it was admitted on; null: none (not metered, or refused before). */
  leaseId: string | null;
}

/** A call whose request was not read (refused before its body was). */
export const NOTHING_READ: Readonly<CallRead> = Object.freeze({ requestedModel: '', streamed: false, leaseId: null });

/** Refused or failed before an upstream call was made or ended: no attempt. */
interface CallRefused {
  upstream: false;
  status: InvocationStatus;
  errorCode: string;
  /** What its client was told (the refusal's message). */
  errorMessage: string;
  completedAt: Date;
  totalLatencyMs: number;
}

/** Its upstream call (an attempt) ended, or stands as it would be recorded should the process die now. */
export interface CallAttempted {
  upstream: true;
  status: InvocationStatus;
  /** Why it fell short, for the invocation and its attempt alike. */
  errorCode: string | null;
  /** Why it fell short, in words: the upstream's error message, or the gateway's refusal; null: none. */
  errorMessage?: string | null | undefined;
  /** The units it is charged (0: none). */
  quotaUnits: bigint;
  completedAt: Date;
  totalLatencyMs: number;
  /** A Responses API answer's id. */
  upstreamResponseId: string | null;
  attemptId: string;
  attemptStatus: AttemptStatus;
  /** The model the provider reported ('' or null: the requested one is recorded). */
  upstreamModel: string | null;
  httpStatus: number | null;
  attemptStartedAt: Date;
  attemptDurationMs: number;
  /** The provider's part of the latency; null when not known (a call under way). */
  providerLatencyMs: number | null;
  /** A stream's first byte from the provider, after the attempt began; null: none, or not a stream. */
  providerTtftMs: number | null;
  /** A stream's first byte to the client, after the call began; null: none, or not a stream. */
  totalTtftMs: number | null;
}

export type CallOutcome = CallRefused | CallAttempted;

const storable = (text: string) => storableText(text, MAX_NAME_LENGTH);

const later = (from: Date, ms: number) => new Date(from.getTime() + ms);

/**
 * The invocation row (with its attempt's columns) of a call, as it is recorded. One literal for both outcomes: a
 * call refused before the upstream has no attempt, so its attempt and timing columns are null and it is charged 0.
 */
export function invocationRecord(opened: CallOpened, read: CallRead, outcome: CallOutcome): InvocationRow {
  const requestedModel = storable(read.requestedModel);
  const attempt = outcome.upstream ? outcome : null;
  const providerLatencyMs = attempt?.providerLatencyMs ?? null;
  const providerTtftMs = attempt?.providerTtftMs ?? null;
  const totalTtftMs = attempt?.totalTtftMs ?? null;
  return {
    id: opened.id,
    workspace_id: opened.workspaceId,
    workspace_access_id: opened.accessId,
    provider_connection_id: opened.connectionId,
    inference_key_id: opened.keyId,
    request_id: opened.requestId,
    trace_id: opened.traceId,
    method: opened.method,
    endpoint: opened.endpoint,
    requested_model: requestedModel,
    status: outcome.status,
    metering_status: opened.metered ? 'metered' : 'unmetered',
    streamed: read.streamed,
    lease_id: read.leaseId,
    quota_units: attempt ? attempt.quotaUnits : 0n,
    error_code: outcome.errorCode,
    error_message: outcome.errorMessage ? storableText(outcome.errorMessage, MAX_MESSAGE_LENGTH) : null,
    started_at: opened.startedAt,
    first_token_at: totalTtftMs === null ? null : later(opened.startedAt, totalTtftMs),
    completed_at: outcome.completedAt,
    total_latency_ms: outcome.totalLatencyMs,
    provider_latency_ms: providerLatencyMs,
    nexus_latency_ms: providerLatencyMs === null ? null : outcome.totalLatencyMs - providerLatencyMs,
    total_ttft_ms: totalTtftMs,
    provider_ttft_ms: providerTtftMs,
    nexus_ttft_ms: totalTtftMs === null || providerTtftMs === null ? null : totalTtftMs - providerTtftMs,
    upstream_response_id: !attempt ? null : attempt.upstreamResponseId ? storable(attempt.upstreamResponseId) : attempt.upstreamResponseId,
    attempt_id: attempt ? attempt.attemptId : null,
    attempt_upstream_model: !attempt ? null : attempt.upstreamModel ? storable(attempt.upstreamModel) : requestedModel,
    attempt_status: attempt ? attempt.attemptStatus : null,
    attempt_http_status: attempt ? attempt.httpStatus : null,
    attempt_error_code: attempt ? attempt.errorCode : null,
    attempt_started_at: attempt ? attempt.attemptStartedAt : null,
    attempt_first_token_at: !attempt || providerTtftMs === null ? null : later(attempt.attemptStartedAt, providerTtftMs),
    attempt_completed_at: attempt ? attempt.completedAt : null,
    attempt_duration_ms: attempt ? attempt.attemptDurationMs : null,
    route_id: opened.routeId ?? null,
    // A route's attempts before the last are added by the call that made them (src/gateway/metered-call.ts).
    attempts: null,
    plan_id: opened.planId ?? null,
  };
}

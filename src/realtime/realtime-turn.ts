/**
 * A Realtime session's turn: one model response, admitted on the access's quota lease at its bound before it may
 * begin, settled when its `response.done` reports its usage, and recorded as a call of its own: an invocation
 * (method GET, the session's endpoint, `streamed`), its usage event and its settlement on the lease, through the
 * same recorder and statement as every gateway call (src/records/). The turns of one session
 * share its request id (the handshake's `x-nexus-request-id`), which is also the id of the session's own
 * invocation (realtime-record.ts) that each names (`session_id`).
 *
 * While it runs, a turn admitted on the lease is one of the meter's calls under way (call-meter.ts): the snapshot
 * and the heartbeat write what it would be charged were the process to die now (its input bound and one output
 * token per output frame relayed, the rule of a stream that broke off) with its invocation as it would then be
 * recorded (FAILED `gateway_lost`), so whoever reclaims the lease charges it, once.
 */
import type { InvocationStatus, AttemptStatus } from '../domain/invocations/invocation-types.js';
import type { Pricing } from '../domain/quota/model-pricing.js';
import type { RateTicket } from '../domain/rate-limits/rate-allowances.js';
import type { Admission } from '../domain/quota/quota-leases.js';
import { chargeUnits } from '../domain/quota/quota-math.js';
import { storableText } from '../domain/storable-text.js';
import { newId } from '../ids.js';
import { kindsOf, type Usage } from '../protocols/usage.js';
import type { CallMeter, RunningCall } from '../gateway/call-meter.js';
import type { AuthRow } from '../gateway/auth-repo.js';
import { callRows, leaseCallRow, newBeat, type Beat, type Consumption } from '../records/call-rows.js';
import { invocationRecord, MAX_NAME_LENGTH, type CallOpened } from '../records/invocation-record.js';

const msSince = (from: bigint, to: bigint) => Number(to - from) / 1e6;

export class Turn implements RunningCall {
  readonly id = newId();
  readonly startedAt: Date;
  readonly t0 = process.hrtime.bigint();
  /** Its bound on the lease (none: refused, or its admission still under way). */
  admission: Admission | undefined;
  /** Its tokens on the plan's tokens per minute, at its bound (none: the plan sets no such limit, or it was refused). */
  rateTicket: RateTicket | undefined;
  /** Resolves once its admission is decided (a server-VAD turn is admitted while it already runs). */
  admitting: Promise<void> = Promise.resolve();
  responseId: string | null = null;
  /** Frames of its output relayed (text, audio and transcript deltas): what it is charged for should it end without usage. */
  outputEvents = 0n;
  /** When its first output reached the client. */
  tFirstOutput: bigint | undefined;
  /** When its first audio reached the client. */
  tFirstAudio: bigint | undefined;
  settled = false;
  listPrev: RunningCall | null = null;
  listNext: RunningCall | null = null;
  /** What the heartbeat wrote of it (its events' ids, should a reclaim charge it). */
  private beat: Beat | undefined;

  constructor(
    private readonly ctx: TurnContext,
    now: Date,
    /** Begun by the client's `response.create` (false: by the server's voice activity detection). */
    readonly byClient: boolean,
    readonly inputBound: bigint,
    readonly outputBound: bigint,
    readonly pricing: Pricing,
  ) {
    this.startedAt = now;
  }

  /** Admitted on the lease at its bound: from now until it is recorded, the heartbeat writes it. */
  admitted(admission: Admission): void {
    this.admission = admission;
    if (!this.settled) this.ctx.meter.running.add(this);
  }

  get leaseId(): string | undefined {
    return this.admission?.lease.id;
  }

  /** Its lease_calls row: charged as delivered so far, recorded FAILED `gateway_lost`; null: nothing new since the last. */
  heartbeatRow(now: Date): string | null {
    const admission = this.admission;
    if (!admission || this.settled) return null;
    const usage = this.delivered();
    const units = chargeUnits(usage, this.pricing);
    if (units === this.beat?.written) return null;
    const beat = (this.beat ??= newBeat());
    beat.writing = units;
    const lost = turnInvocation(this.ctx, this, {
      end: { status: 'FAILED', attempt: 'ABORTED', errorCode: 'gateway_lost', usage },
      units,
      now,
      attemptId: beat.attempt,
    });
    const counted = { units, ...usage, cacheWriteTokens: null, reasoningTokens: null };
    return leaseCallRow(lost, { id: admission.lease.id, bound: admission.bound }, counted, this.pricing, beat);
  }

  beatWritten(): void {
    if (this.beat) this.beat.written = this.beat.writing;
  }

  /** A shutdown's deadline: its session is closed by the Realtime layer (realtime-gateway.ts shutDown), which charges it. */
  cut(): void {}

  /** A frame of its output is relayed (`audio`: a delta of its audio). */
  output(audio: boolean): void {
    this.outputEvents++;
    const now = process.hrtime.bigint();
    this.tFirstOutput ??= now;
    if (audio) this.tFirstAudio ??= now;
  }

  /** From its start to its first audio, in milliseconds; null: none yet. */
  firstAudioMs(): number | null {
    return this.tFirstAudio === undefined ? null : msSince(this.t0, this.tFirstAudio);
  }

  /**
   * What it is counted for without a `response.done` (its client or upstream went away mid-turn): the
   * conversation's input bound, and one output token per output frame relayed, at most its output bound (the
   * rule of a stream that broke off, charge.ts).
   */
  delivered(): Usage {
    const out = this.outputEvents < this.outputBound ? this.outputEvents : this.outputBound;
    return { inputTokens: this.inputBound, cachedInputTokens: 0n, outputTokens: out };
  }
}

/** How a turn ended, for its record. */
export interface TurnEnd {
  status: InvocationStatus;
  attempt: AttemptStatus;
  errorCode: string | null;
  errorMessage?: string | null;
  /** Its usage as reported (exact), or as delivered (an estimate: see Turn.delivered); null: charged nothing. */
  usage: Usage | null;
}

/** What a session's turns are recorded with. */
export interface TurnContext {
  meter: CallMeter;
  auth: AuthRow;
  /** The session's request id, shared by its turns' records, and its own invocation's id. */
  sessionId: string;
  /** When its handshake came (its own invocation's start). */
  startedAt: Date;
  t0: bigint;
  traceId: string | null;
  endpoint: string;
  model: string;
  /** The route the session was opened through, if any (its connection is then the target that holds it). */
  routeId?: string | undefined;
}

/** What a session's invocations (its own, and each turn's) are opened as: `id`, begun at `startedAt`. */
export function openedOf(ctx: TurnContext, id: string, startedAt: Date): CallOpened {
  const { auth } = ctx;
  return {
    id,
    workspaceId: auth.workspace_id,
    accessId: auth.workspace_access_id,
    connectionId: auth.connection_id!,
    keyId: auth.key_id,
    planId: auth.plan_id,
    requestId: ctx.sessionId,
    traceId: ctx.traceId,
    method: 'GET',
    endpoint: ctx.endpoint,
    startedAt,
    metered: true,
    routeId: ctx.routeId,
  };
}

/** A turn's invocation as it ends (`end`, charged `units`), or would were its process to die now. */
function turnInvocation(ctx: TurnContext, turn: Turn, o: { end: TurnEnd; units: bigint; now: Date; attemptId: string }) {
  const durationMs = msSince(turn.t0, process.hrtime.bigint());
  const ttft = turn.tFirstOutput === undefined ? null : msSince(turn.t0, turn.tFirstOutput);
  const invocation = invocationRecord(
    openedOf(ctx, turn.id, turn.startedAt),
    { requestedModel: ctx.model, streamed: true, leaseId: turn.admission?.lease.id ?? null },
    {
      upstream: true,
      status: o.end.status,
      errorCode: o.end.errorCode,
      errorMessage: o.end.errorMessage ?? null,
      quotaUnits: o.units,
      completedAt: o.now,
      totalLatencyMs: durationMs,
      upstreamResponseId: turn.responseId,
      attemptId: o.attemptId,
      attemptStatus: o.end.attempt,
      upstreamModel: storableText(ctx.model, MAX_NAME_LENGTH),
      httpStatus: 101,
      attemptStartedAt: turn.startedAt,
      attemptDurationMs: durationMs,
      providerLatencyMs: durationMs,
      providerTtftMs: ttft,
      totalTtftMs: ttft,
    },
  );
  invocation.session_id = ctx.sessionId;
  return invocation;
}

/** Settles the turn on its lease and hands its record to the recorder; returns what it was charged (units). */
export function recordTurn(ctx: TurnContext, turn: Turn, end: TurnEnd): bigint {
  if (turn.settled) return 0n;
  turn.settled = true;
  const { meter, auth } = ctx;
  meter.running.delete(turn);
  const now = meter.clock.now();
  const usage = end.usage;
  const units = usage ? chargeUnits(usage, turn.pricing) : null;
  const admission = turn.admission;
  const take = admission ? meter.leases.settle(admission, units) : 0n;
  const model = storableText(ctx.model, MAX_NAME_LENGTH);
  const consumed: Consumption | null =
    usage && units !== null && admission
      ? {
          units,
          inputTokens: usage.inputTokens,
          cachedInputTokens: usage.cachedInputTokens,
          outputTokens: usage.outputTokens,
          cacheWriteTokens: null,
          reasoningTokens: null,
          ...kindsOf(usage),
          model: model || null,
          pricing: turn.pricing,
        }
      : null;
  const invocation = turnInvocation(ctx, turn, { end, units: consumed ? consumed.units : 0n, now, attemptId: newId() });
  const rows = callRows({ invocation, lease: admission ? { id: admission.lease.id, bound: admission.bound, take } : undefined, consumed });
  meter.recorder.record(
    {
      ...rows,
      requestId: ctx.sessionId,
      keyId: auth.key_id,
      lastRequestAt: auth.last_request_at,
      admission,
      span: undefined,
    },
    now,
  );
  meter.report?.(invocation, consumed, 101, undefined);
  return consumed ? consumed.units : 0n;
}

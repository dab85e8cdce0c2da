/**
 * A Realtime session's own record: one invocation, written when the session closes, with its turns counted, how it
 * closed, and the latency to its first audio (the column `session`). Its id is the session's request id, which
 * each of its turns' invocations names (`session_id`, realtime-turn.ts). It is charged nothing of its own: its
 * turns carry the usage events and the settlements, and its `quota_units` is their sum, for reading. The rollups
 * count its turns as calls, not it.
 *
 * While it lives, the session holds one unit on its access's quota lease (so the lease stays while it does, and is
 * released once it closes; the unit is given back, never charged) and is one of the meter's calls under way
 * (SessionBeat): the heartbeat writes its record as it would be were the process to die now (FAILED `gateway_lost`,
 * closed 1006, charged nothing), so whoever reclaims the lease writes it, once; a session recorded by its own
 * process is never written again by the reclaim.
 */
import type { AttemptStatus, InvocationStatus, RealtimeSessionRecord } from '../domain/invocations/invocation-types.js';
import type { Pricing } from '../domain/quota/model-pricing.js';
import type { Admission } from '../domain/quota/quota-leases.js';
import { newId } from '../ids.js';
import type { RunningCall } from '../gateway/call-meter.js';
import { callRows, leaseCallRow, newBeat } from '../records/call-rows.js';
import { invocationRecord } from '../records/invocation-record.js';
import { openedOf, type TurnContext } from './realtime-turn.js';

/** Why a session ends, as the session itself knows it. */
export type SessionCause =
  | { kind: 'client'; code: number }
  | { kind: 'upstream' }
  | { kind: 'idle' }
  | { kind: 'shutdown' }
  /** A turn was refused (its refusal's code): the session closed 1008 once no turn was in flight. */
  | { kind: 'refused'; code: string }
  /** Its process died: the record its heartbeat wrote, which the reclaim of its lease writes. */
  | { kind: 'lost' };

/** What a session counted while it lived. */
export interface SessionTotals {
  turns: number;
  units: bigint;
  /** Its first audio's latency from its turn's start (null: no turn answered with audio). */
  firstAudioMs: number | null;
}

interface SessionEnding {
  status: InvocationStatus;
  attempt: AttemptStatus;
  errorCode: string | null;
  record: Pick<RealtimeSessionRecord, 'closeCode' | 'closeReason'>;
}

/** The close code ws answers a frame past the maximum with. */
const MESSAGE_TOO_BIG = 1009;

/** How a session's end is recorded: its status, and the close code and reason its record keeps. */
function sessionEnding(cause: SessionCause): SessionEnding {
  switch (cause.kind) {
    case 'client': {
      const tooBig = cause.code === MESSAGE_TOO_BIG;
      const closeReason = tooBig ? 'frame_too_large' : 'client_closed';
      return {
        status: 'SUCCEEDED',
        attempt: 'SUCCEEDED',
        errorCode: tooBig ? closeReason : null,
        record: { closeCode: cause.code, closeReason },
      };
    }
    case 'upstream':
      return {
        status: 'UPSTREAM_ERROR',
        attempt: 'UPSTREAM_ERROR',
        errorCode: 'upstream_stream_broken',
        record: { closeCode: 1011, closeReason: 'upstream_closed' },
      };
    case 'idle':
      return {
        status: 'SUCCEEDED',
        attempt: 'SUCCEEDED',
        errorCode: 'session_idle_timeout',
        record: { closeCode: 1000, closeReason: 'session_idle_timeout' },
      };
    case 'shutdown':
      return {
        status: 'FAILED',
        attempt: 'FAILED',
        errorCode: 'server_shutdown',
        record: { closeCode: 1001, closeReason: 'server_shutdown' },
      };
    case 'refused':
      return { status: 'SUCCEEDED', attempt: 'SUCCEEDED', errorCode: cause.code, record: { closeCode: 1008, closeReason: cause.code } };
    case 'lost':
      // The client's socket ended without a close frame (1006) when the process died.
      return { status: 'FAILED', attempt: 'FAILED', errorCode: 'gateway_lost', record: { closeCode: 1006, closeReason: 'gateway_lost' } };
  }
}

/** The session's invocation as it ends (`cause`) at `now`, with what it `totals`. */
function sessionInvocation(ctx: TurnContext, cause: SessionCause, totals: SessionTotals, now: Date, attemptId: string) {
  const ending = sessionEnding(cause);
  const durationMs = Number(process.hrtime.bigint() - ctx.t0) / 1e6;
  const invocation = invocationRecord(
    openedOf(ctx, ctx.sessionId, ctx.startedAt),
    { requestedModel: ctx.model, streamed: true, leaseId: null },
    {
      upstream: true,
      status: ending.status,
      errorCode: ending.errorCode,
      quotaUnits: totals.units,
      completedAt: now,
      totalLatencyMs: durationMs,
      upstreamResponseId: null,
      attemptId,
      attemptStatus: ending.attempt,
      upstreamModel: ctx.model,
      httpStatus: 101,
      attemptStartedAt: ctx.startedAt,
      attemptDurationMs: durationMs,
      providerLatencyMs: null,
      providerTtftMs: null,
      totalTtftMs: null,
    },
  );
  invocation.session = { turns: totals.turns, ...ending.record, firstAudioMs: totals.firstAudioMs };
  return { invocation, ending };
}

/**
 * Hands the session's invocation to the recorder, and logs its close. Its heartbeat's row (`beat`) leaves the
 * calls under way, its unit goes back to its lease (charged nothing), and the lease may go once the record is written.
 */
export function recordSession(ctx: TurnContext, cause: SessionCause, totals: SessionTotals, beat: SessionBeat | undefined): void {
  const { meter, auth } = ctx;
  const now = meter.clock.now();
  const admission = beat?.end();
  const { invocation, ending } = sessionInvocation(ctx, cause, totals, now, newId());
  const rows = callRows({ invocation, lease: undefined, consumed: null });
  meter.recorder.record(
    { ...rows, requestId: ctx.sessionId, keyId: auth.key_id, lastRequestAt: auth.last_request_at, admission, span: undefined },
    now,
  );
  meter.logger.info({
    msg: 'realtime session closed',
    requestId: ctx.sessionId,
    turns: totals.turns,
    closeCode: ending.record.closeCode,
    closeReason: ending.record.closeReason,
    units: totals.units.toString(),
  });
}

/** What the heartbeat writes of a session while it lives: its record should the process die now (see above). */
export class SessionBeat implements RunningCall {
  listPrev: RunningCall | null = null;
  listNext: RunningCall | null = null;
  private readonly beat = newBeat();
  /** Its turns and units as last written, and as being written. */
  private written = '';
  private writing = '';
  private ended = false;

  constructor(
    private readonly ctx: TurnContext,
    private readonly totals: SessionTotals,
    private readonly admission: Admission,
    private readonly pricing: Pricing,
  ) {
    ctx.meter.running.add(this);
  }

  get leaseId(): string {
    return this.admission.lease.id;
  }

  heartbeatRow(now: Date): string | null {
    const state = `${this.totals.turns}:${this.totals.units}`;
    if (this.ended || state === this.written) return null;
    this.writing = state;
    const { invocation } = sessionInvocation(this.ctx, { kind: 'lost' }, this.totals, now, this.beat.attempt);
    const none = { units: 0n, inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n, cacheWriteTokens: null, reasoningTokens: null };
    return leaseCallRow(invocation, { id: this.admission.lease.id, bound: this.admission.bound }, none, this.pricing, this.beat);
  }

  beatWritten(): void {
    this.written = this.writing;
  }

  /** Its session is closed by the Realtime layer at a shutdown's deadline (realtime-gateway.ts shutDown). */
  cut(): void {}

  /** The session ends: no longer written, its unit given back; returns its admission, for the recorder to mark written. */
  end(): Admission {
    this.ended = true;
    this.ctx.meter.running.delete(this);
    this.ctx.meter.leases.settle(this.admission, null);
    return this.admission;
  }

  /** The session ended before its lease was held: its unit goes back now, nothing recorded on it. */
  release(): void {
    this.ctx.meter.leases.written(this.end());
  }
}

/**
 * The session's unit on its access's lease (none: the access has no period, or its quota has no unit left: then its
 * record is written only by its own process), and its heartbeat's row made one of the calls under way.
 */
export async function holdSession(ctx: TurnContext, totals: SessionTotals): Promise<SessionBeat | undefined> {
  const { auth, meter } = ctx;
  if (!auth.period_id) return undefined;
  const target = { workspaceId: auth.workspace_id, accessId: auth.workspace_access_id, periodId: auth.period_id };
  const held = await meter.leases.admit(target, 1n).catch(() => undefined);
  if (!held?.ok) return undefined;
  return new SessionBeat(ctx, totals, held.admission, meter.modelPolicy(auth).pricingFor(ctx.model));
}

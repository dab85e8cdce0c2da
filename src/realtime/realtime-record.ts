/**
 * A Realtime session's own record: one invocation, written when the session closes, with its turns counted, how it
 * closed, and the latency to its first audio (the column `session`). Its id is the session's request id, which
 * each of its turns' invocations names (`session_id`, realtime-turn.ts). It is charged nothing of its own: its
 * turns carry the usage events and the settlements, and its `quota_units` is their sum, for reading. The rollups
 * count its turns as calls, not it.
 */
import type { AttemptStatus, InvocationStatus, RealtimeSessionRecord } from '../domain/invocations/invocation-types.js';
import { newId } from '../ids.js';
import { callRows } from '../records/call-rows.js';
import { invocationRecord } from '../records/invocation-record.js';
import { openedOf, type TurnContext } from './realtime-turn.js';

/** Why a session ends, as the session itself knows it. */
export type SessionCause =
  | { kind: 'client'; code: number }
  | { kind: 'upstream' }
  | { kind: 'idle' }
  | { kind: 'shutdown' }
  /** A turn was refused (its refusal's code): the session closed 1008 once no turn was in flight. */
  | { kind: 'refused'; code: string };

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
  }
}

/** Hands the session's invocation to the recorder, and logs its close. */
export function recordSession(ctx: TurnContext, cause: SessionCause, totals: SessionTotals): void {
  const { meter, auth } = ctx;
  const now = meter.clock.now();
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
      attemptId: newId(),
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
  const rows = callRows({ invocation, lease: undefined, consumed: null });
  meter.recorder.record(
    { ...rows, requestId: ctx.sessionId, keyId: auth.key_id, lastRequestAt: auth.last_request_at, admission: undefined, span: undefined },
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

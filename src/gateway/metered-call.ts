/**
 * One gateway call, from the moment its key and connection are known to its record: its lifecycle (opened,
 * its upstream call under way, recorded) and its record. What the process keeps across calls (the leases, the
 * rate allowances, the recorder, the snapshot and heartbeat timers) is the meter's (call-meter.ts): a call asks
 * it and never reaches further.
 *
 * One module drives it, call-flow.ts, which hands it its events:
 *   - its admission (admission.ts) fills what it found and took (`admitted`: its bounds, its price, its lease,
 *     its rate ticket, its place in the first wave, its answer's quota headers), and may read the key's row
 *     again (readAgain: a period found over);
 *   - started(relay): an upstream attempt is sent (a route's call makes one per target tried), and
 *     attemptFailed(): a route's attempt moved on before any byte reached the client;
 *   - answered(): the upstream call ended, however it ended: how it ended and what it is charged are
 *     charge.ts's pure functions of what its relay saw; the call settles its lease, learns, counts, records;
 *   - refused(err): refused or failed before that: recorded REJECTED (or FAILED), nothing charged.
 * A call is recorded once, its invocation made by invocationRecord() (src/records/invocation-record.ts) from what it was
 * opened with, what its request was read for and its outcome. While its upstream answers, the meter's snapshot
 * asks it for its row as it would be recorded were the process to die now (heartbeatRow(): the same function
 * over a `gateway_lost` outcome).
 */
import type { EarlierAttempt } from '../domain/invocations/invocation-types.js';
import { storableText } from '../domain/storable-text.js';
import { AppError, isRefusal, toAppError } from '../errors.js';
import { newId } from '../ids.js';
import { Admitted, authorizeCall } from './admission.js';
import type { CacheEntry } from './auth-cache.js';
import { charge, endingOf, unansweredCode, type Charge, type RelaySaw } from './charge.js';
import type { CallMeter, RunningCall } from './call-meter.js';
import type { AuthRow } from './auth-repo.js';
import { callRows, leaseCallRow, newBeat, type Beat, type Consumption } from '../records/call-rows.js';
import type { CallTrace } from './call-trace.js';
import { modelNamedIn, type Inspector, type PreparedCall } from '../protocols/inspectors.js';
import { invocationRecord, MAX_NAME_LENGTH, type CallAttempted, type CallOpened, type CallOutcome } from '../records/invocation-record.js';
import type { Relay } from './relay.js';
import { CallLog, logPolicyFor } from '../records/request-log.js';
import type { RequestLogPolicy } from '../domain/workspaces/request-log-policy.js';
import type { ResponseWatcher } from './relay-answer.js';

/** What the gateway knows of a call when it opens it. */
export interface CallStart {
  requestId: string;
  method: string;
  /** The provider path, without a trailing slash. */
  endpoint: string;
  /** The W3C trace id of the request's traceparent, if it had a valid one. */
  traceId: string | null;
  startedAt: Date;
  /** process.hrtime.bigint() when the request arrived. */
  t0: bigint;
  /** Its spans, when traces are on. */
  trace: CallTrace | undefined;
  /** The inference key as the request sent it: the key's row is read again with it should admission find its period over. */
  credential: string;
  /** The model a metered call's path names (an Azure deployment: protocol.ts, routeModel), if it names one. */
  routeModel?: string | undefined;
  /** The route it is called through (docs/routes.md), if any. */
  routeId?: string | undefined;
  /** A route's targets: the call is admitted at the largest output bound learned on any of them. */
  boundConnections?: readonly string[] | undefined;
  /** A route's: one of its targets does not enforce the output cap it is sent (the call is admitted as on that one). */
  uncappedTarget?: boolean | undefined;
  /** A route's request log policy, over its plan's and workspace's (src/records/request-log.ts). */
  routeLog?: RequestLogPolicy | null | undefined;
  /** A Realtime session's: its frames are no request and answer, and keep no request log. */
  session?: boolean | undefined;
}

const msSince = (from: bigint, to: bigint) => Number(to - from) / 1e6;

/** Where a call stands: opened, its upstream call under way (in the meter's list of calls under way), recorded. */
const OPEN = 0;
const RUNNING = 1;
const RECORDED = 2;

export class MeteredCall implements ResponseWatcher, RunningCall {
  /** What its admission found and took (admission.ts). */
  readonly admitted = new Admitted();
  /** The upstream attempt under way, or the last one made. */
  relay: Relay | undefined;
  /** A route's attempts before the one under way (docs/routes.md). */
  private earlier: EarlierAttempt[] | undefined;
  private phase = OPEN;
  /** What the heartbeat wrote of it: made at its first heartbeat (its events' ids, should a reclaim charge it). */
  private beat: Beat | undefined;
  listPrev: RunningCall | null = null;
  listNext: RunningCall | null = null;
  /** What it was opened with; a route's call names the target that answers (started()). */
  private opened: CallOpened;
  /** Its request log, when its route, plan or workspace keeps them (src/records/request-log.ts); none: nothing is taken. */
  readonly log: CallLog | undefined;

  constructor(
    private readonly meter: CallMeter,
    /** The key's lookup the call runs on (read again, should its period be found over). */
    private lookup: CacheEntry,
    /** Its row, authorized. */
    private row: AuthRow,
    /** The usage inspector of the endpoint; none: an unmetered call. */
    readonly inspector: Inspector | undefined,
    readonly start: CallStart,
  ) {
    this.opened = {
      id: newId(),
      workspaceId: row.workspace_id,
      accessId: row.workspace_access_id,
      connectionId: row.connection_id!,
      keyId: row.key_id,
      planId: row.plan_id,
      requestId: start.requestId,
      traceId: start.traceId,
      method: start.method,
      endpoint: start.endpoint,
      startedAt: start.startedAt,
      metered: inspector !== undefined,
      routeId: start.routeId,
    };
    const policy = start.session ? undefined : logPolicyFor(start.routeLog, row.plan_request_log, row.workspace_request_log);
    this.log = policy && new CallLog(policy, start.credential);
  }

  /** The key's row the call runs on, authorized (read again if admission found its period over). */
  get auth(): AuthRow {
    return this.row;
  }

  /** The key's lookup the call runs on: its row as found, and its connection's upstream once made. */
  get entry(): CacheEntry {
    return this.lookup;
  }

  /** The connection it is recorded on (a route's: the target that answers). */
  get connectionId(): string {
    return this.opened.connectionId;
  }

  /** The key's row read again (its admission found its period over): the call runs on it from now. */
  readAgain(entry: CacheEntry): void {
    this.lookup = entry;
    this.row = authorizeCall(entry.row, this.opened.startedAt);
  }

  /**
   * The upstream call is sent now: the call is under way until answered(). A route's call starts an attempt
   * per target tried (`connectionId`: the target's connection, which the record names when it answers).
   */
  started(relay: Relay, connectionId?: string): void {
    this.relay = relay;
    if (connectionId && connectionId !== this.opened.connectionId) this.opened = { ...this.opened, connectionId };
    if (this.phase !== OPEN) return;
    this.phase = RUNNING;
    this.meter.running.add(this);
  }

  /**
   * A route's attempt failed before any byte reached the client (docs/routes.md): kept for the record and
   * charged nothing. `model`: the model the target was sent.
   */
  attemptFailed(model: string): EarlierAttempt {
    const relay = this.relay!;
    const startedAt = relay.startedAt;
    const moved = relay.failedOver;
    const durationMs = msSince(relay.tStart, relay.tUpstreamEnd ?? process.hrtime.bigint());
    const earlier = (this.earlier ??= []);
    const attempt: EarlierAttempt = {
      id: newId(),
      sequence: earlier.length + 1,
      providerConnectionId: this.opened.connectionId,
      upstreamModel: storableText(model, MAX_NAME_LENGTH),
      status: relay.status !== undefined && moved?.errorCode === 'upstream_status' ? 'UPSTREAM_ERROR' : 'FAILED',
      startedAt: startedAt.toISOString(),
      completedAt: new Date(startedAt.getTime() + durationMs).toISOString(),
      durationMs,
      ...(relay.status !== undefined ? { httpStatus: relay.status } : {}),
      errorCode: moved ? moved.errorCode : unansweredCode(relay),
    };
    earlier.push(attempt);
    this.start.trace?.attemptFailed(attempt);
    return attempt;
  }

  /**
   * Its row for the heartbeat (lease_calls): what it would be charged were its process to die now, and its
   * invocation as it would then be recorded; null when there is nothing to charge yet (no admission, no
   * answer begun, an answer that is not a success) or nothing new since the last heartbeat.
   */
  heartbeatRow(now: Date): string | null {
    const { lease, prepared, pricing } = this.admitted;
    const relay = this.relay;
    if (!lease || !prepared || !pricing || !relay || relay.status === undefined || relay.status >= 300) return null;
    const counted = charge(relay.usageSoFar(), prepared, pricing);
    const units = counted.units;
    if (units === this.beat?.written) return null;
    const beat = (this.beat ??= newBeat());
    beat.writing = units;
    const started = relay.startedAt;
    const lost = invocationRecord(this.opened, this.admitted, {
      upstream: true,
      status: 'FAILED',
      errorCode: 'gateway_lost',
      quotaUnits: units,
      completedAt: now,
      totalLatencyMs: now.getTime() - this.opened.startedAt.getTime(),
      upstreamResponseId: null,
      attemptId: beat.attempt,
      attemptStatus: 'ABORTED',
      upstreamModel: relay.model,
      httpStatus: relay.status,
      attemptStartedAt: started,
      attemptDurationMs: now.getTime() - started.getTime(),
      providerLatencyMs: null,
      providerTtftMs: null,
      totalTtftMs: null,
    });
    return leaseCallRow(lost, { id: lease.lease.id, bound: lease.bound }, counted, pricing, beat);
  }

  /** A shutdown's deadline has come: its upstream call is cancelled. */
  cut(reason: Error): void {
    this.relay?.cancel(reason);
  }

  /** The heartbeat's row of it is written (its lease was still held). */
  beatWritten(): void {
    if (this.beat) this.beat.written = this.beat.writing;
  }

  /** The lease the call was admitted on, if it was. */
  get leaseId(): string | undefined {
    return this.admitted.lease?.lease.id;
  }

  responseSeen(responseId: string, tokens: bigint): void {
    this.meter.rememberResponse(this.opened.accessId, responseId, tokens);
  }

  streamBegan(): void {
    this.meter.streamBegan();
  }

  /**
   * The upstream call ended, however it ended: the call is charged, settled and recorded. Returns the
   * refusal the client gets when no answer came.
   */
  answered(): AppError | undefined {
    const relay = this.relay!;
    this.meter.running.delete(this);
    const ending = endingOf(relay, this.meter.shutdown);
    const refusal = this.unanswered(relay, ending.errorCode);
    const saw = relay.saw(ending.upstreamEnded);
    const tEnd = process.hrtime.bigint();
    const now = this.meter.clock.now();
    const { lease, prepared } = this.admitted;
    const success = relay.status !== undefined && relay.status < 300;
    const charged = lease && prepared && success ? this.charged(relay, saw, prepared) : null;
    if (this.admitted.firstWave) this.leaveFirstWave(false);
    const providerMs = msSince(relay.tStart, relay.tUpstreamEnd!);
    // A stream's first byte: from the provider (after the attempt began), and to the client (after the call began).
    const providerTtftMs =
      this.admitted.streamed && relay.tFirstUpstream !== undefined ? msSince(relay.tStart, relay.tFirstUpstream) : null;
    const outcome: CallAttempted = {
      upstream: true,
      status: ending.status,
      errorCode: ending.errorCode ?? (charged?.overBound ? 'output_bound_exceeded' : charged?.usageMissing ? 'usage_missing' : null),
      // What the client was told: the gateway's refusal when no answer came, else the upstream's error message.
      errorMessage: refusal ? refusal.message : relay.status !== undefined && relay.status >= 400 ? relay.errorMessage() : null,
      quotaUnits: charged ? charged.units : 0n,
      completedAt: now,
      totalLatencyMs: msSince(this.start.t0, tEnd),
      upstreamResponseId: saw.responseId,
      attemptId: newId(),
      attemptStatus: ending.attempt,
      upstreamModel: saw.model ?? '',
      httpStatus: relay.status ?? null,
      attemptStartedAt: relay.startedAt,
      attemptDurationMs: providerMs,
      providerLatencyMs: providerMs,
      providerTtftMs,
      totalTtftMs: providerTtftMs !== null && relay.tFirstClient !== undefined ? msSince(this.start.t0, relay.tFirstClient) : null,
    };
    const consumed = charged ?? (lease && success && this.admitted.passthroughClass ? this.perCall() : null);
    this.record(outcome, consumed, now, refusal ? refusal.status : relay.clientGone ? 499 : (relay.status ?? 502));
    return refusal;
  }

  /**
   * A passed-through call that was answered, as it is recorded: 0 units, no tokens, and the cost of its price per
   * call where its price sets one (its usage event is written only then: price-sql.ts).
   */
  private perCall(): Consumption {
    const { requestedModel, pricing } = this.admitted;
    return {
      units: 0n,
      inputTokens: 0n,
      cachedInputTokens: 0n,
      outputTokens: 0n,
      model: storableText(requestedModel, MAX_NAME_LENGTH) || null,
      pricing: pricing!,
      perCallOnly: true,
    };
  }

  /** An upstream call that broke or never answered: why, in the log; the refusal its client gets when no answer came. */
  private unanswered(relay: Relay, cause: string | null): AppError | undefined {
    const requestId = this.opened.requestId;
    if (cause === 'upstream_stream_broken') {
      this.meter.logger.warn({ msg: 'upstream stream broke', requestId, error: relay.error?.message });
    } else if (cause === 'upstream_timeout' || cause === 'upstream_unavailable') {
      const code = (relay.error as { code?: string } | undefined)?.code;
      this.meter.logger.warn({ msg: 'no upstream answer', requestId, code, error: relay.error?.message });
      return new AppError(
        cause,
        cause === 'upstream_timeout' ? 'The provider did not answer within the timeout' : 'The provider could not be reached',
      );
    }
    return undefined;
  }

  /**
   * What an answered metered call is charged (charge.ts), and what the answer teaches: an answer past its bound
   * is counted, and one that reported more than its bound has the calls after it on its connection and model
   * admitted at that output; the first wave's place is given up; a malformed answer is counted.
   */
  private charged(relay: Relay, saw: RelaySaw, prepared: PreparedCall): Charge {
    const charged = charge(saw, prepared, this.admitted.pricing!);
    const kind = prepared.stream ? 'stream' : 'json';
    if (charged.overBound) this.meter.overBound?.(kind);
    if (charged.pastBound) {
      const connectionId = this.opened.connectionId;
      const output = this.meter.learned.observed(connectionId, prepared.requestedModel, prepared.stream, saw.usage!.outputTokens);
      if (output !== null) this.meter.shareLearned?.({ connectionId, model: prepared.requestedModel, stream: prepared.stream, output });
    }
    // The first wave's place: the model has its history once a JSON answer's usage is read, or an answer that
    // reports none was charged its endpoint's rule (its bound: it cannot cost more than it was admitted at).
    if (this.admitted.firstWave) this.leaveFirstWave((relay.readsJson && saw.complete) || (!saw.complete && !charged.usageMissing));
    // A stream that could not be read on (an event-stream frame that did not decode): why, in the log.
    if (relay.malformed)
      this.meter.logger.warn({ msg: 'upstream stream malformed', requestId: this.opened.requestId, error: relay.malformed });
    if (charged.malformed) this.meter.usageMissing?.(this.inspector!.protocol.telemetry.system, kind);
    return charged;
  }

  /**
   * Refused or failed before its upstream call ended: recorded REJECTED (FAILED for a failure of ours),
   * charged nothing. A call already recorded is left alone.
   */
  refused(err: unknown): void {
    const admitted = this.admitted;
    if (admitted.firstWave) this.leaveFirstWave(false);
    if (this.phase === RECORDED) return;
    this.meter.running.delete(this);
    const appError = toAppError(err);
    // A metered call refused while its body was read (a bad cap, say) still names its model (its path's, if it names one).
    if (!admitted.requestedModel && (admitted.raw || this.start.routeModel))
      admitted.requestedModel = this.start.routeModel ?? modelNamedIn(admitted.raw!);
    const now = this.meter.clock.now();
    const outcome = {
      upstream: false,
      status: isRefusal(appError) ? 'REJECTED' : 'FAILED',
      errorCode: appError.code,
      errorMessage: appError.message,
      completedAt: now,
      totalLatencyMs: msSince(this.start.t0, process.hrtime.bigint()),
    } as const;
    // The cause of a 500 goes to the log line (never to the client).
    this.record(outcome, null, now, appError.status, appError.status >= 500 && !(err instanceof AppError) ? err : undefined);
  }

  /**
   * Its request log goes to the recorder, which makes its entry when it writes it (or drops it under pressure). An
   * upload's: once its summary is read from its spool (its files' checksums), after the call.
   */
  private handLog(log: CallLog): void {
    const { id, workspaceId, startedAt } = this.opened;
    const { raw, upload } = this.admitted;
    if (!upload) return this.meter.recorder.log({ size: log.size(raw), entry: () => log.entry(id, workspaceId, startedAt, raw) });
    void upload
      .summary()
      .then((form) => {
        const summary = Buffer.from(JSON.stringify(form));
        this.meter.recorder.log({ size: log.size(summary), entry: () => log.entry(id, workspaceId, startedAt, summary) });
      })
      .finally(() => upload.release());
  }

  /** Gives its place in the first wave up (`answered`: a JSON answer's usage was read). */
  private leaveFirstWave(answered: boolean): void {
    this.meter.firstWave.leave(this.admitted.firstWave!, answered);
    this.admitted.firstWave = undefined;
  }

  /**
   * Settles the call on its lease and hands its record to the recorder; the lease learns when it is written.
   * `httpStatus`: what its client was answered (499: the client left first), for the report and the trace.
   */
  private record(outcome: CallOutcome, consumed: Consumption | null, now: Date, httpStatus: number, cause?: unknown): void {
    this.phase = RECORDED;
    const { lease, rateTicket, prepared } = this.admitted;
    const take = lease ? this.meter.leases.settle(lease, consumed?.units ?? null) : 0n;
    if (rateTicket) {
      // Input tokens count the cached ones already.
      const tokens = consumed ? consumed.inputTokens + consumed.outputTokens : null;
      this.meter.rates.settle(rateTicket, tokens === null ? null : Number(tokens));
    }
    const invocation = invocationRecord(this.opened, this.admitted, outcome);
    if (this.earlier) invocation.attempts = this.earlier;
    const span = this.start.trace?.ended(invocation, consumed, httpStatus, prepared);
    const rows = callRows({ invocation, lease: lease ? { id: lease.lease.id, bound: lease.bound, take } : undefined, consumed });
    const { row } = this;
    this.meter.recorder.record(
      {
        id: rows.id,
        invocation: rows.invocation,
        leaseCall: rows.leaseCall,
        requestId: invocation.request_id,
        keyId: row.key_id,
        lastRequestAt: row.last_request_at,
        admission: lease,
        span,
      },
      now,
    );
    if (this.log !== undefined && this.log.keeps(invocation.status)) this.handLog(this.log);
    else void this.admitted.upload?.release();
    // Observed once the record is handed over: whatever the report does, the call is recorded.
    this.meter.report?.(invocation, consumed, httpStatus, cause);
  }
}

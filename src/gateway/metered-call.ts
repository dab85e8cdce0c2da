/**
 * One gateway call, from the moment its key and connection are known to its
 * record: the one owner of its quota admission, its charge and its outcome.
 * What the process keeps across calls (the leases, the rate allowances, the
 * recorder, the snapshot and heartbeat timers) is the meter's (call-meter.ts):
 * a call asks it through CallMeter and never reaches further.
 *
 * The gateway (gateway.ts) opens a call and hands it events:
 *   - admit(raw): a metered call's bound (the request read by its inspector,
 *     priced by the quota rule; a JSON call to a model its connection has not
 *     answered on this process yet first waits for a place in its first wave:
 *     first-wave.ts), admitted on this process's lease of the
 *     access's period, or refused 429 before the upstream is called; a period
 *     found over (a plan change split it, or it ended) has the key's row read
 *     again and the call admitted once more. passthrough(raw) for an unmetered
 *     call, free() for a governed but free one;
 *   - started(relay), then answered(): the upstream call ended, however it ended: what the
 *     call is charged (chargeable()), settled on its lease and recorded;
 *   - refused(err): refused or failed before that: recorded REJECTED (or
 *     FAILED), nothing charged.
 * A call is recorded once, its invocation made by invocationRecord()
 * (invocation-record.ts) from what it was opened with, what its request was read
 * for and its outcome. While its upstream answers, the meter's snapshot asks it
 * for its row as it would be recorded were the process to die now
 * (heartbeatRow(): the same function over a `gateway_lost` outcome).
 */
import type { Clock } from '../domain/actor.js';
import type { LearnedOutput } from '../domain/changes/change-feed.js';
import type { AttemptStatus, EarlierAttempt, InvocationStatus } from '../domain/invocations/invocation-types.js';
import type { Admission, QuotaLeases } from '../domain/quota/quota-leases.js';
import type { ModelPolicy, Pricing } from '../domain/quota/model-pricing.js';
import { boundUnits, chargeUnits, MAX_CALL_UNITS } from '../domain/quota/quota-math.js';
import type { RateAllowances, RateTicket } from '../domain/rate-limits/rate-allowances.js';
import { limitsOf } from '../domain/rate-limits/rate-service.js';
import { hasLimits, type RateView } from '../domain/rate-limits/rate-types.js';
import { storableText } from '../domain/storable-text.js';
import { RowJson } from '../db/row-json.js';
import { AppError, isRefusal, toAppError } from '../errors.js';
import { newId } from '../ids.js';
import type { Logger } from '../observability/logger.js';
import { authorizeCall, type CacheEntry } from './auth-cache.js';
import { callRows, invocationJson, type AuthRow, type Consumption } from './call-repo.js';
import type { CallRecorder } from './call-recorder.js';
import type { CallReport } from './call-report.js';
import type { CallTrace } from './call-trace.js';
import type { FirstWave, FirstWaveSlot } from './first-wave.js';
import {
  modelNamedIn,
  prepareCall,
  usageFromJson,
  type FreeEndpoint,
  type Inspector,
  type PreparedCall,
  type Usage,
} from '../protocols/inspectors.js';
import type { Linked } from './intrusive-list.js';
import {
  invocationRecord,
  MAX_NAME_LENGTH,
  NOTHING_READ,
  type CallAttempted,
  type CallOpened,
  type CallOutcome,
  type CallRead,
} from './invocation-record.js';
import type { LearnedBounds } from './learned-bounds.js';
import type { Relay, ResponseWatcher, StreamProgress } from './relay.js';

/** What the answer's quota headers say: what the access has left, and when its period resets. */
export interface QuotaView {
  remaining: bigint;
  reset: Date;
}

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
}

const msSince = (from: bigint, to: bigint) => Number(to - from) / 1e6;

/**
 * An upstream answer that did what was asked: a 2xx, or 304 Not Modified. A redirect is not:
 * the gateway follows none and passes no Location on (it would name the upstream's host).
 */
const succeeded = (status: number) => status < 300 || status === 304;

/** 403 before the upstream is called: the strategy does not allow the model the request names (or it names none). */
function assertModelAllowed(policy: ModelPolicy, model: string): void {
  if (policy.allows(model)) return;
  throw new AppError(
    'model_not_allowed',
    model
      ? `The model '${model}' is not allowed on this plan`
      : 'The request names no model, and this plan allows only the models it lists',
    { param: 'model' },
  );
}

/**
 * What a call that was answered is counted for. Exact when the provider reported usage. Otherwise
 * (a broken or aborted stream, an answer without readable usage): the input reported so far or else
 * the input bound, and the output reported so far or else one token per event received that carried output
 * (or the output its meter counted, if more: stream-meter.ts), at most the output bound; a JSON answer without usage, and a stream cut at
 * its output bound, are counted at the whole output bound.
 */
function chargeable(progress: StreamProgress, prepared: PreparedCall): Usage {
  const { usage, complete } = progress;
  if (usage && complete) return usage;
  const inputTokens = usage?.inputTokens ?? prepared.inputBound;
  const cachedInputTokens = usage?.cachedInputTokens ?? 0n;
  // The input reported so far is exact, its cache writes with it; the output is not: its reasoning share is unknown.
  const cacheWriteTokens = usage?.cacheWriteTokens ?? null;
  if (!prepared.stream || progress.cut) return { inputTokens, cachedInputTokens, outputTokens: prepared.outputBound, cacheWriteTokens };
  const seen = progress.outputEstimate;
  const estimate = seen < prepared.outputBound ? seen : prepared.outputBound;
  const reported = usage?.outputTokens ?? 0n;
  return { inputTokens, cachedInputTokens, outputTokens: reported > estimate ? reported : estimate, cacheWriteTokens };
}

/** Which kind of answer passed its output bound: a stream (cut there, or reporting more at its end), a JSON answer. */
export type OverBound = 'stream' | 'json';

/** How an upstream call that ended is recorded: the invocation's and the attempt's status, and why it fell short. */
interface Ending {
  status: InvocationStatus;
  attempt: AttemptStatus;
  errorCode: string | null;
}

const ending = (status: InvocationStatus, attempt: AttemptStatus, errorCode: string | null): Readonly<Ending> =>
  Object.freeze({ status, attempt, errorCode });
const ANSWERED = ending('SUCCEEDED', 'SUCCEEDED', null);
const UPSTREAM_ERROR = ending('UPSTREAM_ERROR', 'UPSTREAM_ERROR', null);
const ANSWERED_CLIENT_GONE = ending('CLIENT_ABORTED', 'SUCCEEDED', 'client_aborted');
const UPSTREAM_ERROR_CLIENT_GONE = ending('CLIENT_ABORTED', 'UPSTREAM_ERROR', 'client_aborted');
const SHUT_DOWN = ending('FAILED', 'ABORTED', 'server_shutdown');
const CLIENT_LEFT = ending('CLIENT_ABORTED', 'ABORTED', 'client_aborted');
const BROKEN = ending('FAILED', 'FAILED', 'upstream_stream_broken');
const TIMED_OUT = ending('FAILED', 'FAILED', 'upstream_timeout');
const UNREACHABLE = ending('FAILED', 'FAILED', 'upstream_unavailable');

function endingOf(relay: Relay, shutdown: Error): Readonly<Ending> {
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
  const code = (relay.error as { code?: string } | undefined)?.code;
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' ? TIMED_OUT : UNREACHABLE;
}

/**
 * What a call asks of the process's meter (call-meter.ts): the leases and rate allowances it is admitted
 * on, the recorder its record goes to, the list of calls under way, and what the process remembers
 * across calls.
 */
export interface CallMeter {
  leases: Pick<QuotaLeases, 'admit' | 'settle'>;
  rates: Pick<RateAllowances, 'admit' | 'settle'>;
  recorder: Pick<CallRecorder, 'record'>;
  /** Calls under way (sent upstream, not yet answered in full): a call adds itself when started, and leaves when it ends. */
  running: { add(call: MeteredCall): void; delete(call: MeteredCall): void };
  clock: Clock;
  logger: Logger;
  /** Told of each call as it is recorded (metrics, its log line). */
  report: CallReport | undefined;
  /** The reason a shutdown cancels the calls under way with. */
  shutdown: Error;
  /** What upstreams that ignore the output cap were seen to produce: later calls are admitted at it. */
  learned: Pick<LearnedBounds, 'output' | 'observed'>;
  /** The first wave of JSON calls to a connection's model without history, bounded per access (first-wave.ts). */
  firstWave: Pick<FirstWave, 'enter' | 'leave'>;
  /** Tells the other processes of an output bound learned here. */
  shareLearned?: ((learned: LearnedOutput) => void) | undefined;
  /** Told of each answer that passed its output bound (metrics). */
  overBound?: ((kind: OverBound) => void) | undefined;
  /** Told of each answer charged by the rule for missing usage (its protocol's telemetry name; metrics). */
  usageMissing?: ((protocol: string, kind: OverBound) => void) | undefined;
  /** A metered stream began: the calls under way are written soon (the snapshot). */
  streamBegan(): void;
  rememberResponse(accessId: string, responseId: string, tokens: bigint): void;
  conversationTokens(auth: AuthRow, responseId: string): Promise<bigint>;
  /** The model rules and allow-list of the row's strategy version, compiled once per version. */
  modelPolicy(auth: AuthRow): ModelPolicy;
  quotaView(row: AuthRow | null, now: Date): QuotaView | undefined;
  rateView(row: AuthRow | null, now: Date): RateView | undefined;
  /** The key's row read again, bypassing the cache (a period found over). */
  reload(credential: string, connectionId: string): Promise<CacheEntry>;
}

export class MeteredCall implements ResponseWatcher, Linked<MeteredCall> {
  /** The quota headers of the call's answer, once admitted (or refused for quota). */
  view: QuotaView | undefined;
  /** Where its plan's rate limits stand for its answer's headers, once admitted (or refused for a limit). */
  rateView: RateView | undefined;
  private rateTicket: RateTicket | undefined;
  /** What the inspector made of a metered call's request: its bounds, and the body to send. */
  prepared: PreparedCall | undefined;
  /** The upstream call, once sent. */
  relay: Relay | undefined;
  /** What a metered call is priced at: the model rule of the model its request names (never the one the provider reports). */
  private pricing: Pricing | undefined;
  private attemptStartedAt: Date | undefined;
  private admission: Admission | undefined;
  /** Its place in the first wave of its connection's model, while that has no history (first-wave.ts). */
  private firstWaveSlot: FirstWaveSlot | undefined;
  /** What its request was read for (the model, a stream, its lease). */
  private read: CallRead = NOTHING_READ;
  private reloaded = false;
  private recorded = false;
  /** Units the last snapshot or heartbeat written for it charges (-1: none written); the one being written. */
  private beatUnits = -1n;
  private beatingUnits = -1n;
  /** Its events' ids, should a reclaim charge it: made at its first heartbeat. */
  private lostIds: { usage: string; adjustment: string; attempt: string } | undefined;
  listPrev: MeteredCall | null = null;
  listNext: MeteredCall | null = null;
  /** A route's attempts before the one under way (docs/routes.md). */
  private readonly earlier: EarlierAttempt[] = [];
  private running = false;
  private readonly boundConnections: readonly string[] | undefined;
  private readonly uncappedTarget: boolean;
  /** What it was opened with; a route's call names the target that answers (started()). */
  private opened: CallOpened;
  private readonly t0: bigint;
  private readonly trace: CallTrace | undefined;
  private readonly credential: string;
  private readonly routeModel: string | undefined;

  constructor(
    private readonly meter: CallMeter,
    /** The key's lookup the call runs on (read again, should its period be found over). */
    private lookup: CacheEntry,
    /** Its row, authorized. */
    private row: AuthRow,
    /** The usage inspector of the endpoint; none: an unmetered call. */
    readonly inspector: Inspector | undefined,
    start: CallStart,
  ) {
    this.t0 = start.t0;
    this.trace = start.trace;
    this.credential = start.credential;
    this.routeModel = start.routeModel;
    this.boundConnections = start.boundConnections;
    this.uncappedTarget = start.uncappedTarget === true;
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
  }

  /** The key's row the call runs on, authorized (read again if admission found its period over). */
  get auth(): AuthRow {
    return this.row;
  }

  /** The key's lookup the call runs on: its row as found, and its connection's upstream once made. */
  get entry(): CacheEntry {
    return this.lookup;
  }

  /**
   * A metered call: its bound on the access's current period, admitted on this process's lease of it.
   * Throws the refusal (a bad request, or 429 quota_insufficient with the view set). When the key's row
   * named a period that is over (a plan change split it, or it ended), the row is read again, once, and
   * the call admitted on it.
   */
  async admit(raw: Buffer): Promise<void> {
    const auth = this.row;
    const reset = auth.period_end;
    if (!auth.period_id || !reset) throw new AppError('quota_insufficient', 'The access has no current quota period');
    const prepared = prepareCall(
      this.inspector!,
      raw,
      { maxOutputTokens: auth.max_output_tokens!, clamp: auth.output_cap_policy !== 'refuse' },
      this.routeModel,
    );
    this.prepared = prepared;
    const read: CallRead = { requestedModel: prepared.requestedModel, streamed: prepared.stream, leaseId: null };
    this.read = read;
    const policy = this.meter.modelPolicy(auth);
    assertModelAllowed(policy, prepared.requestedModel);
    const pricing = policy.pricingFor(prepared.requestedModel);
    this.pricing = pricing;
    if (prepared.previousResponseId) prepared.inputBound += await this.meter.conversationTokens(auth, prepared.previousResponseId);
    // A JSON call to a model its connection has not answered in this process yet: a few at a time per access,
    // the others waiting for the first answer, which admits them at what it taught (first-wave.ts). Once.
    if (!prepared.stream && !this.reloaded) {
      const slot = this.meter.firstWave.enter(auth.workspace_access_id, auth.connection_id!, prepared.requestedModel);
      this.firstWaveSlot = slot instanceof Promise ? await slot : slot;
    }
    // An upstream seen to answer past its calls' bounds: admitted at what it produced (learned-bounds.ts).
    let learned = this.meter.learned.output(auth.connection_id!, prepared.requestedModel, prepared.stream);
    // A route's call: quota is reserved once, at the largest bound among its targets.
    for (const id of this.boundConnections ?? []) {
      const other = this.meter.learned.output(id, prepared.requestedModel, prepared.stream);
      if (other > learned) learned = other;
    }
    // A connection whose upstream may answer past the cap it is sent: admitted at the most the plan lets a call ask for.
    let output = prepared.outputBound;
    if ((this.uncappedTarget || auth.connection_enforces_output_cap === false) && prepared.outputCeiling > output)
      output = prepared.outputCeiling;
    const bound = boundUnits(prepared.inputBound, learned > output ? learned : output, pricing);
    if (bound > MAX_CALL_UNITS) {
      throw new AppError('quota_insufficient', `This call may need up to ${bound} units, more than a quota period can hold`, {
        reset_at: reset.toISOString(),
      });
    }
    const held = await this.meter.leases.admit(
      { workspaceId: auth.workspace_id, accessId: auth.workspace_access_id, periodId: auth.period_id },
      bound,
    );
    if (!held.ok) {
      if (held.periodOver && !this.reloaded) return this.readAgain(raw);
      this.view = { remaining: held.available, reset };
      throw new AppError('quota_insufficient', `This call may need up to ${bound} units; ${held.available} are available`, {
        reset_at: reset.toISOString(),
      });
    }
    this.admission = held.admission;
    read.leaseId = held.admission.lease.id;
    this.view = { remaining: held.remaining, reset };
    await this.admitRate(prepared.inputBound + prepared.outputBound);
  }

  /** The cached period is over (a plan change split it, or it ended): the key's row is read again, once, and the call admitted on it. */
  private async readAgain(raw: Buffer): Promise<void> {
    this.reloaded = true;
    this.lookup = await this.meter.reload(this.credential, this.opened.connectionId);
    this.row = authorizeCall(this.lookup.row, this.opened.startedAt);
    return this.admit(raw);
  }

  /**
   * The plan's rate limits (none: nothing to do): a request, `tokens` (the call's bound) and a slot, on
   * this process's allowance of the access (rate-allowances.ts). Throws 429 rate_limited with the view set.
   */
  private async admitRate(tokens: bigint): Promise<void> {
    const limits = limitsOf(this.row);
    if (!hasLimits(limits)) return;
    const auth = this.row;
    const counted = tokens > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(tokens);
    const admitted = await this.meter.rates.admit({ workspaceId: auth.workspace_id, accessId: auth.workspace_access_id }, limits, counted);
    this.rateView = admitted.view;
    if (!admitted.ok) {
      const message = admitted.never
        ? `This call may use up to ${counted} tokens, more than the plan's ${limits.tokensPerMinute} tokens per minute`
        : admitted.reason === 'concurrent'
          ? `The plan allows ${limits.concurrentCalls} concurrent calls; retry after ${admitted.retryAfterS} s`
          : `The plan's ${admitted.reason === 'requests' ? 'requests' : 'tokens'} per minute are used up; retry after ${admitted.retryAfterS} s`;
      throw new AppError('rate_limited', message, {
        param: admitted.reason === 'requests' ? 'requestsPerMinute' : admitted.reason === 'tokens' ? 'tokensPerMinute' : 'concurrentCalls',
        retry_after: admitted.never ? undefined : admitted.retryAfterS,
      });
    }
    this.rateTicket = admitted.ticket;
  }

  /**
   * An unmetered call (the workspace allows passthrough): its model as the body names it, the key's quota
   * view; a request and a slot of its plan's rate limits. A JSON body naming a model the strategy does not
   * allow is refused (403) all the same.
   */
  async passthrough(raw: Buffer, now: Date): Promise<void> {
    const model = modelNamedIn(raw);
    this.read = { requestedModel: model, streamed: false, leaseId: null };
    this.view = this.meter.quotaView(this.row, now);
    const policy = this.meter.modelPolicy(this.row);
    if (policy.restricted && model) assertModelAllowed(policy, model);
    await this.admitRate(0n);
  }

  /**
   * A governed but free call (the model list, a model's description, token counting): no quota is taken.
   * A model outside the strategy's allow-list is refused (403); for the list, returns the test its answer
   * is filtered by (none when every model is allowed).
   */
  free(endpoint: FreeEndpoint, raw: Buffer, now: Date): ((model: string) => boolean) | undefined {
    const policy = this.meter.modelPolicy(this.row);
    this.view = this.meter.quotaView(this.row, now);
    // Not counted against the limits, but answered with where they stand, as every answer of the access.
    this.rateView = this.meter.rateView(this.row, now);
    if (endpoint.kind === 'models') return policy.restricted ? (model) => policy.allows(model) : undefined;
    const model = endpoint.model ?? modelNamedIn(raw);
    this.read = { requestedModel: model, streamed: false, leaseId: null };
    if (policy.restricted) assertModelAllowed(policy, model);
    return undefined;
  }

  /**
   * The upstream call is sent now: the call is under way until answered(). A route's call starts an attempt
   * per target tried (`connectionId`: the target's connection, which the record names when it answers).
   */
  started(relay: Relay, at: Date, connectionId?: string): void {
    this.relay = relay;
    this.attemptStartedAt = at;
    if (connectionId && connectionId !== this.opened.connectionId) this.opened = { ...this.opened, connectionId };
    if (this.running) return;
    this.running = true;
    this.meter.running.add(this);
  }

  /**
   * A route's attempt failed before any byte reached the client (docs/routes.md): kept for the record and
   * charged nothing. `model`: the model the target was sent.
   */
  attemptFailed(model: string): EarlierAttempt {
    const relay = this.relay!;
    const startedAt = this.attemptStartedAt!;
    const moved = relay.failedOver;
    const code = (relay.error as { code?: string } | undefined)?.code;
    const errorCode = moved
      ? moved.errorCode
      : code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT'
        ? 'upstream_timeout'
        : 'upstream_unavailable';
    const durationMs = msSince(relay.tStart, relay.tUpstreamEnd ?? process.hrtime.bigint());
    const attempt: EarlierAttempt = {
      id: newId(),
      sequence: this.earlier.length + 1,
      providerConnectionId: this.opened.connectionId,
      upstreamModel: storableText(model, MAX_NAME_LENGTH),
      status: relay.status !== undefined && moved?.errorCode === 'upstream_status' ? 'UPSTREAM_ERROR' : 'FAILED',
      startedAt: startedAt.toISOString(),
      completedAt: new Date(startedAt.getTime() + durationMs).toISOString(),
      durationMs,
      ...(relay.status !== undefined ? { httpStatus: relay.status } : {}),
      errorCode,
    };
    this.earlier.push(attempt);
    this.trace?.attemptFailed(attempt);
    return attempt;
  }

  /** The attempts made so far (a route's: the failed ones, and the one under way). */
  get attempts(): number {
    return this.earlier.length + (this.relay ? 1 : 0);
  }

  /**
   * Its row for the heartbeat (lease_calls): what it would be charged were its process to die now, and its
   * invocation as it would then be recorded; null when there is nothing to charge yet (no admission, no
   * answer begun, an answer that is not a success) or nothing new since the last heartbeat.
   */
  heartbeatRow(now: Date): string | null {
    const { admission, prepared, relay } = this;
    if (!admission || !prepared || !relay || relay.status === undefined || relay.status >= 300) return null;
    const counted = chargeable(relay.usageSoFar(), prepared);
    const pricing = this.pricing!;
    const units = chargeUnits(counted, pricing);
    if (units === this.beatUnits) return null;
    this.beatingUnits = units;
    this.lostIds ??= { usage: newId(), adjustment: newId(), attempt: newId() };
    const started = this.attemptStartedAt!;
    const lost = invocationRecord(this.opened, this.read, {
      upstream: true,
      status: 'FAILED',
      errorCode: 'gateway_lost',
      quotaUnits: units,
      completedAt: now,
      totalLatencyMs: now.getTime() - this.opened.startedAt.getTime(),
      upstreamResponseId: null,
      attemptId: this.lostIds.attempt,
      attemptStatus: 'ABORTED',
      upstreamModel: relay.model,
      httpStatus: relay.status,
      attemptStartedAt: started,
      attemptDurationMs: now.getTime() - started.getTime(),
      providerLatencyMs: null,
      providerTtftMs: null,
      totalTtftMs: null,
    });
    return new RowJson()
      .id('invocation_id', lost.id)
      .id('lease_id', admission.lease.id)
      .big('bound', admission.bound)
      .big('units', units)
      .big('input_tokens', counted.inputTokens)
      .big('cached_tokens', counted.cachedInputTokens)
      .big('output_tokens', counted.outputTokens)
      .big('cache_write_tokens', counted.cacheWriteTokens)
      .big('reasoning_tokens', counted.reasoningTokens)
      .str('model', lost.attempt_upstream_model || null)
      .str('model_rule', pricing.rule)
      .big('input_ppm', pricing.inputMultiplierPpm)
      .big('cached_ppm', pricing.cachedInputMultiplierPpm)
      .big('output_ppm', pricing.outputMultiplierPpm)
      .id('usage_id', this.lostIds.usage)
      .id('adjustment_id', this.lostIds.adjustment)
      .raw('invocation', invocationJson(lost))
      .done();
  }

  /** The heartbeat's row of it is written (its lease was still held). */
  beatWritten(): void {
    this.beatUnits = this.beatingUnits;
  }

  /** The lease the call was admitted on, if it was. */
  get leaseId(): string | undefined {
    return this.admission?.lease.id;
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
    const attemptStartedAt = this.attemptStartedAt!;
    this.meter.running.delete(this);
    const { status, attempt, errorCode: cause } = endingOf(relay, this.meter.shutdown);
    let errorCode = cause;
    let refusal: AppError | undefined;
    if (cause === 'upstream_stream_broken') {
      this.meter.logger.warn({ msg: 'upstream stream broke', requestId: this.opened.requestId, error: relay.error?.message });
    } else if (cause === 'upstream_timeout' || cause === 'upstream_unavailable') {
      const code = (relay.error as { code?: string } | undefined)?.code;
      this.meter.logger.warn({ msg: 'no upstream answer', requestId: this.opened.requestId, code, error: relay.error?.message });
      refusal = new AppError(
        cause,
        cause === 'upstream_timeout' ? 'The provider did not answer within the timeout' : 'The provider could not be reached',
      );
    }

    let usage = relay.usage;
    let usageComplete = relay.usageComplete;
    let upstreamModel = relay.model ?? '';
    let upstreamResponseId = relay.responseId;
    const json = relay.jsonAnswer();
    if (json !== null) {
      const parsed = usageFromJson(this.inspector!, json);
      usage = parsed.usage;
      usageComplete = usage !== null;
      if (parsed.model) upstreamModel = parsed.model;
      if (parsed.responseId) {
        upstreamResponseId = parsed.responseId;
        if (usage) this.responseSeen(parsed.responseId, usage.inputTokens + usage.outputTokens);
      }
    }

    const tEnd = process.hrtime.bigint();
    const now = this.meter.clock.now();
    let consumed: Consumption | null = null;
    const prepared = this.prepared;
    if (this.admission && prepared && relay.status !== undefined && relay.status < 300) {
      const counted = chargeable({ usage, complete: usageComplete, outputEstimate: relay.outputEstimate, cut: relay.cut }, prepared);
      // An upstream that ignored the output cap: a stream was cut at it; an answer that reports more is
      // charged as reported, and the calls after it on its connection and model are admitted at that output.
      const past = usageComplete && usage!.outputTokens > prepared.outputBound;
      if (relay.cut || past) {
        errorCode ??= 'output_bound_exceeded';
        this.meter.overBound?.(prepared.stream ? 'stream' : 'json');
      }
      if (past && !relay.cut) {
        const connectionId = this.opened.connectionId;
        const output = this.meter.learned.observed(connectionId, prepared.requestedModel, prepared.stream, usage!.outputTokens);
        if (output !== null) this.meter.shareLearned?.({ connectionId, model: prepared.requestedModel, stream: prepared.stream, output });
      }
      // The first wave's place: the model has its history once a JSON answer's usage is read.
      if (this.firstWaveSlot) this.leaveFirstWave(json !== null && usageComplete);
      // A stream that could not be read on (an event-stream frame that did not decode): why, in the log.
      if (relay.malformed)
        this.meter.logger.warn({ msg: 'upstream stream malformed', requestId: this.opened.requestId, error: relay.malformed });
      if (!usageComplete && !errorCode) errorCode = 'usage_missing';
      // A malformed answer (a JSON answer without usage, a stream that broke or never reported it, an
      // event-stream frame that did not decode), counted;
      // not a stream cut at its bound (counted as over it), nor one its client or a shutdown ended.
      const malformed = !usageComplete && !relay.cut && (status === 'SUCCEEDED' || cause === 'upstream_stream_broken');
      if (malformed) this.meter.usageMissing?.(this.inspector!.protocol.telemetry.system, prepared.stream ? 'stream' : 'json');
      // Priced by the rule of the model the request named: a dated alias the provider reports does not change it.
      const pricing = this.pricing!;
      consumed = {
        units: chargeUnits(counted, pricing),
        inputTokens: counted.inputTokens,
        cachedInputTokens: counted.cachedInputTokens,
        outputTokens: counted.outputTokens,
        cacheWriteTokens: counted.cacheWriteTokens ?? null,
        reasoningTokens: counted.reasoningTokens ?? null,
        model: storableText(upstreamModel || this.read.requestedModel, MAX_NAME_LENGTH) || null,
        pricing,
      };
    }
    if (this.firstWaveSlot) this.leaveFirstWave(false);
    const providerMs = msSince(relay.tStart, relay.tUpstreamEnd!);
    // A stream's first byte: from the provider (after the attempt began), and to the client (after the call began).
    const providerTtftMs = this.read.streamed && relay.tFirstUpstream !== undefined ? msSince(relay.tStart, relay.tFirstUpstream) : null;
    const outcome: CallAttempted = {
      upstream: true,
      status,
      errorCode,
      // What the client was told: the gateway's refusal when no answer came, else the upstream's error message.
      errorMessage: refusal ? refusal.message : relay.status !== undefined && relay.status >= 400 ? relay.errorMessage() : null,
      quotaUnits: consumed ? consumed.units : 0n,
      completedAt: now,
      totalLatencyMs: msSince(this.t0, tEnd),
      upstreamResponseId,
      attemptId: newId(),
      attemptStatus: attempt,
      upstreamModel,
      httpStatus: relay.status ?? null,
      attemptStartedAt,
      attemptDurationMs: providerMs,
      providerLatencyMs: providerMs,
      providerTtftMs,
      totalTtftMs: providerTtftMs !== null && relay.tFirstClient !== undefined ? msSince(this.t0, relay.tFirstClient) : null,
    };
    this.record(outcome, consumed, now, refusal ? refusal.status : relay.clientGone ? 499 : (relay.status ?? 502));
    return refusal;
  }

  /**
   * Refused or failed before its upstream call ended (`raw`: its body, if it was read): recorded
   * REJECTED (FAILED for a failure of ours), charged nothing. A call already recorded is left alone.
   */
  refused(err: unknown, raw: Buffer | undefined): void {
    if (this.firstWaveSlot) this.leaveFirstWave(false);
    if (this.recorded) return;
    this.meter.running.delete(this);
    const appError = toAppError(err);
    // A metered call refused while its body was read (a bad cap, say) still names its model (its path's, if it names one).
    if (!this.read.requestedModel && (raw || this.routeModel))
      this.read = { requestedModel: this.routeModel ?? modelNamedIn(raw!), streamed: this.read.streamed, leaseId: this.read.leaseId };
    const now = this.meter.clock.now();
    const outcome = {
      upstream: false,
      status: isRefusal(appError) ? 'REJECTED' : 'FAILED',
      errorCode: appError.code,
      errorMessage: appError.message,
      completedAt: now,
      totalLatencyMs: msSince(this.t0, process.hrtime.bigint()),
    } as const;
    // The cause of a 500 goes to the log line (never to the client).
    this.record(outcome, null, now, appError.status, appError.status >= 500 && !(err instanceof AppError) ? err : undefined);
  }

  /** Gives its place in the first wave up (`answered`: a JSON answer's usage was read). */
  private leaveFirstWave(answered: boolean): void {
    this.meter.firstWave.leave(this.firstWaveSlot!, answered);
    this.firstWaveSlot = undefined;
  }

  /**
   * Settles the call on its lease and hands its record to the recorder; the lease learns when it is written.
   * `httpStatus`: what its client was answered (499: the client left first), for the report and the trace.
   */
  private record(outcome: CallOutcome, consumed: Consumption | null, now: Date, httpStatus: number, cause?: unknown): void {
    this.recorded = true;
    const { admission, row } = this;
    const take = admission ? this.meter.leases.settle(admission, consumed?.units ?? null) : 0n;
    if (this.rateTicket) {
      // Input tokens count the cached ones already.
      const tokens = consumed ? consumed.inputTokens + consumed.outputTokens : null;
      this.meter.rates.settle(this.rateTicket, tokens === null ? null : Number(tokens));
    }
    const invocation = invocationRecord(this.opened, this.read, outcome);
    if (this.earlier.length) invocation.attempts = this.earlier;
    const span = this.trace?.ended(invocation, consumed, httpStatus, this.prepared);
    const rows = callRows({
      invocation,
      lease: admission ? { id: admission.lease.id, bound: admission.bound, take } : undefined,
      consumed,
    });
    this.meter.recorder.record(
      {
        id: rows.id,
        invocation: rows.invocation,
        leaseCall: rows.leaseCall,
        requestId: invocation.request_id,
        keyId: row.key_id,
        lastRequestAt: row.last_request_at,
        admission,
        span,
      },
      now,
    );
    // Observed once the record is handed over: whatever the report does, the call is recorded.
    this.meter.report?.(invocation, consumed, httpStatus, cause);
  }
}

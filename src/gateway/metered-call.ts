/**
 * One gateway call, from the moment its key and connection are known to its
 * record: the one owner of its quota admission, its charge and its invocation
 * record, whose fields change only here.
 *
 * The gateway (gateway.ts) opens a call and hands it events:
 *   - admit(raw): a metered call's bound (the request read by its inspector,
 *     priced by the quota rule), admitted on this process's lease of the
 *     access's period, or refused 429 before the upstream is called;
 *     passthrough(raw) for an unmetered one;
 *   - started(relay), then answered(): the upstream call ended, however it ended: what the
 *     call is charged (charged()), settled on its lease and recorded;
 *   - refused(err): refused or failed before that: recorded REJECTED (or
 *     FAILED), nothing charged.
 * A call is recorded once. The recorder writes it off the response's path and
 * tells the lease when it is written (call-recorder.ts).
 *
 * Calls under way are listed (for the shutdown, the snapshot and the heartbeat).
 * Each admitted call the upstream has begun to answer is written to lease_calls:
 * what it would be charged were the process to die now, by the rule for a call
 * cut short (chargeable()), and its invocation as it would then be recorded
 * (FAILED `gateway_lost`). The snapshot (every NEXUS_CALL_SNAPSHOT_MS, 250 ms)
 * writes, in one statement, the calls that began answering or changed since
 * their last write, and a stream that begins brings it forward to 50 ms after
 * (one write for every stream begun meanwhile); the heartbeat (a fifth of the
 * lease TTL) renews every lease of this process and writes those too. A stream
 * is written within 50 ms and a statement of its first byte, its progress
 * within a snapshot interval; never by its own request. Should
 * the process die, whoever reclaims its leases records and charges those
 * (quotaRepo.reclaimExpired); a call that ends
 * normally is recorded by its own process, once (the record is idempotent by
 * invocation id).
 */
import type { Db } from '../db/database.js';
import type { Clock } from '../domain/actor.js';
import type { LearnedOutput } from '../domain/changes/change-feed.js';
import { createInferenceKeyRepo } from '../domain/inference-keys/inference-key-repo.js';
import { createInvocationRepo } from '../domain/invocations/invocation-repo.js';
import type { AttemptStatus, InvocationRow, InvocationStatus } from '../domain/invocations/invocation-types.js';
import { createQuotaLeases, type Admission, type LeaseStatement, type QuotaLeases } from '../domain/quota/quota-leases.js';
import { compileModelPolicy, rulesFromStored, type ModelPolicy, type Pricing } from '../domain/quota/model-pricing.js';
import { boundUnits, chargeUnits, MAX_CALL_UNITS } from '../domain/quota/quota-math.js';
import { createQuotaRepo } from '../domain/quota/quota-repo.js';
import { createRateAllowances, type RateAllowances, type RateTicket } from '../domain/rate-limits/rate-allowances.js';
import { createRateRepo } from '../domain/rate-limits/rate-repo.js';
import { limitsOf } from '../domain/rate-limits/rate-service.js';
import { hasLimits, viewOfWindow, type RateView } from '../domain/rate-limits/rate-types.js';
import { storableText } from '../domain/storable-text.js';
import { RowJson } from '../db/row-json.js';
import { AppError, toAppError } from '../errors.js';
import { newId } from '../ids.js';
import type { Logger } from '../observability/logger.js';
import { callRows, invocationJson, type AuthRow, type CallRepo, type Consumption } from './call-repo.js';
import { createCallRecorder, type CallRecorder, type RecorderEvents } from './call-recorder.js';
import type { CallReport } from './call-report.js';
import type { CallTrace } from './call-trace.js';
import {
  modelNamedIn,
  prepareCall,
  usageFromJson,
  type FreeEndpoint,
  type Inspector,
  type PreparedCall,
  type Usage,
} from './inspectors.js';
import { IntrusiveList, type Linked } from './intrusive-list.js';
import { createLearnedBounds, type LearnedBounds } from './learned-bounds.js';
import type { Relay, ResponseWatcher, StreamProgress } from './relay.js';
import { createSpool } from './spool.js';

/** Model names and response ids are recorded up to this length. */
const MAX_NAME_LENGTH = 256;
/** A stream that begins is written this soon (with every other that began meanwhile), not at the next snapshot. */
const BEGUN_WRITE_MS = 50;
/** Responses API calls remembered per process, so a call continuing one finds its tokens before its record is written. */
const RECENT_RESPONSES = 10_000;

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
}

const msSince = (from: bigint, to: bigint) => Number(to - from) / 1e6;

/**
 * An upstream answer that did what was asked: a 2xx, or 304 Not Modified. A redirect is not:
 * the gateway follows none and passes no Location on (it would name the upstream's host).
 */
const succeeded = (status: number) => status < 300 || status === 304;

/**
 * The model rules and allow-list of a strategy version, compiled once per version: a published version
 * never changes, and only published ones are bound (so no row read later can hold other rules for the
 * same id). Bounded: the oldest compiled is dropped first.
 */
const policies = new Map<string, ModelPolicy>();
const MAX_POLICIES = 1000;
/** A key's row without a period (so without a strategy): every model, no rules. */
const NO_STRATEGY = compileModelPolicy({ inputMultiplierPpm: 0n, cachedInputMultiplierPpm: 0n, outputMultiplierPpm: 0n }, [], null);

function modelPolicyOf(auth: AuthRow): ModelPolicy {
  const id = auth.strategy_id;
  if (id === null) return NO_STRATEGY;
  let policy = policies.get(id);
  if (!policy) {
    policy = compileModelPolicy(
      {
        inputMultiplierPpm: auth.input_multiplier_ppm!,
        cachedInputMultiplierPpm: auth.cached_input_multiplier_ppm!,
        outputMultiplierPpm: auth.output_multiplier_ppm!,
      },
      rulesFromStored(auth.model_rules ?? []),
      auth.allowed_models,
    );
    if (policies.size >= MAX_POLICIES) policies.delete(policies.keys().next().value!);
    policies.set(id, policy);
  }
  return policy;
}

/** 403 before the upstream is called: the strategy does not allow the model the request names (or it names none). */
function assertModelAllowed(policy: ModelPolicy, model: string): void {
  if (policy.allows(model)) return;
  throw new AppError(
    'model_not_allowed',
    model ? `The model '${model}' is not allowed on this plan` : 'The request names no model, and this plan allows only the models it lists',
    { param: 'model' },
  );
}

/**
 * What a call that was answered is counted for. Exact when the provider reported usage. Otherwise
 * (a broken or aborted stream, an answer without readable usage): the input reported so far or else
 * the input bound, and the output reported so far or else one token per data event received (or the
 * output its meter counted, if more: sse-meter.ts), at most the output bound; a JSON answer without usage, and a stream cut at
 * its output bound, are counted at the whole output bound.
 */
function chargeable(progress: StreamProgress, prepared: PreparedCall): Usage {
  const { usage, complete } = progress;
  if (usage && complete) return usage;
  const inputTokens = usage?.inputTokens ?? prepared.inputBound;
  const cachedInputTokens = usage?.cachedInputTokens ?? 0n;
  if (!prepared.stream || progress.cut) return { inputTokens, cachedInputTokens, outputTokens: prepared.outputBound };
  const seen = progress.outputEstimate;
  const estimate = seen < prepared.outputBound ? seen : prepared.outputBound;
  const reported = usage?.outputTokens ?? 0n;
  return { inputTokens, cachedInputTokens, outputTokens: reported > estimate ? reported : estimate };
}

/** Which kind of answer passed its output bound: a stream (cut there, or reporting more at its end), a JSON answer. */
export type OverBound = 'stream' | 'json';

/** How an upstream call that ended is recorded: the invocation's and the attempt's status, and why it fell short. */
function outcomeOf(relay: Relay, shutdown: Error): { status: InvocationStatus; attempt: AttemptStatus; errorCode: string | null } {
  if (relay.end === 'complete') {
    const attempt = succeeded(relay.status!) ? 'SUCCEEDED' : 'UPSTREAM_ERROR';
    return relay.clientGone ? { status: 'CLIENT_ABORTED', attempt, errorCode: 'client_aborted' } : { status: attempt, attempt, errorCode: null };
  }
  // Stopped on our side, by the shutdown or by its client's leaving.
  if (relay.cancelReason === shutdown) return { status: 'FAILED', attempt: 'ABORTED', errorCode: 'server_shutdown' };
  if (relay.clientGone) return { status: 'CLIENT_ABORTED', attempt: 'ABORTED', errorCode: 'client_aborted' };
  if (relay.end === 'broken') return { status: 'FAILED', attempt: 'FAILED', errorCode: 'upstream_stream_broken' };
  // No answer: refused, reset, DNS failure, timeout before headers.
  const code = (relay.error as { code?: string } | undefined)?.code;
  const timedOut = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT';
  return { status: 'FAILED', attempt: 'FAILED', errorCode: timedOut ? 'upstream_timeout' : 'upstream_unavailable' };
}

/** Model names and response ids from opaque bodies, made storable: one PostgreSQL refuses would fail the record. */
function storable(invocation: InvocationRow): void {
  invocation.requested_model = storableText(invocation.requested_model, MAX_NAME_LENGTH);
  if (invocation.attempt_upstream_model) invocation.attempt_upstream_model = storableText(invocation.attempt_upstream_model, MAX_NAME_LENGTH);
  if (invocation.upstream_response_id) invocation.upstream_response_id = storableText(invocation.upstream_response_id, MAX_NAME_LENGTH);
}

/** What every call of a meter shares: the leases, the recorder, and what the process remembers. */
interface MeterParts {
  leases: QuotaLeases;
  rates: RateAllowances;
  recorder: CallRecorder;
  /** The calls under way (sent upstream, not yet answered in full). */
  running: IntrusiveList<MeteredCall>;
  clock: Clock;
  logger: Logger;
  /** Told of each call as it is recorded (metrics, its log line). */
  report: CallReport | undefined;
  shutdown: Error;
  rememberResponse(accessId: string, responseId: string, tokens: bigint): void;
  /** What upstreams that ignore the output cap were seen to produce: later calls are admitted at it. */
  learned: LearnedBounds;
  /** Tells the other processes of an output bound learned here. */
  shareLearned?: ((learned: LearnedOutput) => void) | undefined;
  /** A metered stream began: the calls under way are written soon (the snapshot). */
  streamBegan(): void;
  /** Told of each answer that passed its output bound (metrics). */
  overBound?: ((kind: OverBound) => void) | undefined;
  conversationTokens(auth: AuthRow, responseId: string): Promise<bigint>;
  quotaView(row: AuthRow | null, now: Date): QuotaView | undefined;
  rateView(row: AuthRow | null, now: Date): RateView | undefined;
}

export class MeteredCall implements ResponseWatcher, Linked<MeteredCall> {
  /** The quota headers of the call's answer, once admitted (or refused for quota). */
  view: QuotaView | undefined;
  /** Where its plan's rate limits stand for its answer's headers, once admitted (or refused for a limit). */
  rateView: RateView | undefined;
  private rateTicket: RateTicket | undefined;
  /** What the inspector made of a metered call's request: its bounds, and the body to send. */
  prepared: PreparedCall | undefined;
  /** The upstream call, once sent, and when. */
  relay: Relay | undefined;
  /** What a metered call is priced at: the model rule of the model its request names (never the one the provider reports). */
  private pricing: Pricing | undefined;
  private attemptStartedAt: Date | undefined;
  private admission: Admission | undefined;
  private reloaded = false;
  private recorded = false;
  /** Units the last snapshot or heartbeat written for it charges (-1: none written); the one being written. */
  private beatUnits = -1n;
  private beatingUnits = -1n;
  /** Its events' ids, should a reclaim charge it: made at its first heartbeat. */
  private lostIds: { usage: string; adjustment: string; attempt: string } | undefined;
  listPrev: MeteredCall | null = null;
  listNext: MeteredCall | null = null;
  private readonly invocation: InvocationRow;
  private readonly t0: bigint;
  private readonly trace: CallTrace | undefined;

  constructor(
    private readonly meter: MeterParts,
    private auth: AuthRow,
    /** The usage inspector of the endpoint; none: an unmetered call. */
    readonly inspector: Inspector | undefined,
    start: CallStart,
  ) {
    this.t0 = start.t0;
    this.trace = start.trace;
    this.invocation = {
      id: newId(),
      workspace_id: auth.workspace_id,
      workspace_access_id: auth.workspace_access_id,
      provider_connection_id: auth.connection_id!,
      inference_key_id: auth.key_id,
      request_id: start.requestId,
      trace_id: start.traceId,
      method: start.method,
      endpoint: start.endpoint,
      requested_model: '',
      status: 'REJECTED',
      metering_status: inspector ? 'metered' : 'unmetered',
      streamed: false,
      lease_id: null,
      quota_units: 0n,
      error_code: null,
      started_at: start.startedAt,
      first_token_at: null,
      completed_at: null,
      total_latency_ms: null,
      provider_latency_ms: null,
      nexus_latency_ms: null,
      total_ttft_ms: null,
      provider_ttft_ms: null,
      nexus_ttft_ms: null,
      upstream_response_id: null,
      attempt_id: null,
      attempt_upstream_model: null,
      attempt_status: null,
      attempt_http_status: null,
      attempt_error_code: null,
      attempt_started_at: null,
      attempt_first_token_at: null,
      attempt_completed_at: null,
      attempt_duration_ms: null,
    };
  }

  /**
   * A metered call: its bound on the access's current period, admitted on this process's lease of it.
   * Throws the refusal (a bad request, or 429 quota_insufficient with the view set). Returns false
   * when the key's row named a period that is over (a plan change split it, or it ended): the
   * gateway reads the row again, hands it to reauthorized() and admits once more.
   */
  async admit(raw: Buffer): Promise<boolean> {
    const auth = this.auth;
    const reset = auth.period_end;
    if (!auth.period_id || !reset) throw new AppError('quota_insufficient', 'The access has no current quota period');
    const prepared = prepareCall(this.inspector!, raw, { maxOutputTokens: auth.max_output_tokens!, clamp: auth.output_cap_policy !== 'refuse' });
    this.prepared = prepared;
    this.invocation.requested_model = prepared.requestedModel;
    this.invocation.streamed = prepared.stream;
    const policy = modelPolicyOf(auth);
    assertModelAllowed(policy, prepared.requestedModel);
    const pricing = policy.pricingFor(prepared.requestedModel);
    this.pricing = pricing;
    if (prepared.previousResponseId) prepared.inputBound += await this.meter.conversationTokens(auth, prepared.previousResponseId);
    // An upstream seen to answer past its calls' bounds: admitted at what it produced (learned-bounds.ts).
    const learned = this.meter.learned.output(auth.connection_id!, prepared.requestedModel, prepared.stream);
    const bound = boundUnits(prepared.inputBound, learned > prepared.outputBound ? learned : prepared.outputBound, pricing);
    if (bound > MAX_CALL_UNITS) {
      throw new AppError('quota_insufficient', `This call may need up to ${bound} units, more than a quota period can hold`, {
        reset_at: reset.toISOString(),
      });
    }
    const held = await this.meter.leases.admit({ workspaceId: auth.workspace_id, accessId: auth.workspace_access_id, periodId: auth.period_id }, bound);
    if (!held.ok) {
      if (held.periodOver && !this.reloaded) return false;
      this.view = { remaining: held.available, reset };
      throw new AppError('quota_insufficient', `This call may need up to ${bound} units; ${held.available} are available`, {
        reset_at: reset.toISOString(),
      });
    }
    this.admission = held.admission;
    this.invocation.lease_id = held.admission.lease.id;
    this.view = { remaining: held.remaining, reset };
    await this.admitRate(prepared.inputBound + prepared.outputBound);
    return true;
  }

  /**
   * The plan's rate limits (none: nothing to do): a request, `tokens` (the call's bound) and a slot, on
   * this process's allowance of the access (rate-allowances.ts). Throws 429 rate_limited with the view set.
   */
  private async admitRate(tokens: bigint): Promise<void> {
    const limits = limitsOf(this.auth);
    if (!hasLimits(limits)) return;
    const auth = this.auth;
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

  /** The key's row read again after admit() found its period over. */
  reauthorized(auth: AuthRow): void {
    this.auth = auth;
    this.reloaded = true;
  }

  /**
   * An unmetered call (the workspace allows passthrough): its model as the body names it, the key's quota
   * view; a request and a slot of its plan's rate limits. A JSON body naming a model the strategy does not
   * allow is refused (403) all the same.
   */
  async passthrough(raw: Buffer, now: Date): Promise<void> {
    this.invocation.requested_model = modelNamedIn(raw);
    this.view = this.meter.quotaView(this.auth, now);
    const policy = modelPolicyOf(this.auth);
    if (policy.restricted && this.invocation.requested_model) assertModelAllowed(policy, this.invocation.requested_model);
    await this.admitRate(0n);
  }

  /**
   * A governed but free call (the model list, a model's description, token counting): no quota is taken.
   * A model outside the strategy's allow-list is refused (403); for the list, returns the test its answer
   * is filtered by (none when every model is allowed).
   */
  free(endpoint: FreeEndpoint, raw: Buffer, now: Date): ((model: string) => boolean) | undefined {
    const policy = modelPolicyOf(this.auth);
    this.view = this.meter.quotaView(this.auth, now);
    if (endpoint.kind === 'models') return policy.restricted ? (model) => policy.allows(model) : undefined;
    const model = endpoint.kind === 'model' ? endpoint.model : modelNamedIn(raw);
    this.invocation.requested_model = model;
    if (policy.restricted) assertModelAllowed(policy, model);
    return undefined;
  }

  /** The upstream call is sent now: the call is under way until answered(). */
  started(relay: Relay, at: Date): void {
    this.relay = relay;
    this.attemptStartedAt = at;
    this.meter.running.add(this);
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
    const lost: InvocationRow = {
      ...this.invocation,
      status: 'FAILED',
      error_code: 'gateway_lost',
      quota_units: units,
      completed_at: now,
      total_latency_ms: now.getTime() - this.invocation.started_at.getTime(),
      attempt_id: this.lostIds.attempt,
      attempt_upstream_model: relay.model || this.invocation.requested_model,
      attempt_status: 'ABORTED',
      attempt_http_status: relay.status,
      attempt_error_code: 'gateway_lost',
      attempt_started_at: started,
      attempt_completed_at: now,
      attempt_duration_ms: now.getTime() - started.getTime(),
    };
    storable(lost);
    return new RowJson()
      .id('invocation_id', this.invocation.id)
      .id('lease_id', admission.lease.id)
      .big('bound', admission.bound)
      .big('units', units)
      .big('input_tokens', counted.inputTokens)
      .big('cached_tokens', counted.cachedInputTokens)
      .big('output_tokens', counted.outputTokens)
      .str('model', storableText(relay.model || this.invocation.requested_model, MAX_NAME_LENGTH) || null)
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
    this.meter.rememberResponse(this.auth.workspace_access_id, responseId, tokens);
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
    const invocation = this.invocation;
    const { status, attempt, errorCode: cause } = outcomeOf(relay, this.meter.shutdown);
    let errorCode = cause;
    let refusal: AppError | undefined;
    if (cause === 'upstream_stream_broken') {
      this.meter.logger.warn({ msg: 'upstream stream broke', requestId: invocation.request_id, error: relay.error?.message });
    } else if (cause === 'upstream_timeout' || cause === 'upstream_unavailable') {
      const code = (relay.error as { code?: string } | undefined)?.code;
      this.meter.logger.warn({ msg: 'no upstream answer', requestId: invocation.request_id, code, error: relay.error?.message });
      refusal = new AppError(cause, cause === 'upstream_timeout' ? 'The provider did not answer within the timeout' : 'The provider could not be reached');
    }

    let usage = relay.usage;
    let usageComplete = relay.usageComplete;
    let upstreamModel = relay.model ?? '';
    if (relay.responseId) invocation.upstream_response_id = relay.responseId;
    const json = relay.jsonAnswer();
    if (json !== null) {
      const parsed = usageFromJson(this.inspector!, json);
      usage = parsed.usage;
      usageComplete = usage !== null;
      if (parsed.model) upstreamModel = parsed.model;
      if (parsed.responseId) {
        invocation.upstream_response_id = parsed.responseId;
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
        const connectionId = this.auth.connection_id!;
        const output = this.meter.learned.observed(connectionId, prepared.requestedModel, prepared.stream, usage!.outputTokens);
        if (output !== null) this.meter.shareLearned?.({ connectionId, model: prepared.requestedModel, stream: prepared.stream, output });
      }
      if (!usageComplete && !errorCode) errorCode = 'usage_missing';
      // Priced by the rule of the model the request named: a dated alias the provider reports does not change it.
      const pricing = this.pricing!;
      const units = chargeUnits(counted, pricing);
      invocation.quota_units = units;
      consumed = {
        units,
        inputTokens: counted.inputTokens,
        cachedInputTokens: counted.cachedInputTokens,
        outputTokens: counted.outputTokens,
        model: upstreamModel || invocation.requested_model || null,
        pricing,
      };
    }
    const providerMs = msSince(relay.tStart, relay.tUpstreamEnd!);
    invocation.attempt_id = newId();
    invocation.attempt_upstream_model = upstreamModel || invocation.requested_model;
    invocation.attempt_status = attempt;
    invocation.attempt_http_status = relay.status ?? null;
    invocation.attempt_error_code = errorCode;
    invocation.attempt_started_at = attemptStartedAt;
    invocation.attempt_completed_at = now;
    invocation.attempt_duration_ms = providerMs;
    invocation.status = status;
    invocation.error_code = errorCode;
    invocation.completed_at = now;
    invocation.total_latency_ms = msSince(this.t0, tEnd);
    invocation.provider_latency_ms = providerMs;
    invocation.nexus_latency_ms = invocation.total_latency_ms - providerMs;
    if (invocation.streamed && relay.tFirstUpstream !== undefined) {
      const providerTtft = msSince(relay.tStart, relay.tFirstUpstream);
      invocation.attempt_first_token_at = new Date(attemptStartedAt.getTime() + providerTtft);
      invocation.provider_ttft_ms = providerTtft;
      if (relay.tFirstClient !== undefined) {
        invocation.total_ttft_ms = msSince(this.t0, relay.tFirstClient);
        invocation.first_token_at = new Date(invocation.started_at.getTime() + invocation.total_ttft_ms);
        invocation.nexus_ttft_ms = invocation.total_ttft_ms - providerTtft;
      }
    }
    this.record(consumed, now, refusal ? refusal.status : relay.clientGone ? 499 : (relay.status ?? 502));
    return refusal;
  }

  /**
   * Refused or failed before its upstream call ended (`raw`: its body, if it was read): recorded
   * REJECTED (FAILED for a failure of ours), charged nothing. A call already recorded is left alone.
   */
  refused(err: unknown, raw: Buffer | undefined): void {
    if (this.recorded) return;
    this.meter.running.delete(this);
    const invocation = this.invocation;
    const appError = toAppError(err);
    // A metered call refused while its body was read (a bad cap, say) still names its model.
    if (!invocation.requested_model && raw) invocation.requested_model = modelNamedIn(raw);
    invocation.status = appError.status < 500 ? 'REJECTED' : 'FAILED';
    invocation.error_code = appError.code;
    invocation.completed_at = this.meter.clock.now();
    invocation.total_latency_ms = msSince(this.t0, process.hrtime.bigint());
    // The cause of a 500 goes to the log line (never to the client).
    this.record(null, this.meter.clock.now(), appError.status, appError.status >= 500 && !(err instanceof AppError) ? err : undefined);
  }

  /**
   * Settles the call on its lease and hands its record to the recorder; the lease learns when it is written.
   * `httpStatus`: what its client was answered (499: the client left first), for the report and the trace.
   */
  private record(consumed: Consumption | null, now: Date, httpStatus: number, cause?: unknown): void {
    this.recorded = true;
    const { invocation, admission } = this;
    const take = admission ? this.meter.leases.settle(admission, consumed?.units ?? null) : 0n;
    if (this.rateTicket) {
      // Input tokens count the cached ones already.
      const tokens = consumed ? consumed.inputTokens + consumed.outputTokens : null;
      this.meter.rates.settle(this.rateTicket, tokens === null ? null : Number(tokens));
    }
    storable(invocation);
    const span = this.trace?.ended(invocation, consumed, httpStatus, this.prepared);
    if (consumed?.model) consumed.model = storableText(consumed.model, MAX_NAME_LENGTH);
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
        keyId: this.auth.key_id,
        lastRequestAt: this.auth.last_request_at,
        admission,
        span,
      },
      now,
    );
    // Observed once the record is handed over: whatever the report does, the call is recorded.
    this.meter.report?.(invocation, consumed, httpStatus, cause);
  }
}

export function createCallMeter(deps: {
  /** The gateway's own pool (gateway-db.ts). */
  db: Db;
  repo: Pick<CallRepo, 'record' | 'heartbeat' | 'snapshot'>;
  clock: Clock;
  logger: Logger;
  /**
   * How long a lease outlives its process's last heartbeat before the sweeper may reclaim it. The
   * heartbeat comes five times a TTL.
   */
  leaseTtlMs: number;
  /**
   * How often the calls under way that began answering or changed since their last write are written
   * (lease_calls), between heartbeats.
   */
  callSnapshotMs: number;
  /** A lease unused this long returns its units to the period. */
  leaseIdleMs: number;
  /** Where records wait while the database is away; none: in memory only. */
  spoolDir?: string | undefined;
  /** Told of each lease statement (metrics). */
  onLeaseStatement?: ((kind: LeaseStatement) => void) | undefined;
  /** Told of each answer that passed its output bound (metrics). */
  onOutputOverBound?: ((kind: OverBound) => void) | undefined;
  /** Told of each output bound learned here that the other processes should admit at (the change feed). */
  shareLearned?: ((learned: LearnedOutput) => void) | undefined;
  /** Told of each call as it is recorded (metrics, its log line). */
  report?: CallReport | undefined;
  /** Told of the recorder's batches, failures and spooled records (metrics). */
  recorderEvents?: RecorderEvents | undefined;
}) {
  const { clock, logger, repo } = deps;
  const leases = createQuotaLeases({
    repo: createQuotaRepo(deps.db),
    clock,
    logger,
    ttlMs: deps.leaseTtlMs,
    idleMs: deps.leaseIdleMs,
    onStatement: deps.onLeaseStatement,
  });
  const rates = createRateAllowances({
    repo: createRateRepo(deps.db),
    clock,
    logger,
    ttlMs: deps.leaseTtlMs,
    // An access idle this long gives back what the process holds unused (another process may be refused meanwhile).
    idleMs: deps.leaseIdleMs,
  });
  const recorder = createCallRecorder({
    repo,
    keys: createInferenceKeyRepo(deps.db),
    logger,
    written: leases.written,
    spool: deps.spoolDir ? createSpool(deps.spoolDir) : undefined,
    events: deps.recorderEvents,
  });
  const running = new IntrusiveList<MeteredCall>();
  let begunTimer: NodeJS.Timeout | undefined;
  const invocations = createInvocationRepo(deps.db);
  /** Responses API calls metered lately, by access and response id: the tokens a call continuing one adds to its input. */
  const recentResponses = new Map<string, bigint>();

  const meter: MeterParts = {
    leases,
    rates,
    recorder,
    running,
    clock,
    logger,
    overBound: deps.onOutputOverBound,
    learned: createLearnedBounds(clock),
    shareLearned: deps.shareLearned,
    report: deps.report,
    /** The server is shutting down: the reason it cancels the calls still under way (gateway.ts). */
    shutdown: new Error('The server shut down before the call ended'),

    streamBegan(): void {
      // One timer for every stream that begins meanwhile: written together, BEGUN_WRITE_MS after the first.
      if (begunTimer) return;
      begunTimer = setTimeout(() => {
        begunTimer = undefined;
        void serialized(false);
      }, BEGUN_WRITE_MS);
      begunTimer.unref();
    },

    rememberResponse(accessId: string, responseId: string, tokens: bigint): void {
      recentResponses.set(`${accessId} ${responseId}`, tokens);
      if (recentResponses.size > RECENT_RESPONSES) recentResponses.delete(recentResponses.keys().next().value!);
    },

    /**
     * The conversation a Responses API call continues, in tokens: its previous response's input and output,
     * as recorded for the same access (another end user's conversations are none of this call's business).
     * 0 when no record has it (a response made elsewhere): that call is then charged exactly afterwards, its
     * excess as an ADJUSTMENT.
     */
    async conversationTokens(auth: AuthRow, responseId: string): Promise<bigint> {
      const known = recentResponses.get(`${auth.workspace_access_id} ${responseId}`);
      if (known !== undefined) return known;
      return (await invocations.conversationTokens(auth.workspace_id, auth.workspace_access_id, responseId)) ?? 0n;
    },

    /**
     * The quota headers of a valid key's answers that were not admitted (refusals, unmetered calls): the
     * lease's view while this process holds one on the period (what its last calls left), else the
     * looked-up row's (at most NEXUS_AUTH_CACHE_TTL_MS old). None for an invalid key or an access without a period.
     */
    quotaView(row: AuthRow | null, now: Date): QuotaView | undefined {
      if (!row || row.revoked_at || row.expires_at <= now || !row.period_id || !row.period_end) return undefined;
      const leased = leases.remaining(row.period_id);
      if (leased !== undefined) return { remaining: leased, reset: row.period_end };
      const remaining = row.granted_units! - row.reserved_units! - row.consumed_units!;
      return { remaining: remaining > 0n ? remaining : 0n, reset: row.period_end };
    },

    /**
     * The rate-limit headers of a valid key's answers that were not admitted: this process's view while it
     * admits calls for the access, else the looked-up window row's. None for an invalid key or a plan without limits.
     */
    rateView(row: AuthRow | null, now: Date): RateView | undefined {
      if (!row || row.revoked_at || row.expires_at <= now) return undefined;
      const limits = limitsOf(row);
      if (!hasLimits(limits)) return undefined;
      return (
        rates.view(row.workspace_access_id) ??
        viewOfWindow(
          limits,
          { window_start: row.rate_window_start, requests: row.rate_requests, tokens: row.rate_tokens, concurrent: row.rate_concurrent },
          now.getTime(),
        )
      );
    },
  };
  /**
   * One statement at a time writes this process's leases and calls under way: the snapshot (every
   * callSnapshotMs) writes the calls that began answering or changed since their last write, on their
   * leases still held (it does not renew them); the heartbeat (a fifth of the TTL) renews every lease this
   * process holds, with the changed calls too. A stream that begins brings the snapshot forward to
   * BEGUN_WRITE_MS after it. A heartbeat or a snapshot due while a statement is in flight runs right after it.
   */
  let writing: Promise<void> | null = null;
  let renewDue = false;
  let snapshotDue = false;

  /** `renewAll`: the heartbeat; otherwise the snapshot, which costs nothing when no call has changed. */
  async function writeCalls(renewAll: boolean): Promise<void> {
    let leaseIds: string[] = [];
    if (renewAll) {
      leaseIds = leases.heartbeat();
      if (!leaseIds.length) return;
    }
    const now = clock.now();
    const rows: string[] = [];
    const included: MeteredCall[] = [];
    running.forEach((call) => {
      const row = call.heartbeatRow(now);
      if (row === null) return;
      rows.push(row);
      included.push(call);
    });
    if (!renewAll) {
      if (!rows.length) return;
      leaseIds = [...new Set(included.map((call) => call.leaseId!))];
    }
    try {
      let held: Set<string>;
      if (renewAll) {
        const until = new Date(now.getTime() + deps.leaseTtlMs);
        held = await repo.heartbeat(leaseIds, until, rows, now);
        leases.renewed(leaseIds, held, until.getTime());
      } else {
        // Leases are the heartbeat's to renew (or find lost); a call on one no longer held is not written.
        held = await repo.snapshot(leaseIds, rows, now);
      }
      for (const call of included) if (held.has(call.leaseId!)) call.beatWritten();
    } catch (err) {
      if (renewAll) {
        logger.warn({ msg: 'quota lease heartbeat failed: leases admit on what they hold for half their TTL', error: (err as Error).message });
      } else {
        // The heartbeat's warning says it, should it last; the next snapshot writes these calls again.
        logger.debug({ msg: 'the snapshot of the calls under way could not be written', error: (err as Error).message });
      }
    }
  }

  function serialized(renewAll: boolean): Promise<void> {
    if (renewAll) renewDue = true;
    else snapshotDue = true;
    if (writing) return writing;
    writing = (async () => {
      try {
        do {
          const all = renewDue;
          renewDue = snapshotDue = false;
          await writeCalls(all);
        } while (renewDue || snapshotDue);
      } finally {
        writing = null;
      }
    })();
    return writing;
  }

  /** Renews this process's leases and writes its calls in flight on them, in one statement. */
  const heartbeat = () => serialized(true);
  const heartbeatTimer = setInterval(() => void heartbeat(), Math.max(20, Math.floor(deps.leaseTtlMs / 5)));
  heartbeatTimer.unref();
  const snapshotTimer = setInterval(() => {
    if (!running.isEmpty()) void serialized(false);
  }, deps.callSnapshotMs);
  snapshotTimer.unref();

  return {
    /** A call of a valid key on an allowed connection (`inspector`: its endpoint's, none when unmetered). */
    open(auth: AuthRow, inspector: Inspector | undefined, start: CallStart): MeteredCall {
      return new MeteredCall(meter, auth, inspector, start);
    },
    quotaView: meter.quotaView,
    rateView: meter.rateView,
    /** Gives the rate allowances held unused back (tests, shutdown). */
    drainRates: () => rates.drain(),
    /** The reason a shutdown cancels the calls under way with: they are recorded FAILED `server_shutdown`. */
    shutdown: meter.shutdown,
    /** Forgets the Responses API calls remembered and the output bounds learned (tests). */
    forgetResponses(): void {
      recentResponses.clear();
      meter.learned.clear();
    },
    /** A shutdown's deadline has come: the upstream calls still under way are cancelled. */
    cutCalls(): void {
      running.forEach((call) => call.relay?.cancel(meter.shutdown));
    },
    /** An output bound another process learned: calls here are admitted at it too. */
    learned(l: LearnedOutput): void {
      meter.learned.observed(l.connectionId, l.model, l.stream, l.output);
    },
    /** Runs a heartbeat now (tests). */
    heartbeat,
    /** Writes the records a process that stopped left in the spool (at start). */
    recover: () => recorder.recover(),
    recorderStats: () => recorder.stats(),
    /** Waits for the records started so far, then returns the quota leases not in use. */
    async drain(): Promise<void> {
      await recorder.drain();
      await leases.drain();
      await rates.drain();
    },
    close(): void {
      clearInterval(heartbeatTimer);
      clearInterval(snapshotTimer);
      clearTimeout(begunTimer);
      recorder.close();
      leases.close();
      rates.close();
    },
  };
}

/**
 * The process-wide meter of gateway calls: what outlives any one call. It opens each call and is what the call
 * asks of the process: the leases and rate allowances it is admitted on, the recorder its record goes to, the
 * list of calls under way, the Responses API calls remembered, the model policies compiled, the output bounds
 * learned and the first wave; a call reaches nothing further. It keeps the timers that write the calls
 * under way.
 *
 * Each admitted call the upstream has begun to answer is written to lease_calls: what it would be charged were
 * the process to die now, by the rule for a call cut short, and its invocation as it would then be recorded
 * (FAILED `gateway_lost`: MeteredCall.heartbeatRow). The snapshot (every NEXUS_CALL_SNAPSHOT_MS, 250 ms)
 * writes, in one statement, the calls that began answering or changed since their last write, and a stream
 * that begins brings it forward to 50 ms after (one write for every stream begun meanwhile); the heartbeat (a
 * fifth of the lease TTL) renews every lease of this process and writes those too. A stream is written within
 * 50 ms and a statement of its first byte, its progress within a snapshot interval; never by its own request.
 * Should the process die, whoever reclaims its leases records and charges those (quotaRepo.reclaimExpired); a
 * call that ends normally is recorded by its own process, once (the record is idempotent by invocation id).
 *
 * Its parts (leases, allowances, recorder, learned bounds, the first wave) are built by
 * createGatewayParts (gateway-parts.ts) and passed in.
 */
import type { Clock } from '../domain/actor.js';
import type { LearnedOutput } from '../domain/changes/change-feed.js';
import type { InvocationRepo } from '../domain/invocations/invocation-repo.js';
import {
  compileModelPolicy,
  kindsFromStored,
  rulesFromStored,
  type ModelPolicy,
  type StoredKindMultipliers,
  type StoredModelRule,
} from '../domain/quota/model-pricing.js';
import type { QuotaLeases } from '../domain/quota/quota-leases.js';
import type { RateAllowances } from '../domain/rate-limits/rate-allowances.js';
import { limitsOf } from '../domain/rate-limits/rate-service.js';
import { hasLimits, viewOfWindow, type RateView } from '../domain/rate-limits/rate-types.js';
import type { Logger } from '../observability/logger.js';
import type { QuotaView } from './answers.js';
import type { CacheEntry } from './auth-cache.js';
import type { CallRepo } from '../records/call-repo.js';
import type { AuthRow } from './auth-repo.js';
import type { CallRecorder } from '../records/call-recorder.js';
import type { CallReport } from './call-report.js';
import type { FirstWave } from './first-wave.js';
import type { Inspector } from '../protocols/inspectors.js';
import { IntrusiveList, type Linked } from './intrusive-list.js';
import type { LearnedBounds } from './learned-bounds.js';
import { MeteredCall, type CallStart } from './metered-call.js';

/** A stream that begins is written this soon (with every other that began meanwhile), not at the next snapshot. */
const BEGUN_WRITE_MS = 50;
/** Responses API calls remembered per process, so a call continuing one finds its tokens before its record is written. */
const RECENT_RESPONSES = 10_000;
/** Strategy versions whose model policy is kept compiled; the oldest compiled is dropped first. */
const MAX_POLICIES = 1000;
/** A key's row without a period (so without a strategy): every model, no rules. */
const NO_STRATEGY = compileModelPolicy({ inputMultiplierPpm: 0n, cachedInputMultiplierPpm: 0n, outputMultiplierPpm: 0n }, [], null);

/** Which kind of answer passed its output bound: a stream (cut there, or reporting more at its end), a JSON answer. */
export type OverBound = 'stream' | 'json';

export interface CallMeterDeps {
  repo: Pick<CallRepo, 'heartbeat' | 'snapshot'>;
  leases: QuotaLeases;
  rates: RateAllowances;
  recorder: CallRecorder;
  /** What upstreams that ignore the output cap were seen to produce: later calls are admitted at it. */
  learned: LearnedBounds;
  /** The first wave of JSON calls to a connection's model without history, bounded per access (first-wave.ts). */
  firstWave: FirstWave;
  invocations: Pick<InvocationRepo, 'conversationTokens'>;
  clock: Clock;
  logger: Logger;
  /** How long a lease outlives its process's last heartbeat before the sweeper may reclaim it: a heartbeat comes five times a TTL. */
  leaseTtlMs: number;
  /** How often the calls under way that began answering or changed since their last write are written, between heartbeats. */
  callSnapshotMs: number;
  /** The key's row read again, bypassing the cache (a call's admission found its period over). */
  reload(credential: string, connectionId: string): Promise<CacheEntry>;
  /** Told of each answer that passed its output bound (metrics). */
  onOutputOverBound?: ((kind: OverBound) => void) | undefined;
  /** Told of each answer charged by the rule for missing usage, by its protocol's telemetry name (metrics). */
  onUsageMissing?: ((protocol: string, kind: OverBound) => void) | undefined;
  /** Told of each output bound learned here that the other processes should admit at (the change feed). */
  shareLearned?: ((learned: LearnedOutput) => void) | undefined;
  /** Told of each call as it is recorded (metrics, its log line). */
  report?: CallReport | undefined;
}

/**
 * A call under way, as the meter keeps it: a gateway call (MeteredCall), or a Realtime session's turn
 * (src/realtime/). The heartbeat writes its row; a shutdown's deadline cuts it.
 */
export interface RunningCall extends Linked<RunningCall> {
  /** Its lease_calls row should the process die now (src/records/call-rows.ts leaseCallRow); null: nothing new to write. */
  heartbeatRow(now: Date): string | null;
  /** The row last asked of it was written (its lease was still held). */
  beatWritten(): void;
  readonly leaseId: string | undefined;
  cut(reason: Error): void;
}

export class CallMeter {
  /** Calls under way (sent upstream, not yet answered in full): a call adds itself when started, and leaves when it ends. */
  readonly running = new IntrusiveList<RunningCall>();
  /** The reason a shutdown cancels the calls under way with: they are recorded FAILED `server_shutdown`. */
  readonly shutdown = new Error('The server shut down before the call ended');
  readonly leases: QuotaLeases;
  readonly rates: RateAllowances;
  readonly recorder: CallRecorder;
  readonly learned: LearnedBounds;
  readonly firstWave: FirstWave;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly report: CallReport | undefined;
  readonly overBound: ((kind: OverBound) => void) | undefined;
  readonly usageMissing: ((protocol: string, kind: OverBound) => void) | undefined;
  readonly shareLearned: ((learned: LearnedOutput) => void) | undefined;
  /** Responses API calls metered lately, by access and response id: the tokens a call continuing one adds to its input. */
  private readonly recentResponses = new Map<string, bigint>();
  /**
   * The model rules and allow-list of a strategy version, compiled once per version: a published version
   * never changes, and only published ones are bound (so no row read later can hold other rules for the
   * same id).
   */
  private readonly policies = new Map<string, ModelPolicy>();
  /** The statement writing the calls under way, while one is (writeCalls); what is due after it. */
  private writing: Promise<void> | null = null;
  private renewDue = false;
  private snapshotDue = false;
  private begunTimer: NodeJS.Timeout | undefined;
  private readonly heartbeatTimer: NodeJS.Timeout;
  private readonly snapshotTimer: NodeJS.Timeout;

  constructor(private readonly deps: CallMeterDeps) {
    this.leases = deps.leases;
    this.rates = deps.rates;
    this.recorder = deps.recorder;
    this.learned = deps.learned;
    this.firstWave = deps.firstWave;
    this.clock = deps.clock;
    this.logger = deps.logger;
    this.report = deps.report;
    this.overBound = deps.onOutputOverBound;
    this.usageMissing = deps.onUsageMissing;
    this.shareLearned = deps.shareLearned;
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), Math.max(20, Math.floor(deps.leaseTtlMs / 5)));
    this.heartbeatTimer.unref();
    this.snapshotTimer = setInterval(() => {
      if (!this.running.isEmpty()) void this.serialized(false);
    }, deps.callSnapshotMs);
    this.snapshotTimer.unref();
  }

  /**
   * A call of a valid key on an allowed connection (`entry`: its lookup, `auth`: its row authorized;
   * `inspector`: its endpoint's, none when unmetered).
   */
  open(entry: CacheEntry, auth: AuthRow, inspector: Inspector | undefined, start: CallStart): MeteredCall {
    return new MeteredCall(this, entry, auth, inspector, start);
  }

  /** The key's row read again, bypassing the cache (a period found over). */
  reload(credential: string, connectionId: string): Promise<CacheEntry> {
    return this.deps.reload(credential, connectionId);
  }

  /** A metered stream began: the calls under way are written soon, BEGUN_WRITE_MS after the first stream begun meanwhile. */
  streamBegan(): void {
    if (this.begunTimer) return;
    this.begunTimer = setTimeout(() => {
      this.begunTimer = undefined;
      void this.serialized(false);
    }, BEGUN_WRITE_MS);
    this.begunTimer.unref();
  }

  rememberResponse(accessId: string, responseId: string, tokens: bigint): void {
    const recent = this.recentResponses;
    recent.set(`${accessId} ${responseId}`, tokens);
    if (recent.size > RECENT_RESPONSES) recent.delete(recent.keys().next().value!);
  }

  /**
   * The conversation a Responses API call continues, in tokens: its previous response's input and output,
   * as recorded for the same access (another end user's conversations are none of this call's business).
   * 0 when no record has it (a response made elsewhere): that call is then charged exactly afterwards, its
   * excess as an ADJUSTMENT.
   */
  async conversationTokens(auth: AuthRow, responseId: string): Promise<bigint> {
    const known = this.recentResponses.get(`${auth.workspace_access_id} ${responseId}`);
    if (known !== undefined) return known;
    return (await this.deps.invocations.conversationTokens(auth.workspace_id, auth.workspace_access_id, responseId)) ?? 0n;
  }

  /** The model rules and allow-list of the row's strategy version, compiled once per version. */
  modelPolicy(auth: AuthRow): ModelPolicy {
    const id = auth.strategy_id;
    if (id === null) return NO_STRATEGY;
    let policy = this.policies.get(id);
    if (!policy) {
      policy = compileModelPolicy(
        {
          inputMultiplierPpm: auth.input_multiplier_ppm!,
          cachedInputMultiplierPpm: auth.cached_input_multiplier_ppm!,
          outputMultiplierPpm: auth.output_multiplier_ppm!,
          ...kindsFromStored(auth.kind_multipliers_json ? (JSON.parse(auth.kind_multipliers_json) as StoredKindMultipliers) : null),
        },
        rulesFromStored(auth.model_rules_json ? (JSON.parse(auth.model_rules_json) as StoredModelRule[]) : []),
        auth.allowed_models,
      );
      if (this.policies.size >= MAX_POLICIES) this.policies.delete(this.policies.keys().next().value!);
      this.policies.set(id, policy);
    }
    return policy;
  }

  /**
   * The quota headers of a valid key's answers that were not admitted (refusals, unmetered calls): the
   * lease's view while this process holds one on the period (what its last calls left), else the
   * looked-up row's (at most NEXUS_AUTH_CACHE_TTL_MS old). None for an invalid key or an access without a period.
   */
  quotaView(row: AuthRow | null, now: Date): QuotaView | undefined {
    if (!row || row.revoked_at || row.expires_at <= now || !row.period_id || !row.period_end) return undefined;
    const leased = this.leases.remaining(row.period_id);
    if (leased !== undefined) return { remaining: leased, reset: row.period_end };
    const remaining = row.granted_units! - row.reserved_units! - row.consumed_units!;
    return { remaining: remaining > 0n ? remaining : 0n, reset: row.period_end };
  }

  /**
   * The rate-limit headers of a valid key's answers that were not admitted: this process's view while it
   * admits calls for the access, else the looked-up window row's. None for an invalid key or a plan without limits.
   */
  rateView(row: AuthRow | null, now: Date): RateView | undefined {
    if (!row || row.revoked_at || row.expires_at <= now) return undefined;
    const limits = limitsOf(row);
    if (!hasLimits(limits)) return undefined;
    return (
      this.rates.view(row.workspace_access_id) ??
      viewOfWindow(
        limits,
        {
          requests_tat: row.rate_requests_tat,
          requests_limit: row.rate_requests_limit,
          tokens_tat: row.rate_tokens_tat,
          tokens_limit: row.rate_tokens_limit,
          concurrent: row.rate_concurrent,
        },
        now.getTime(),
      )
    );
  }

  /** Forgets the Responses API calls remembered and the output bounds learned (tests). */
  forgetResponses(): void {
    this.recentResponses.clear();
    this.learned.clear();
    this.firstWave.clear();
  }

  /** A shutdown's deadline has come: the upstream calls still under way are cancelled, the calls waiting refused. */
  cutCalls(): void {
    this.running.forEach((call) => call.cut(this.shutdown));
    this.firstWave.cut();
  }

  /** An output bound another process learned: calls here are admitted at it too (a JSON one without waiting). */
  learnedElsewhere(l: LearnedOutput): void {
    this.learned.observed(l.connectionId, l.model, l.stream, l.output);
    if (!l.stream) this.firstWave.learned(l.connectionId, l.model);
  }

  /** Renews this process's leases and writes its calls in flight on them, in one statement (now, in tests). */
  heartbeat(): Promise<void> {
    return this.serialized(true);
  }

  /** Stops its timers (the recorder, leases and allowances are closed by their owner, gateway-parts.ts). */
  close(): void {
    clearInterval(this.heartbeatTimer);
    clearInterval(this.snapshotTimer);
    clearTimeout(this.begunTimer);
  }

  /**
   * One statement at a time writes this process's leases and calls under way: the snapshot (every
   * callSnapshotMs) writes the calls that began answering or changed since their last write, on their
   * leases still held (it does not renew them); the heartbeat (a fifth of the TTL) renews every lease this
   * process holds, with the changed calls too. A stream that begins brings the snapshot forward to
   * BEGUN_WRITE_MS after it. A heartbeat or a snapshot due while a statement is in flight runs right after it.
   */
  private serialized(renewAll: boolean): Promise<void> {
    if (renewAll) this.renewDue = true;
    else this.snapshotDue = true;
    if (this.writing) return this.writing;
    this.writing = (async () => {
      try {
        do {
          const all = this.renewDue;
          this.renewDue = this.snapshotDue = false;
          await this.writeCalls(all);
        } while (this.renewDue || this.snapshotDue);
      } finally {
        this.writing = null;
      }
    })();
    return this.writing;
  }

  /** `renewAll`: the heartbeat; otherwise the snapshot, which costs nothing when no call has changed. */
  private async writeCalls(renewAll: boolean): Promise<void> {
    const { leases, deps, logger } = this;
    let leaseIds: string[] = [];
    if (renewAll) {
      leaseIds = leases.heartbeat();
      if (!leaseIds.length) return;
    }
    const now = this.clock.now();
    const rows: string[] = [];
    const included: RunningCall[] = [];
    this.running.forEach((call) => {
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
        held = await deps.repo.heartbeat(leaseIds, until, rows, now);
        leases.renewed(leaseIds, held, until.getTime());
      } else {
        // Leases are the heartbeat's to renew (or find lost); a call on one no longer held is not written.
        held = await deps.repo.snapshot(leaseIds, rows, now);
      }
      for (const call of included) if (held.has(call.leaseId!)) call.beatWritten();
    } catch (err) {
      if (renewAll) {
        logger.warn({
          msg: 'quota lease heartbeat failed: leases admit on what they hold for half their TTL',
          error: (err as Error).message,
        });
      } else {
        // The heartbeat's warning says it, should it last; the next snapshot writes these calls again.
        logger.debug({ msg: 'the snapshot of the calls under way could not be written', error: (err as Error).message });
      }
    }
  }
}

/**
 * Quota leases: the only way units are reserved, and how the gateway admits a
 * metered call without a database round trip on its path.
 *
 * A process reserves a slice of a period once, as one HELD row of
 * quota_leases (quotaRepo.acquireLease: never past what the period has available), and
 * admits calls against it in memory: a call's upper bound is carved from the
 * lease's free units, and when it settles the units it consumed leave the
 * lease's hold (`take`) in the statement that records the call
 * (src/domain/recording/settlement-sql.ts). So the period is never overspent, across any number of
 * processes: what a process admits it already holds.
 *
 * - A lease too small for a call is extended by what is missing plus headroom
 *   (LEASE_CALLS bounds, doubled at each extension of the same lease up to
 *   MAX_LEASE_CALLS: a busy access's lease is extended a few times, not once
 *   every sixteen calls; always at most an eighth of what the period has beyond
 *   the need) in one statement; calls that arrive meanwhile wait for it. When the
 *   period cannot cover the missing part, the call is refused (429).
 * - A call that consumed more than its lease held (an upstream that answered
 *   past the call's bound: charged what it used, the excess an ADJUSTMENT)
 *   makes the period's next extension wait until its record is written, so the
 *   extension sees that consumption. Overspend is then bounded by the excess of
 *   the calls already running when the quota ran out.
 * - A refusal is remembered for REFUSAL_MEMORY_MS per period: while what the
 *   period had then (plus the lease's free units now) cannot cover a call, the
 *   call is refused without a database round trip (a client hammering at an
 *   exhausted quota would otherwise cost one or two statements per call,
 *   queued behind each other per period). A lease of this process released on the period forgets
 *   it; units another process frees, or a plan change, show within that time.
 * - A lease unused for `idleMs` (1 s) is released: its unused units return to
 *   the period, after the records of its calls are written. drain() releases
 *   every lease (tests, shutdown).
 * - A lease's expires_at is renewed by its process's heartbeat (heartbeat()
 *   and renewed(), driven by src/gateway/call-meter.ts, which writes the
 *   calls in flight in the same statement), and by an extension. A call is
 *   admitted only on a lease with at least half its TTL left, so while the
 *   database is away a process admits calls on what its leases hold for at
 *   most half a TTL. A process that dies holding one leaves it to the sweeper,
 *   which, after its TTL, charges the calls its last heartbeat wrote and
 *   returns what it still held (quota-repo.ts, reclaimExpired).
 * - What another process (or the Admin API) sees as reserved includes the
 *   leases' unused units until they are released.
 * - A plan change that splits a lease's period counts its unused units as used
 *   there and charges the new part for them; releasing the lease (or the
 *   sweeper's expiry) gives them back to the new part (quotaRepo.giveBackCarry),
 *   so none are lost. The lease stays on the old part, where its calls settle.
 */
import { withRetries } from '../../db/retry.js';
import { newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import type { Clock } from '../actor.js';
import type { QuotaRepo } from './quota-repo.js';

/** Headroom a lease asks for beyond the missing units, in call bounds. */
const LEASE_CALLS = 16n;
/** The most a lease's headroom grows to, in call bounds. */
const MAX_LEASE_CALLS = 1024n;
/** A lease takes at most this fraction of what the period has, beyond what a call needs (1/8). */
const AVAILABLE_SHARE = 8;
/** How long a refusal's figure of the period is trusted: a burst at an exhausted quota costs one statement. */
const REFUSAL_MEMORY_MS = 250;

export interface LeaseTarget {
  workspaceId: string;
  accessId: string;
  periodId: string;
}

interface Lease {
  id: string;
  target: LeaseTarget;
  /** Units this lease holds, net of the calls settled on it (written or not). */
  held: bigint;
  /** Sum of the bounds of the calls admitted and not yet settled. */
  inflight: bigint;
  /** Call bounds of headroom its next extension asks for (LEASE_CALLS, doubling). */
  headroomCalls: bigint;
  /** What the period had available outside this lease at the last database answer. */
  outside: bigint;
  /** Calls settled whose records are not written yet. */
  unwritten: number;
  expiresAtMs: number;
  lastUsedMs: number;
  /** No new admissions; released once its calls are settled and written. */
  retired: boolean;
  /**
   * The database no longer holds it (the sweeper expired it, and returned what it held): its calls'
   * records charge the period directly, none of them takes anything from it.
   */
  lost: boolean;
  releasing: boolean;
}

export interface Admission {
  readonly lease: Lease;
  readonly bound: bigint;
  settled: boolean;
  /** What it consumed beyond what its lease held (an upstream that answered past the bound), until written. */
  beyond: bigint;
}

/**
 * Units calls on a period consumed beyond their leases' hold whose records are not written yet: the
 * database does not know them, so the period looks as if it had them still. An extension waits for
 * them to be written (`caughtUp`) instead of being granted units that are already spent.
 */
interface Unwritten {
  beyond: bigint;
  caughtUp: Promise<void>;
  resolve: () => void;
}

/** Refused: `available` is what the period had; `periodOver` when it no longer covers now (ended, or split by a plan change). */
export type AdmitResult = { ok: true; admission: Admission; remaining: bigint } | { ok: false; available: bigint; periodOver: boolean };

const max = (a: bigint, b: bigint) => (a > b ? a : b);
const free = (lease: Lease) => lease.held - lease.inflight;

export type LeaseStatement = 'acquire' | 'extend' | 'renew' | 'release';

export function createQuotaLeases(deps: {
  repo: QuotaRepo;
  clock: Clock;
  logger: Logger;
  ttlMs: number;
  idleMs: number;
  /** Told of each statement a lease makes (metrics). */
  onStatement?: ((kind: LeaseStatement) => void) | undefined;
}) {
  const { repo, clock, logger, ttlMs, idleMs } = deps;
  const counted = deps.onStatement ?? (() => {});
  /** The lease admitting calls, per period. */
  const current = new Map<string, Lease>();
  /** The one acquisition or extension under way, per period: other calls wait for it. */
  const growing = new Map<string, Promise<unknown>>();
  const releases = new Set<Promise<void>>();
  /** Retired leases still waiting for their calls to end and be written. */
  const retiring = new Set<Lease>();
  /** Per period, what settled calls consumed beyond their leases and the database does not know yet. */
  const unwrittenBeyond = new Map<string, Unwritten>();
  /** The last refusal per period: what the period had available then, and until when that is trusted. */
  const refused = new Map<string, { available: bigint; untilMs: number }>();
  const requestId = `lease:${process.pid}`;

  /**
   * One statement: a new lease for the period, or more units (and a renewed
   * expiry) for the current one. `held` is null when the period could not give
   * `need`; `available` is what it had.
   */
  async function grow(target: LeaseTarget, lease: Lease | undefined, need: bigint, want: bigint) {
    const now = clock.now();
    const expiresAt = new Date(now.getTime() + ttlMs);
    if (!lease) {
      const id = newId();
      counted('acquire');
      const answer = await repo.acquireLease({ id, ...target, need, want, share: AVAILABLE_SHARE, requestId, now, expiresAt });
      if (answer.held !== null) {
        current.set(target.periodId, {
          id,
          target,
          held: answer.held,
          inflight: 0n,
          headroomCalls: LEASE_CALLS,
          outside: answer.remaining!,
          unwritten: 0,
          expiresAtMs: expiresAt.getTime(),
          lastUsedMs: now.getTime(),
          retired: false,
          lost: false,
          releasing: false,
        });
      }
      return answer;
    }
    counted('extend');
    const answer = await repo.extendLease({ leaseId: lease.id, ...target, need, want, share: AVAILABLE_SHARE, now, expiresAt });
    if (!answer.leased) {
      lose(lease);
    } else if (answer.held !== null) {
      lease.held += answer.held;
      if (lease.headroomCalls < MAX_LEASE_CALLS) lease.headroomCalls *= 2n;
      lease.outside = answer.remaining!;
      lease.expiresAtMs = expiresAt.getTime();
    } else if (answer.periodOver) {
      // Its period ended or was split: no call is admitted on it any more; it is released once its calls end.
      retire(lease);
    }
    return answer;
  }

  /** Expired by the sweeper: whatever it held went back to the period. */
  function lose(lease: Lease): void {
    if (lease.lost) return;
    lease.lost = true;
    lease.held = 0n;
    if (!lease.retired) retire(lease);
    else maybeRelease(lease);
  }

  function retire(lease: Lease): void {
    lease.retired = true;
    retiring.add(lease);
    if (current.get(lease.target.periodId) === lease) current.delete(lease.target.periodId);
    maybeRelease(lease);
  }

  function maybeRelease(lease: Lease): void {
    if (!lease.retired || lease.releasing || lease.inflight > 0n || lease.unwritten > 0) return;
    lease.releasing = true;
    retiring.delete(lease);
    if (lease.lost) return;
    counted('release');
    const done = withRetries(() => repo.releaseLease(lease.id, clock.now()))
      // Its unused units are back in the period: a refusal remembered there no longer holds.
      .then(() => void refused.delete(lease.target.periodId))
      .catch((err: Error) => {
        logger.error({
          msg: 'could not release a quota lease; the sweeper returns it after its TTL',
          leaseId: lease.id,
          error: err.message,
        });
      })
      .finally(() => releases.delete(done));
    releases.add(done);
  }

  function admitOn(lease: Lease, bound: bigint): AdmitResult {
    lease.inflight += bound;
    lease.lastUsedMs = clock.now().getTime();
    return { ok: true, admission: { lease, bound, settled: false, beyond: 0n }, remaining: max(lease.outside + free(lease), 0n) };
  }

  const idleTimer = setInterval(
    () => {
      const nowMs = clock.now().getTime();
      for (const lease of [...current.values()]) {
        if (lease.inflight === 0n && !growing.has(lease.target.periodId) && nowMs - lease.lastUsedMs >= idleMs) retire(lease);
      }
      for (const [periodId, known] of refused) if (known.untilMs <= nowMs) refused.delete(periodId);
    },
    // Often enough to release idle leases on time.
    Math.max(10, Math.floor(idleMs / 2)),
  );
  idleTimer.unref();

  return {
    /**
     * Admits a call of at most `bound` units on the period, or says how much is
     * available. No database round trip while the process's lease covers it.
     */
    async admit(target: LeaseTarget, bound: bigint): Promise<AdmitResult> {
      let exact = false;
      for (;;) {
        const lease = current.get(target.periodId);
        const renew = lease !== undefined && lease.expiresAtMs - clock.now().getTime() < ttlMs / 2;
        if (lease && !renew && free(lease) >= bound) return admitOn(lease, bound);
        const pending = growing.get(target.periodId);
        if (pending) {
          await pending.catch(() => {});
          continue;
        }
        const owed = unwrittenBeyond.get(target.periodId);
        if (owed) {
          // Calls here consumed past their bounds and their records are on their way: the period's
          // figures in the database are ahead of them until they land.
          await owed.caughtUp;
          continue;
        }
        const need = lease ? max(bound - free(lease), 0n) : bound;
        const known = refused.get(target.periodId);
        if (known && known.untilMs > clock.now().getTime() && need > known.available) {
          return { ok: false, available: known.available + (lease ? max(free(lease), 0n) : 0n), periodOver: false };
        }
        const want = exact ? need : need + max(bound * (lease?.headroomCalls ?? LEASE_CALLS), lease?.inflight ?? 0n);
        const growth = grow(target, lease, need, want);
        growing.set(target.periodId, growth);
        let answer: Awaited<typeof growth>;
        try {
          answer = await growth;
        } finally {
          growing.delete(target.periodId);
        }
        if (answer.held !== null || lease?.lost) continue;
        if (answer.periodOver) return { ok: false, available: 0n, periodOver: true };
        // Not enough in the period for the missing part. A stale estimate of the share can ask for too
        // much under contention: one more try asking only for what is missing.
        if (!exact && answer.available >= need) {
          exact = true;
          continue;
        }
        refused.set(target.periodId, { available: answer.available, untilMs: clock.now().getTime() + REFUSAL_MEMORY_MS });
        return { ok: false, available: answer.available + (lease ? max(free(lease), 0n) : 0n), periodOver: false };
      }
    },

    /**
     * The call is over: `units` consumed (null: nothing charged). Returns the
     * units its lease gives up (`take`); call written() once its record is written.
     */
    settle(admission: Admission, units: bigint | null): bigint {
      if (admission.settled) throw new Error('a quota admission is settled once');
      admission.settled = true;
      const lease = admission.lease;
      lease.inflight -= admission.bound;
      lease.unwritten++;
      lease.lastUsedMs = clock.now().getTime();
      let take = 0n;
      if (units !== null && !lease.lost) {
        const left = max(free(lease), 0n);
        take = units < left ? units : left;
        lease.held -= take;
      }
      if (units !== null && units > take) {
        admission.beyond = units - take;
        const periodId = lease.target.periodId;
        let owed = unwrittenBeyond.get(periodId);
        if (!owed) {
          let resolve!: () => void;
          const caughtUp = new Promise<void>((r) => (resolve = r));
          owed = { beyond: 0n, caughtUp, resolve };
          unwrittenBeyond.set(periodId, owed);
        }
        owed.beyond += admission.beyond;
      }
      return take;
    },

    /** What a call on the period would see as available now, while this process holds a lease on it. */
    remaining(periodId: string): bigint | undefined {
      const lease = current.get(periodId);
      return lease ? max(lease.outside + free(lease), 0n) : undefined;
    },

    /** The leases this process holds in the database (not released, not lost), for its heartbeat to renew. */
    heartbeat(): string[] {
      const ids: string[] = [];
      for (const lease of current.values()) if (!lease.lost) ids.push(lease.id);
      for (const lease of retiring) if (!lease.lost && !lease.releasing) ids.push(lease.id);
      if (ids.length) counted('renew');
      return ids;
    },

    /**
     * The heartbeat's answer: of the leases it named, those still HELD now expire at `untilMs`; the others
     * were expired by the sweeper (their process was taken for dead) and are lost.
     */
    renewed(named: string[], held: Set<string>, untilMs: number): void {
      const byId = new Map<string, Lease>();
      for (const lease of current.values()) byId.set(lease.id, lease);
      for (const lease of retiring) byId.set(lease.id, lease);
      for (const id of named) {
        const lease = byId.get(id);
        if (!lease) continue;
        if (held.has(id)) lease.expiresAtMs = Math.max(lease.expiresAtMs, untilMs);
        else lose(lease);
      }
    },

    /** The record of a call settled on this lease is written, spooled, or given up. */
    written(admission: Admission): void {
      admission.lease.unwritten--;
      if (admission.beyond > 0n) {
        const periodId = admission.lease.target.periodId;
        const owed = unwrittenBeyond.get(periodId)!;
        owed.beyond -= admission.beyond;
        if (owed.beyond <= 0n) {
          unwrittenBeyond.delete(periodId);
          owed.resolve();
        }
      }
      maybeRelease(admission.lease);
    },

    /**
     * Releases every lease (tests, shutdown), each once its calls are over and written: a call
     * whose answer has reached its client may not be recorded yet, so this waits for it too.
     */
    async drain(): Promise<void> {
      for (const lease of [...current.values()]) retire(lease);
      while (releases.size || retiring.size) {
        if (releases.size) await Promise.allSettled([...releases]);
        else await new Promise((r) => setTimeout(r, 5));
      }
    },

    close(): void {
      clearInterval(idleTimer);
    },
  };
}

export type QuotaLeases = ReturnType<typeof createQuotaLeases>;

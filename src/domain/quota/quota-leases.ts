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
 *
 * Here: a call's admission and settlement. The leases' state, the constants named above and how a lease grows,
 * retires, is released or lost: lease-state.ts.
 */
import { bindDeps } from '../bind.js';
import {
  close,
  drain,
  free,
  grow,
  heartbeat,
  LEASE_CALLS,
  max,
  maybeRelease,
  renewed,
  retireIdle,
  type Lease,
  type LeaseDeps,
  type Leases,
  type LeaseTarget,
} from './lease-state.js';

/** How long a refusal's figure of the period is trusted: a burst at an exhausted quota costs one statement. */
const REFUSAL_MEMORY_MS = 250;

export interface Admission {
  readonly lease: Lease;
  readonly bound: bigint;
  settled: boolean;
  /** What it consumed beyond what its lease held (an upstream that answered past the bound), until written. */
  beyond: bigint;
}

/** Refused: `available` is what the period had; `periodOver` when it no longer covers now (ended, or split by a plan change). */
type AdmitResult = { ok: true; admission: Admission; remaining: bigint } | { ok: false; available: bigint; periodOver: boolean };

function admitOn(leases: Leases, lease: Lease, bound: bigint): AdmitResult {
  lease.inflight += bound;
  lease.lastUsedMs = leases.clock.now().getTime();
  return { ok: true, admission: { lease, bound, settled: false, beyond: 0n }, remaining: max(lease.outside + free(lease), 0n) };
}

/**
 * What a call must wait for before it may grow the period's lease: another call's acquisition or extension, or the
 * records of calls that consumed past their bounds (the period's figures in the database are ahead of them until
 * they land).
 */
function pendingOn(leases: Leases, periodId: string): Promise<unknown> | undefined {
  const growth = leases.growing.get(periodId);
  if (growth) return growth.catch(() => {});
  return leases.unwrittenBeyond.get(periodId)?.caughtUp;
}

/** A refusal of `need` from what the period had at its last refusal, while that is trusted. */
function refusedFromMemory(leases: Leases, periodId: string, lease: Lease | undefined, need: bigint): AdmitResult | undefined {
  const known = leases.refused.get(periodId);
  if (!known || known.untilMs <= leases.clock.now().getTime() || need <= known.available) return undefined;
  return { ok: false, available: known.available + (lease ? max(free(lease), 0n) : 0n), periodOver: false };
}

/** Refused: the period had `available`, remembered for REFUSAL_MEMORY_MS. */
function refuse(leases: Leases, periodId: string, lease: Lease | undefined, available: bigint): AdmitResult {
  leases.refused.set(periodId, { available, untilMs: leases.clock.now().getTime() + REFUSAL_MEMORY_MS });
  return { ok: false, available: available + (lease ? max(free(lease), 0n) : 0n), periodOver: false };
}

/**
 * Admits a call of at most `bound` units on the period, or says how much is
 * available. No database round trip while the process's lease covers it.
 */
async function admit(leases: Leases, target: LeaseTarget, bound: bigint): Promise<AdmitResult> {
  let exact = false;
  for (;;) {
    const lease = leases.current.get(target.periodId);
    const renew = lease !== undefined && lease.expiresAtMs - leases.clock.now().getTime() < leases.ttlMs / 2;
    if (lease && !renew && free(lease) >= bound) return admitOn(leases, lease, bound);
    const pending = pendingOn(leases, target.periodId);
    if (pending) {
      await pending;
      continue;
    }
    const need = lease ? max(bound - free(lease), 0n) : bound;
    const remembered = refusedFromMemory(leases, target.periodId, lease, need);
    if (remembered) return remembered;
    const want = exact ? need : need + max(bound * (lease?.headroomCalls ?? LEASE_CALLS), lease?.inflight ?? 0n);
    const answer = await grow(leases, target, lease, need, want);
    if (answer.held !== null || lease?.lost) continue;
    if (answer.periodOver) return { ok: false, available: 0n, periodOver: true };
    // Not enough in the period for the missing part. A stale estimate of the share can ask for too
    // much under contention: one more try asking only for what is missing.
    if (!exact && answer.available >= need) {
      exact = true;
      continue;
    }
    return refuse(leases, target.periodId, lease, answer.available);
  }
}

/** Units consumed beyond its lease's hold by a call on the period, owed until its record is written. */
function owe(leases: Leases, periodId: string, beyond: bigint): void {
  let owed = leases.unwrittenBeyond.get(periodId);
  if (!owed) {
    let resolve!: () => void;
    const caughtUp = new Promise<void>((r) => (resolve = r));
    owed = { beyond: 0n, caughtUp, resolve };
    leases.unwrittenBeyond.set(periodId, owed);
  }
  owed.beyond += beyond;
}

/**
 * The call is over: `units` consumed (null: nothing charged). Returns the
 * units its lease gives up (`take`); call written() once its record is written.
 */
function settle(leases: Leases, admission: Admission, units: bigint | null): bigint {
  if (admission.settled) throw new Error('a quota admission is settled once');
  admission.settled = true;
  const lease = admission.lease;
  lease.inflight -= admission.bound;
  lease.unwritten++;
  lease.lastUsedMs = leases.clock.now().getTime();
  let take = 0n;
  if (units !== null && !lease.lost) {
    const left = max(free(lease), 0n);
    take = units < left ? units : left;
    lease.held -= take;
  }
  if (units !== null && units > take) {
    admission.beyond = units - take;
    owe(leases, lease.target.periodId, admission.beyond);
  }
  return take;
}

/** What a call on the period would see as available now, while this process holds a lease on it. */
function remaining(leases: Leases, periodId: string): bigint | undefined {
  const lease = leases.current.get(periodId);
  return lease ? max(lease.outside + free(lease), 0n) : undefined;
}

/** The record of a call settled on this lease is written, spooled, or given up. */
function written(leases: Leases, admission: Admission): void {
  admission.lease.unwritten--;
  if (admission.beyond > 0n) {
    const periodId = admission.lease.target.periodId;
    const owed = leases.unwrittenBeyond.get(periodId)!;
    owed.beyond -= admission.beyond;
    if (owed.beyond <= 0n) {
      leases.unwrittenBeyond.delete(periodId);
      owed.resolve();
    }
  }
  maybeRelease(leases, admission.lease);
}

export function createQuotaLeases(deps: LeaseDeps) {
  const leases: Leases = {
    ...deps,
    counted: deps.onStatement ?? (() => {}),
    current: new Map(),
    growing: new Map(),
    releases: new Set(),
    retiring: new Set(),
    unwrittenBeyond: new Map(),
    refused: new Map(),
    requestId: `lease:${process.pid}`,
    idleTimer: undefined,
  };
  // Often enough to release idle leases on time.
  leases.idleTimer = setInterval(() => retireIdle(leases), Math.max(10, Math.floor(deps.idleMs / 2)));
  leases.idleTimer.unref();
  return bindDeps(leases, { admit, settle, remaining, heartbeat, renewed, written, drain, close });
}

export type QuotaLeases = ReturnType<typeof createQuotaLeases>;

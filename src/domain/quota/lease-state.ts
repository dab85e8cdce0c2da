/**
 * What a process keeps of its quota leases (quota-leases.ts), and how a lease changes: it grows (acquired, then
 * extended, one statement each), retires (idle, its period over, or the process draining), is released once its
 * calls are written, or is lost (the sweeper expired it); the heartbeat renews the leases still held.
 */
import { withRetries } from '../../db/retry.js';
import { newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import type { Clock } from '../actor.js';
import type { QuotaRepo } from './quota-repo.js';

/** Headroom a lease asks for beyond the missing units, in call bounds. */
export const LEASE_CALLS = 16n;
/** The most a lease's headroom grows to, in call bounds. */
const MAX_LEASE_CALLS = 1024n;
/** A lease takes at most this fraction of what the period has, beyond what a call needs (1/8). */
const AVAILABLE_SHARE = 8;

export interface LeaseTarget {
  workspaceId: string;
  accessId: string;
  periodId: string;
}

export interface Lease {
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

export const max = (a: bigint, b: bigint) => (a > b ? a : b);
export const free = (lease: Lease) => lease.held - lease.inflight;

type LeaseStatement = 'acquire' | 'extend' | 'renew' | 'release';

export interface LeaseDeps {
  repo: QuotaRepo;
  clock: Clock;
  logger: Logger;
  ttlMs: number;
  idleMs: number;
  /** Told of each statement a lease makes (metrics). */
  onStatement?: ((kind: LeaseStatement) => void) | undefined;
  /** Told of each lease of this process released on a period (its unused units back there). */
  onReleased?: ((periodId: string) => void) | undefined;
}

/** A process's quota leases: their dependencies and what it keeps of them, for its lifetime. */
export interface Leases extends LeaseDeps {
  counted: (kind: LeaseStatement) => void;
  /** The lease admitting calls, per period. */
  current: Map<string, Lease>;
  /** The one acquisition or extension under way, per period: other calls wait for it. */
  growing: Map<string, Promise<unknown>>;
  releases: Set<Promise<void>>;
  /** Retired leases still waiting for their calls to end and be written. */
  retiring: Set<Lease>;
  /** Per period, what settled calls consumed beyond their leases and the database does not know yet. */
  unwrittenBeyond: Map<string, Unwritten>;
  /** The last refusal per period: what the period had available then, and until when that is trusted. */
  refused: Map<string, { available: bigint; untilMs: number }>;
  requestId: string;
  idleTimer: NodeJS.Timeout | undefined;
}

type GrowAnswer = { held: bigint | null; remaining: bigint | null; available: bigint; periodOver?: boolean };

/** A new lease on the period, admitting calls once the database gave it at least `need`. */
async function acquire(leases: Leases, target: LeaseTarget, need: bigint, want: bigint, now: Date, expiresAt: Date): Promise<GrowAnswer> {
  const id = newId();
  leases.counted('acquire');
  const answer = await leases.repo.acquireLease({
    id,
    ...target,
    need,
    want,
    share: AVAILABLE_SHARE,
    requestId: leases.requestId,
    now,
    expiresAt,
  });
  if (answer.held === null) return answer;
  leases.current.set(target.periodId, {
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
  return answer;
}

/** More units (and a renewed expiry) for the period's current lease. */
async function extend(
  leases: Leases,
  target: LeaseTarget,
  lease: Lease,
  need: bigint,
  want: bigint,
  now: Date,
  expiresAt: Date,
): Promise<GrowAnswer> {
  leases.counted('extend');
  const answer = await leases.repo.extendLease({ leaseId: lease.id, ...target, need, want, share: AVAILABLE_SHARE, now, expiresAt });
  if (!answer.leased) {
    lose(leases, lease);
  } else if (answer.held !== null) {
    lease.held += answer.held;
    if (lease.headroomCalls < MAX_LEASE_CALLS) lease.headroomCalls *= 2n;
    lease.outside = answer.remaining!;
    lease.expiresAtMs = expiresAt.getTime();
  } else if (answer.periodOver) {
    // Its period ended or was split: no call is admitted on it any more; it is released once its calls end.
    retire(leases, lease);
  }
  return answer;
}

/**
 * One statement: a new lease for the period, or more units (and a renewed expiry) for the current one. `held` is
 * null when the period could not give `need`; `available` is what it had. Other calls on the period wait for it.
 */
export async function grow(leases: Leases, target: LeaseTarget, lease: Lease | undefined, need: bigint, want: bigint): Promise<GrowAnswer> {
  const now = leases.clock.now();
  const expiresAt = new Date(now.getTime() + leases.ttlMs);
  const growth = lease ? extend(leases, target, lease, need, want, now, expiresAt) : acquire(leases, target, need, want, now, expiresAt);
  leases.growing.set(target.periodId, growth);
  try {
    return await growth;
  } finally {
    leases.growing.delete(target.periodId);
  }
}

/** Expired by the sweeper: whatever it held went back to the period. */
function lose(leases: Leases, lease: Lease): void {
  if (lease.lost) return;
  lease.lost = true;
  lease.held = 0n;
  if (!lease.retired) retire(leases, lease);
  else maybeRelease(leases, lease);
}

function retire(leases: Leases, lease: Lease): void {
  lease.retired = true;
  leases.retiring.add(lease);
  if (leases.current.get(lease.target.periodId) === lease) leases.current.delete(lease.target.periodId);
  maybeRelease(leases, lease);
}

export function maybeRelease(leases: Leases, lease: Lease): void {
  if (!lease.retired || lease.releasing || lease.inflight > 0n || lease.unwritten > 0) return;
  lease.releasing = true;
  leases.retiring.delete(lease);
  if (lease.lost) return;
  leases.counted('release');
  const done = withRetries(() => leases.repo.releaseLease(lease.id, leases.clock.now()))
    // Its unused units are back in the period: a refusal remembered there no longer holds.
    .then(() => {
      leases.refused.delete(lease.target.periodId);
      leases.onReleased?.(lease.target.periodId);
    })
    .catch((err: Error) => {
      leases.logger.error({
        msg: 'could not release a quota lease; the sweeper returns it after its TTL',
        leaseId: lease.id,
        error: err.message,
      });
    })
    .finally(() => leases.releases.delete(done));
  leases.releases.add(done);
}

/** The leases this process holds in the database (not released, not lost), for its heartbeat to renew. */
export function heartbeat(leases: Leases): string[] {
  const ids: string[] = [];
  for (const lease of leases.current.values()) if (!lease.lost) ids.push(lease.id);
  for (const lease of leases.retiring) if (!lease.lost && !lease.releasing) ids.push(lease.id);
  if (ids.length) leases.counted('renew');
  return ids;
}

/**
 * The heartbeat's answer: of the leases it named, those still HELD now expire at `untilMs`; the others
 * were expired by the sweeper (their process was taken for dead) and are lost.
 */
export function renewed(leases: Leases, named: string[], held: Set<string>, untilMs: number): void {
  const byId = new Map<string, Lease>();
  for (const lease of leases.current.values()) byId.set(lease.id, lease);
  for (const lease of leases.retiring) byId.set(lease.id, lease);
  for (const id of named) {
    const lease = byId.get(id);
    if (!lease) continue;
    if (held.has(id)) lease.expiresAtMs = Math.max(lease.expiresAtMs, untilMs);
    else lose(leases, lease);
  }
}

/**
 * Releases every lease (tests, shutdown), each once its calls are over and written: a call
 * whose answer has reached its client may not be recorded yet, so this waits for it too.
 */
export async function drain(leases: Leases): Promise<void> {
  for (const lease of [...leases.current.values()]) retire(leases, lease);
  while (leases.releases.size || leases.retiring.size) {
    if (leases.releases.size) await Promise.allSettled([...leases.releases]);
    else await new Promise((r) => setTimeout(r, 5));
  }
}

export function close(leases: Leases): void {
  clearInterval(leases.idleTimer);
}

/** The idle timer's pass: leases unused for `idleMs` retire, and refusals past their memory are forgotten. */
export function retireIdle(leases: Leases): void {
  const nowMs = leases.clock.now().getTime();
  for (const lease of [...leases.current.values()]) {
    if (lease.inflight === 0n && !leases.growing.has(lease.target.periodId) && nowMs - lease.lastUsedMs >= leases.idleMs) {
      retire(leases, lease);
    }
  }
  for (const [periodId, known] of leases.refused) if (known.untilMs <= nowMs) leases.refused.delete(periodId);
}

/**
 * Quota leases: how the gateway admits a metered call without a database round
 * trip on its path.
 *
 * A process reserves a slice of a period once, as one HELD reservation of kind
 * LEASE (the same reserve rule as a call: never past what the period has
 * available), and admits calls against it in memory: a call's upper bound is
 * carved from the lease's free units, and when it settles the units it consumed
 * leave the lease's hold (`take`) in the statement that records the call
 * (src/domain/quota/settlement-sql.ts). So the period is never overspent, across
 * any number of processes: what a process admits it already holds.
 *
 * - A lease too small for a call is extended by what is missing plus headroom
 *   (LEASE_CALLS bounds, at most an eighth of what the period has beyond the
 *   need) in one statement; calls that arrive meanwhile wait for it. When the
 *   period cannot cover the missing part, the call is refused (429), as a call
 *   reservation would be.
 * - A lease unused for `idleMs` (1 s) is released: its unused units return to
 *   the period, after the records of its calls are written. drain() releases
 *   every lease (tests, shutdown).
 * - A lease's expires_at is renewed when a call finds it past half its TTL; a
 *   process that dies holding one leaves it to the sweeper, which returns what
 *   it still held (the calls the dead process did not record go uncharged, as
 *   with call reservations).
 * - What another process (or the Admin API) sees as reserved includes the
 *   leases' unused units until they are released.
 */
import type { Knex } from 'knex';
import type { Clock } from '../domain/actor.js';
import { newId } from '../ids.js';
import type { Logger } from '../observability/logger.js';

/** Headroom a lease asks for beyond the missing units, in call bounds. */
const LEASE_CALLS = 16n;
/** A lease never takes more than this fraction of what the period has beyond the need (1/8). */
const AVAILABLE_SHARE_DIVISOR = 8;
const RELEASE_RETRY_DELAYS_MS = [50, 250, 1000, 4000];

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
  /** What the period had available outside this lease at the last database answer. */
  outside: bigint;
  /** Calls settled whose records are not written yet. */
  unwritten: number;
  expiresAtMs: number;
  lastUsedMs: number;
  /** No new admissions; released once its calls are settled and written. */
  retired: boolean;
  /** The database no longer holds it (the sweeper expired it): its calls are charged nothing. */
  lost: boolean;
  releasing: boolean;
  extending: Promise<void> | null;
}

export interface Admission {
  readonly lease: Lease;
  readonly bound: bigint;
  settled: boolean;
}

export type AdmitResult = { ok: true; admission: Admission; remaining: bigint } | { ok: false; available: bigint };

interface DbAnswer {
  avail: bigint | null;
  x: bigint | null;
  remaining: bigint | null;
  leased: number;
}

const ACQUIRE = `
with per as (
  select id, granted_units - reserved_units - consumed_units as avail, period_start <= :now and period_end > :now as current
    from quota_periods where id = :periodId and workspace_access_id = :accessId
), want as (
  select id, greatest(cast(:need as bigint), least(cast(:want as bigint), avail / ${AVAILABLE_SHARE_DIVISOR})) as x
    from per where current
), held as (
  update quota_periods qp set reserved_units = qp.reserved_units + want.x
    from want where qp.id = want.id and qp.granted_units - qp.reserved_units - qp.consumed_units >= want.x
  returning qp.id, want.x, qp.granted_units - qp.reserved_units - qp.consumed_units as remaining
), lease as (
  insert into quota_reservations (id, workspace_id, workspace_access_id, quota_period_id, reserved_units, consumed_units,
                                  status, request_id, created_at, expires_at, kind)
  select cast(:leaseId as uuid), cast(:workspaceId as uuid), cast(:accessId as uuid), held.id, held.x, 0, 'HELD',
         cast(:requestId as text), cast(:now as timestamptz), cast(:expiresAt as timestamptz), 'LEASE'
    from held
  returning id
)
select (select avail from per) as avail, (select x from held) as x, (select remaining from held) as remaining,
       (select count(*) from lease)::int as leased`;

/** The lease row is locked first, so the sweeper (skip locked) cannot expire it under the extension. */
const EXTEND = `
with lk as (
  select id from quota_reservations where id = :leaseId and status = 'HELD' for update
), per as (
  select id, granted_units - reserved_units - consumed_units as avail, period_start <= :now and period_end > :now as current
    from quota_periods where id = :periodId and workspace_access_id = :accessId
), want as (
  select per.id, greatest(cast(:need as bigint), least(cast(:want as bigint), per.avail / ${AVAILABLE_SHARE_DIVISOR}), 0) as x
    from per, lk where per.current
), held as (
  update quota_periods qp set reserved_units = qp.reserved_units + want.x
    from want where qp.id = want.id and (want.x = 0 or qp.granted_units - qp.reserved_units - qp.consumed_units >= want.x)
  returning qp.id, want.x, qp.granted_units - qp.reserved_units - qp.consumed_units as remaining
), ext as (
  update quota_reservations q set reserved_units = q.reserved_units + held.x, expires_at = cast(:expiresAt as timestamptz)
    from held where q.id = cast(:leaseId as uuid)
  returning q.id
)
select (select avail from per) as avail, (select x from held) as x, (select remaining from held) as remaining,
       (select count(*) from lk)::int as leased`;

const RELEASE = `
with l as (
  update quota_reservations set status = 'RELEASED', settled_at = :now
   where id = :leaseId and status = 'HELD'
  returning quota_period_id, reserved_units
)
update quota_periods qp set reserved_units = qp.reserved_units - l.reserved_units from l where qp.id = l.quota_period_id`;

export function createQuotaLeases(deps: { db: Knex; clock: Clock; logger: Logger; ttlMs: number; idleMs: number }) {
  const { db, clock, logger, ttlMs, idleMs } = deps;
  /** The lease admitting calls, per period. */
  const current = new Map<string, Lease>();
  const acquiring = new Map<string, Promise<void>>();
  const releases = new Set<Promise<void>>();
  const requestId = `lease:${process.pid}`;

  const free = (lease: Lease) => lease.held - lease.inflight;
  const max = (a: bigint, b: bigint) => (a > b ? a : b);

  async function query(sql: string, params: Record<string, unknown>): Promise<DbAnswer> {
    const result = await db.raw(sql, params);
    return (result.rows as DbAnswer[])[0]!;
  }

  function stringify(params: Record<string, unknown>): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const k in params) out[k] = typeof params[k] === 'bigint' ? String(params[k]) : params[k];
    return out;
  }

  /** A new lease of at least `need` units; false when the period cannot cover `need`. */
  async function acquire(target: LeaseTarget, need: bigint, want: bigint): Promise<DbAnswer> {
    const now = clock.now();
    const id = newId();
    const answer = await query(
      ACQUIRE,
      stringify({
        ...target,
        leaseId: id,
        need,
        want,
        now,
        expiresAt: new Date(now.getTime() + ttlMs),
        requestId,
      }),
    );
    if (answer.x !== null) {
      const lease: Lease = {
        id,
        target,
        held: BigInt(answer.x),
        inflight: 0n,
        outside: BigInt(answer.remaining!),
        unwritten: 0,
        expiresAtMs: now.getTime() + ttlMs,
        lastUsedMs: now.getTime(),
        retired: false,
        lost: false,
        releasing: false,
        extending: null,
      };
      current.set(target.periodId, lease);
    }
    return answer;
  }

  async function extend(lease: Lease, need: bigint, want: bigint): Promise<DbAnswer> {
    const now = clock.now();
    const expiresAtMs = now.getTime() + ttlMs;
    const answer = await query(
      EXTEND,
      stringify({ ...lease.target, leaseId: lease.id, need, want, now, expiresAt: new Date(expiresAtMs) }),
    );
    if (!answer.leased) {
      // Expired by the sweeper: whatever it held went back to the period.
      lease.lost = true;
      lease.held = 0n;
      retire(lease);
    } else if (answer.x !== null) {
      lease.held += BigInt(answer.x);
      lease.outside = BigInt(answer.remaining!);
      lease.expiresAtMs = expiresAtMs;
    }
    return answer;
  }

  function retire(lease: Lease): void {
    lease.retired = true;
    if (current.get(lease.target.periodId) === lease) current.delete(lease.target.periodId);
    maybeRelease(lease);
  }

  function maybeRelease(lease: Lease): void {
    if (!lease.retired || lease.releasing || lease.inflight > 0n || lease.unwritten > 0) return;
    lease.releasing = true;
    if (lease.lost) return;
    const done = release(lease).finally(() => releases.delete(done));
    releases.add(done);
  }

  async function release(lease: Lease): Promise<void> {
    for (let i = 0; ; i++) {
      try {
        await db.raw(RELEASE, { leaseId: lease.id, now: clock.now() });
        return;
      } catch (err) {
        if (i >= RELEASE_RETRY_DELAYS_MS.length) {
          logger.error({ msg: 'could not release a quota lease; the sweeper returns it after its TTL', leaseId: lease.id, error: (err as Error).message });
          return;
        }
        await new Promise((r) => setTimeout(r, RELEASE_RETRY_DELAYS_MS[i]));
      }
    }
  }

  function admitOn(lease: Lease, bound: bigint): AdmitResult {
    lease.inflight += bound;
    lease.lastUsedMs = clock.now().getTime();
    return { ok: true, admission: { lease, bound, settled: false }, remaining: max(lease.outside + free(lease), 0n) };
  }

  const idleTimer = setInterval(() => {
    const nowMs = clock.now().getTime();
    for (const lease of [...current.values()]) {
      if (lease.inflight === 0n && !lease.extending && nowMs - lease.lastUsedMs >= idleMs) retire(lease);
    }
  }, Math.max(10, Math.floor(idleMs / 2)));
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
        if (lease) {
          const renew = lease.expiresAtMs - clock.now().getTime() < ttlMs / 2;
          if (!renew && free(lease) >= bound) return admitOn(lease, bound);
          if (lease.extending) {
            await lease.extending;
            continue;
          }
          const need = max(bound - free(lease), 0n);
          const want = exact ? need : need + max(bound * LEASE_CALLS, lease.inflight);
          let answer!: DbAnswer;
          const extending = extend(lease, need, want).then((a) => {
            answer = a;
          });
          lease.extending = extending;
          try {
            await extending;
          } finally {
            lease.extending = null;
          }
          if (lease.lost) continue;
          if (answer.x !== null) {
            if (free(lease) >= bound) return admitOn(lease, bound);
            continue;
          }
          // Not enough in the period for the missing part. A stale estimate of the share can ask for too
          // much under contention: one more try asking only for what is missing.
          if (!exact && answer.avail !== null && BigInt(answer.avail) >= need) {
            exact = true;
            continue;
          }
          return { ok: false, available: max((answer.avail === null ? 0n : BigInt(answer.avail)) + max(free(lease), 0n), 0n) };
        }
        const pending = acquiring.get(target.periodId);
        if (pending) {
          await pending;
          continue;
        }
        let answer!: DbAnswer;
        const acquiring_ = acquire(target, bound, exact ? bound : bound * (LEASE_CALLS + 1n)).then((a) => {
          answer = a;
        });
        acquiring.set(target.periodId, acquiring_);
        try {
          await acquiring_;
        } finally {
          acquiring.delete(target.periodId);
        }
        if (answer.x !== null) continue;
        if (!exact && answer.avail !== null && BigInt(answer.avail) >= bound) {
          exact = true;
          continue;
        }
        return { ok: false, available: max(answer.avail === null ? 0n : BigInt(answer.avail), 0n) };
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
      return take;
    },

    /** The record of a call settled on this lease is written (or given up). */
    written(admission: Admission): void {
      admission.lease.unwritten--;
      maybeRelease(admission.lease);
    },

    /** Releases every lease whose calls are over (tests, shutdown); the others when their calls end. */
    async drain(): Promise<void> {
      for (const lease of [...current.values()]) retire(lease);
      while (releases.size) await Promise.allSettled([...releases]);
    },

    close(): void {
      clearInterval(idleTimer);
    },
  };
}

export type QuotaLeases = ReturnType<typeof createQuotaLeases>;

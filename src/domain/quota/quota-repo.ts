/**
 * All SQL of quota_periods and quota_leases: the gateway processes' holds on a
 * period (quota-leases.ts). Acquiring or extending one
 * is one atomic statement, so concurrent holds can never overspend a period;
 * those and the release are in lease-sql.ts, named statements on the gateway's pool.
 * The calls settled on a lease are written with their records
 * (src/domain/recording/record-sql.ts, src/records/call-repo.ts).
 */
import type { Queryable } from '../../db/database.js';
import { namedQuery, type NamedQuery } from '../../db/named-query.js';
import { bindDeps } from '../bind.js';
import { RECLAIM_EXPIRED_SQL } from '../recording/record-sql.js';
import {
  ACQUIRE_LEASE,
  acquisitionValues,
  EXTEND_LEASE,
  extensionValues,
  leaseIdleStatements,
  RELEASE_LEASE,
  releaseValues,
  type Acquisition,
  type Extension,
} from './lease-sql.js';
import type { QuotaPeriodRow } from './quota-types.js';

/**
 * A period a plan change split keeps the old plan's share of it and what the next part's
 * grant was reduced by for the use beyond that share (docs/decisions.md "Changing plan").
 */
interface PlanChangeCarry {
  share_units: bigint | null;
  carried_units: bigint;
}

/**
 * The plan-change carry: a period a plan change split charged the part after it
 * (`carried_units`) for what it used beyond its share (`share_units`). What it used then
 * included holds (a lease's unused units, a call's bound beyond what it consumes); once its
 * use has shrunk, what it no longer needs of that carry goes back to the next part, and its
 * own grant shrinks by as much: back = max(0, carried - max(0, consumed + reserved - share)).
 * Never below what it still uses or its share; a move, so nothing is minted. Depends only on
 * the rows' state, so running it again (or late) is harmless. The next part is the period of
 * the same cycle starting at its end; without one, nothing moves. Returns the units moved.
 */
async function giveBackCarry(db: Queryable, periodId: string, q: Queryable = db): Promise<bigint> {
  let first: bigint | undefined;
  // A part that was itself split again passes what it got back on to the part after it.
  for (let id: string | null = periodId; id;) {
    const step = await giveBackCarryOnce(id, q);
    first ??= step.back;
    id = step.back > 0n && step.nextCarries ? step.nextId : null;
  }
  return first ?? 0n;
}

/**
 * One step: the part's own carry comes back to the part after it (its grant grows), and that part's
 * debt shrinks by as much, so its own share (net of the debt) grows too.
 */
async function giveBackCarryOnce(periodId: string, q: Queryable): Promise<{ back: bigint; nextId: string | null; nextCarries: boolean }> {
  const result = await q.raw(
    `with o as (
       select qp.id, nx.id as next_id,
              greatest(0, qp.carried_units - greatest(0, qp.consumed_units + qp.reserved_units - qp.share_units)) as back
         from quota_periods qp
         join quota_periods nx on nx.workspace_access_id = qp.workspace_access_id and nx.period_start = qp.period_end
                              and nx.cycle_start = qp.cycle_start
        where qp.id = :periodId and qp.carried_units > 0
          for update of qp
     ), f as (
       update quota_periods qp set granted_units = qp.granted_units - o.back, carried_units = qp.carried_units - o.back
         from o where qp.id = o.id and o.back > 0
     ), t as (
       update quota_periods qp set granted_units = qp.granted_units + o.back, share_units = qp.share_units + o.back
         from o where qp.id = o.next_id and o.back > 0
       returning qp.carried_units
     )
     select (select back from o) as back, (select next_id from o) as next_id, (select carried_units > 0 from t) as next_carries`,
    { periodId },
  );
  const row = (result.rows as { back: bigint | null; next_id: string | null; next_carries: boolean | null }[])[0];
  return { back: row?.back ?? 0n, nextId: row?.next_id ?? null, nextCarries: Boolean(row?.next_carries) };
}

/**
 * What the period has available now (read after a hold failed: the hold's own snapshot may be
 * older); `over` when it no longer covers `now` (ended, or split by a plan change): nothing.
 */
async function availableUnits(periodId: string, now: Date, q: Queryable): Promise<{ available: bigint; over: boolean }> {
  const row = (await q('quota_periods').where({ id: periodId }).first()) as QuotaPeriodRow | undefined;
  if (!row || row.period_end <= now || row.period_start > now) return { available: 0n, over: true };
  const available = row.granted_units - row.reserved_units - row.consumed_units;
  return { available: available > 0n ? available : 0n, over: false };
}

/**
 * A new lease: holds units on the period by the hold rule (lease-sql.ts: at least `need`,
 * up to `want` while that is at most 1/share of what the period has) and inserts
 * the HELD lease row in the same statement. Returns what it held
 * and the period's remaining availability; held = null when the period could not
 * give `need`, with what it has available (read after the attempt).
 */
async function acquireLease(
  db: Queryable,
  query: NamedQuery,
  h: Acquisition,
): Promise<{ held: bigint | null; remaining: bigint | null; available: bigint; periodOver?: boolean }> {
  const [row] = await query<{ x: bigint | null; remaining: bigint | null }>('nexus_acquire_lease', ACQUIRE_LEASE, acquisitionValues(h));
  if (row!.x !== null) return { held: row!.x, remaining: row!.remaining, available: row!.remaining! };
  const { available, over } = await availableUnits(h.periodId, h.now, db);
  return { held: null, remaining: null, available, periodOver: over };
}

/**
 * Adds to a HELD lease what the period can give (the rule of `acquireLease`) and
 * renews its expiry; the lease row is locked first, so the sweeper (skip
 * locked) cannot expire it meanwhile. `leased` is false when the lease is no
 * longer HELD (nothing was added).
 */
async function extendLease(
  db: Queryable,
  query: NamedQuery,
  e: Extension,
): Promise<{ leased: boolean; held: bigint | null; remaining: bigint | null; available: bigint; periodOver?: boolean }> {
  const [row] = await query<{ leased: bigint; x: bigint | null; remaining: bigint | null }>(
    'nexus_extend_lease',
    EXTEND_LEASE,
    extensionValues(e),
  );
  const leased = row!.leased > 0n;
  if (row!.x !== null) return { leased, held: row!.x, remaining: row!.remaining, available: row!.remaining! };
  if (!leased) return { leased, held: null, remaining: null, available: 0n };
  const { available, over } = await availableUnits(e.periodId, e.now, db);
  return { leased, held: null, remaining: null, available, periodOver: over };
}

/**
 * A lease still HELD becomes RELEASED and what it still holds returns to its period; on a
 * period a plan change split, what that frees of its carry then goes back to the next part
 * (giveBackCarry: its own statement, so it sees a split committed while this one waited for
 * the period's lock; run again by the next hold that closes there, should this one be lost).
 * Its process released it once its calls were recorded: what its heartbeat wrote of them goes.
 */
async function releaseLease(db: Queryable, query: NamedQuery, leaseId: string, now: Date): Promise<void> {
  const [period] = await query<{ id: string; carried_units: bigint }>('nexus_release_lease', RELEASE_LEASE, releaseValues(leaseId, now));
  if (period && period.carried_units > 0n) await giveBackCarry(db, period.id);
}

async function findPeriod(db: Queryable, id: string, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
  return q('quota_periods').where({ id }).first();
}

/**
 * What the part before `period` (split from the same cycle by a plan change) charged it
 * (its carried_units), locking that part; 0 when there is none.
 */
async function carriedInto(_db: Queryable, period: QuotaPeriodRow, q: Queryable): Promise<bigint> {
  const before = (await q('quota_periods')
    .where({ workspace_access_id: period.workspace_access_id, period_end: period.period_start, cycle_start: period.cycle_start })
    .forUpdate()
    .first()) as QuotaPeriodRow | undefined;
  return before?.carried_units ?? 0n;
}

async function findPeriodForUpdate(_db: Queryable, id: string, q: Queryable): Promise<QuotaPeriodRow | undefined> {
  return q('quota_periods').where({ id }).forUpdate().first();
}

/** The period of the access covering `at`: [period_start, period_end). */
async function currentPeriod(db: Queryable, accessId: string, at: Date, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
  return q('quota_periods')
    .where({ workspace_access_id: accessId })
    .where('period_start', '<=', at)
    .where('period_end', '>', at)
    .orderBy('period_start', 'desc')
    .first();
}

/** The access's earliest period starting after `at`. */
async function firstPeriodAfter(db: Queryable, accessId: string, at: Date, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
  return q('quota_periods').where({ workspace_access_id: accessId }).where('period_start', '>', at).orderBy('period_start').first();
}

async function latestPeriod(db: Queryable, accessId: string, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
  return q('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_end', 'desc').first();
}

async function findPeriodByStart(db: Queryable, accessId: string, start: Date, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
  return q('quota_periods').where({ workspace_access_id: accessId, period_start: start }).first();
}

async function findPeriodByExternalKey(
  db: Queryable,
  accessId: string,
  key: string,
  q: Queryable = db,
): Promise<QuotaPeriodRow | undefined> {
  return q('quota_periods').where({ workspace_access_id: accessId, external_period_key: key }).first();
}

/** Periods of the access that intersect [start, end). */
async function overlapping(db: Queryable, accessId: string, start: Date, end: Date, q: Queryable = db): Promise<QuotaPeriodRow[]> {
  return q('quota_periods').where({ workspace_access_id: accessId }).where('period_start', '<', end).where('period_end', '>', start);
}

/** Ends the access's non-billing periods that straddle `at` there (their grant stays history). */
async function endUnbilledPeriodsAt(db: Queryable, accessId: string, at: Date, q: Queryable = db): Promise<number> {
  return q('quota_periods')
    .where({ workspace_access_id: accessId })
    .whereNot({ source: 'billing' })
    .where('period_start', '<', at)
    .where('period_end', '>', at)
    .update({ period_end: at });
}

/** Ends at `at` the billed periods running then whose external key starts with `keyPrefix` (one subscription's). */
async function endBilledPeriodsAt(db: Queryable, accessId: string, at: Date, keyPrefix: string, q: Queryable = db): Promise<number> {
  return (
    q('quota_periods')
      .where({ workspace_access_id: accessId, source: 'billing' })
      // Not LIKE: a subscription id may hold `_`, a LIKE wildcard.
      .whereRaw('left(external_period_key, ?) = ?', [keyPrefix.length, keyPrefix])
      .where('period_start', '<', at)
      .where('period_end', '>', at)
      .update({ period_end: at })
  );
}

async function insertPeriod(db: Queryable, row: QuotaPeriodRow, q: Queryable = db): Promise<QuotaPeriodRow> {
  const [created] = await q('quota_periods').insert(row).returning('*');
  return created as QuotaPeriodRow;
}

async function updatePeriod(
  db: Queryable,
  id: string,
  patch: Partial<
    Omit<QuotaPeriodRow, 'id' | 'workspace_id' | 'workspace_access_id' | 'reserved_units' | 'consumed_units' | 'created_at'> &
      PlanChangeCarry
  >,
  q: Queryable = db,
) {
  const [updated] = await q('quota_periods').where({ id }).update(patch).returning('*');
  return updated as QuotaPeriodRow;
}

/**
 * Whether reclaimExpired has a lease to take: one HELD past its expiry at `now` (with `all`, any HELD one), read
 * through the partial index of HELD leases by expiry. The reclaim is a statement of many parts, planned each time it
 * is sent; the sweep asks this first, so a round with nothing to reclaim costs an index probe instead.
 */
async function hasLeaseToReclaim(db: Queryable, now: Date, all = false): Promise<boolean> {
  const { rows } = await db.raw<{ rows: { due: boolean }[] }>(
    `select exists (select 1 from quota_leases where status = 'HELD' and (expires_at <= :now or :all)) as due`,
    { now, all },
  );
  return rows[0]!.due;
}

/**
 * The leases of dead processes: HELD past their expiry (or with `all`, every HELD one: no process that
 * could still hold one is alive) become EXPIRED, the calls their last heartbeat wrote are recorded and
 * charged, and what the leases held returns to their periods, in one statement (src/domain/recording/record-sql.ts) that
 * raises the thresholds the charges cross. Returns the periods it changed that carry units (a plan
 * change split them): the caller gives their carry back (giveBackCarry) in the same transaction.
 */
async function reclaimExpired(
  _db: Queryable,
  now: Date,
  q: Queryable,
  all = false,
): Promise<{ leases: number; calls: number; carrying: string[] }> {
  const result = await q.raw(RECLAIM_EXPIRED_SQL, { now, all });
  const rows = result.rows as { quota_period_id: string; carried_units: bigint; leases: bigint; calls: bigint }[];
  return {
    leases: Number(rows[0]?.leases ?? 0n),
    calls: Number(rows[0]?.calls ?? 0n),
    carrying: rows.filter((p) => p.carried_units > 0n).map((p) => p.quota_period_id),
  };
}

/**
 * What a period a plan change opened was reckoned from: its strategy's units a cycle, and what the part before it
 * charged it for use beyond that part's share, as it stands now (what came back since is no longer charged).
 */
async function prorationOf(
  db: Queryable,
  period: QuotaPeriodRow,
  q: Queryable = db,
): Promise<{ planQuotaUnits: bigint; carriedUnits: bigint }> {
  const strategy: { quota_units: bigint } = await q('quota_strategies').where({ id: period.quota_strategy_id }).first('quota_units');
  const before: { carried_units: bigint } | undefined = await q('quota_periods')
    .where({ workspace_access_id: period.workspace_access_id, period_end: period.period_start, cycle_start: period.cycle_start })
    .first('carried_units');
  return { planQuotaUnits: strategy.quota_units, carriedUnits: before?.carried_units ?? 0n };
}

/** How many of an access's last charged calls its typical call is read from. */
const TYPICAL_OF_LAST = 20;

/** The median units of the access's last TYPICAL_OF_LAST charged calls (the higher middle of an even count); none before its first. */
async function typicalCallUnits(db: Queryable, accessId: string, q: Queryable = db): Promise<bigint | undefined> {
  const units = (await q('usage_events')
    .where({ workspace_access_id: accessId, kind: 'USAGE' })
    .orderBy('id', 'desc')
    .limit(TYPICAL_OF_LAST)
    .pluck('units')) as bigint[];
  if (units.length === 0) return undefined;
  units.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return units[Math.floor(units.length / 2)];
}

/** When the access's latest call was refused for quota (429 quota_insufficient), if it was, at or after `since`. */
async function quotaRefusedSince(db: Queryable, accessId: string, since: Date, q: Queryable = db): Promise<Date | undefined> {
  const latest: { error_code: string | null; started_at: Date } | undefined = await q('invocations')
    .where({ workspace_access_id: accessId })
    .orderBy('id', 'desc')
    .first('error_code', 'started_at');
  return latest?.error_code === 'quota_insufficient' && latest.started_at >= since ? latest.started_at : undefined;
}

/**
 * The repository over `db` (the pool, or a gateway's own): each function with its `q` defaulting to it. `prepared`: a
 * lease's acquisition, extension and release go as named statements (lease-sql.ts), as the gateway's repository sends
 * them with NEXUS_DATABASE_PREPARED_STATEMENTS; unnamed otherwise: behind a transaction pooler, and in the repositories
 * of the services and the batches, whose pool settles on no plan and which take a lease once a batch.
 */
export function createQuotaRepo(db: Queryable, prepared = false) {
  const query = namedQuery(db, prepared);
  return {
    ...bindDeps(db, {
      findPeriod,
      carriedInto,
      findPeriodForUpdate,
      currentPeriod,
      firstPeriodAfter,
      latestPeriod,
      findPeriodByStart,
      findPeriodByExternalKey,
      overlapping,
      endUnbilledPeriodsAt,
      endBilledPeriodsAt,
      insertPeriod,
      updatePeriod,
      giveBackCarry,
      hasLeaseToReclaim,
      reclaimExpired,
      prorationOf,
      typicalCallUnits,
      quotaRefusedSince,
    }),
    acquireLease: (h: Acquisition) => acquireLease(db, query, h),
    extendLease: (e: Extension) => extendLease(db, query, e),
    releaseLease: (leaseId: string, now: Date) => releaseLease(db, query, leaseId, now),
    /** The lease statements on no lease and no period (they write nothing): what each new gateway connection settles on. */
    idleStatements: leaseIdleStatements,
  };
}

export type QuotaRepo = ReturnType<typeof createQuotaRepo>;

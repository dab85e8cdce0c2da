/**
 * All SQL of quota_periods, quota_reservations and usage_events. The reserve
 * statement is the gateway's only write before the upstream call: one atomic
 * CTE, so concurrent reservations can never overspend a period.
 */
import { settlementCtes, jsonParam, type SettlementInput } from './settlement-sql.js';
import type { Queryable } from '../../db/database.js';
import type { QuotaPeriodRow } from './quota-types.js';

export function createQuotaRepo(db: Queryable) {
  return {
    /**
     * Holds `units` on the period when enough is available and the period is
     * current at `now`; inserts the HELD reservation in the same statement.
     * Returns the remaining availability, or undefined when nothing was held.
     */
    async reserve(
      r: { id: string; workspaceId: string; accessId: string; periodId: string; units: bigint; requestId: string; now: Date; expiresAt: Date },
      q: Queryable = db,
    ): Promise<bigint | undefined> {
      const result = await q.raw(
        `with held as (
           update quota_periods
              set reserved_units = reserved_units + cast(:units as bigint)
            where id = :periodId and workspace_access_id = :accessId
              and period_start <= :now and period_end > :now
              and granted_units - reserved_units - consumed_units >= cast(:units as bigint)
           returning id, granted_units - reserved_units - consumed_units as remaining
         ), hold as (
           insert into quota_reservations
             (id, workspace_id, workspace_access_id, quota_period_id, reserved_units, status, request_id, created_at, expires_at)
           select cast(:id as uuid), cast(:workspaceId as uuid), cast(:accessId as uuid), held.id, cast(:units as bigint), 'HELD',
                  cast(:requestId as text), cast(:now as timestamptz), cast(:expiresAt as timestamptz) from held
           returning id
         )
         select held.remaining from held join hold on true`,
        { ...r, units: r.units.toString() },
      );
      const row = (result.rows as { remaining: bigint }[])[0];
      return row?.remaining;
    },

    async findPeriod(id: string, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
      return q('quota_periods').where({ id }).first();
    },

    async findPeriodForUpdate(id: string, q: Queryable): Promise<QuotaPeriodRow | undefined> {
      return q('quota_periods').where({ id }).forUpdate().first();
    },

    /** The period of the access covering `at`: [period_start, period_end). */
    async currentPeriod(accessId: string, at: Date, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
      return q('quota_periods')
        .where({ workspace_access_id: accessId })
        .where('period_start', '<=', at)
        .where('period_end', '>', at)
        .orderBy('period_start', 'desc')
        .first();
    },

    async latestPeriod(accessId: string, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
      return q('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_end', 'desc').first();
    },

    async findPeriodByStart(accessId: string, start: Date, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
      return q('quota_periods').where({ workspace_access_id: accessId, period_start: start }).first();
    },

    async findPeriodByExternalKey(accessId: string, key: string, q: Queryable = db): Promise<QuotaPeriodRow | undefined> {
      return q('quota_periods').where({ workspace_access_id: accessId, external_period_key: key }).first();
    },

    /** Periods of the access that intersect [start, end). */
    async overlapping(accessId: string, start: Date, end: Date, q: Queryable = db): Promise<QuotaPeriodRow[]> {
      return q('quota_periods')
        .where({ workspace_access_id: accessId })
        .where('period_start', '<', end)
        .where('period_end', '>', start);
    },

    /** Ends the access's non-billing periods that straddle `at` there (their grant stays history). */
    async endUnbilledPeriodsAt(accessId: string, at: Date, q: Queryable = db): Promise<number> {
      return q('quota_periods')
        .where({ workspace_access_id: accessId })
        .whereNot({ source: 'billing' })
        .where('period_start', '<', at)
        .where('period_end', '>', at)
        .update({ period_end: at });
    },

    async insertPeriod(row: QuotaPeriodRow, q: Queryable = db): Promise<QuotaPeriodRow> {
      const [created] = await q('quota_periods').insert(row).returning('*');
      return created as QuotaPeriodRow;
    },

    async updatePeriod(id: string, patch: Partial<Pick<QuotaPeriodRow, 'period_end' | 'granted_units'>>, q: Queryable = db) {
      const [updated] = await q('quota_periods').where({ id }).update(patch).returning('*');
      return updated as QuotaPeriodRow;
    },

    /** Returns the held units to the period and moves `consumed` into consumed_units. */
    async applySettlement(periodId: string, reserved: bigint, consumed: bigint, q: Queryable): Promise<void> {
      await q.raw(
        `update quota_periods
            set reserved_units = reserved_units - cast(:reserved as bigint), consumed_units = consumed_units + cast(:consumed as bigint)
          where id = :periodId`,
        { periodId, reserved: reserved.toString(), consumed: consumed.toString() },
      );
    },

    /** Settles the reservations still HELD among these (settlement-sql.ts); returns those it settled. */
    async settle(settlements: SettlementInput[], q: Queryable = db): Promise<{ id: string; reserved_units: bigint; units: bigint }[]> {
      const result = await q.raw(`with ${settlementCtes} select r.id, r.reserved_units, r.units from r`, {
        settlements: jsonParam(settlements),
        leaseCalls: '[]',
      });
      return result.rows as { id: string; reserved_units: bigint; units: bigint }[];
    },

    /**
     * HELD reservations past their expiry become EXPIRED; returns what they held, per row. A lease keeps the
     * units consumed through it (consumed_units); what it still held returns to the period.
     */
    async expireHeld(now: Date, q: Queryable): Promise<{ id: string; quota_period_id: string; reserved_units: bigint }[]> {
      const result = await q.raw(
        `update quota_reservations
            set status = 'EXPIRED', settled_at = :now, consumed_units = case when kind = 'LEASE' then consumed_units else 0 end
          where id in (select id from quota_reservations where status = 'HELD' and expires_at <= :now
                       order by id for update skip locked)
            and status = 'HELD'
          returning id, quota_period_id, reserved_units`,
        { now },
      );
      return result.rows as { id: string; quota_period_id: string; reserved_units: bigint }[];
    },

    async availableUnits(periodId: string, q: Queryable = db): Promise<bigint> {
      const row = (await q('quota_periods').where({ id: periodId }).first()) as QuotaPeriodRow | undefined;
      if (!row) return 0n;
      const available = row.granted_units - row.reserved_units - row.consumed_units;
      return available > 0n ? available : 0n;
    },
  };
}

export type QuotaRepo = ReturnType<typeof createQuotaRepo>;

/**
 * What the Admin API and the housekeeping need of quota: the snapshot of an
 * access's period, and the sweep of the quota leases a dead process left
 * behind. Admission and settlement of calls are the leases' (quota-leases.ts).
 * Invariants (DESIGN.md): holds never take consumed + reserved past granted;
 * every charged call writes exactly one USAGE event, plus one ADJUSTMENT for
 * what it consumed beyond its bound.
 */
import type { Db, Queryable } from '../../db/database.js';
import type { QuotaRepo } from './quota-repo.js';
import type { QuotaSnapshot } from './quota-types.js';

export function createQuotaService(deps: { db: Db; quotaRepo: QuotaRepo }) {
  const { db, quotaRepo } = deps;

  return {
    /**
     * Leases whose process died: EXPIRED, the units they still held returned. Returns how many. Those past
     * their expiry, or with `all` every HELD one (when no other process can hold any: the embedded database at start).
     */
    async sweepExpired(now: Date, all = false): Promise<number> {
      return db.transaction(async (tx) => {
        const expired = await quotaRepo.expireHeld(now, tx, all);
        const perPeriod = new Map<string, bigint>();
        for (const r of expired) perPeriod.set(r.quota_period_id, (perPeriod.get(r.quota_period_id) ?? 0n) + r.reserved_units);
        for (const [periodId, units] of [...perPeriod].sort(([a], [b]) => a.localeCompare(b))) {
          await quotaRepo.applySettlement(periodId, units, 0n, tx);
        }
        return expired.length;
      });
    },

    /** The access's period covering `at`, or undefined when there is none. */
    async snapshot(accessId: string, at: Date, q: Queryable = db): Promise<QuotaSnapshot | undefined> {
      const period = await quotaRepo.currentPeriod(accessId, at, q);
      if (!period) return undefined;
      const available = period.granted_units - period.reserved_units - period.consumed_units;
      return {
        workspaceAccessId: accessId,
        planId: period.plan_id,
        quotaStrategyId: period.quota_strategy_id,
        quotaPeriodId: period.id,
        periodStart: period.period_start,
        periodEnd: period.period_end,
        grantedUnits: period.granted_units,
        reservedUnits: period.reserved_units,
        consumedUnits: period.consumed_units,
        availableUnits: available > 0n ? available : 0n,
      };
    },
  };
}

export type QuotaService = ReturnType<typeof createQuotaService>;

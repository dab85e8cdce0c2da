/**
 * What the Admin API and the housekeeping need of quota: the snapshot of an
 * access's period, and the sweep of the quota leases a dead process left
 * behind. Admission and settlement of calls are the leases' (quota-leases.ts).
 * Invariants (docs/decisions.md, "Plans, strategies, accesses and quota"): holds never take consumed + reserved past granted;
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
     * Leases whose process died: EXPIRED, the calls their last heartbeat wrote charged, and the units they
     * still held returned. Returns how many leases. Those past their expiry, or with `all` every HELD one
     * (when no other process can hold any: the embedded database at start).
     */
    async sweepExpired(now: Date, all = false): Promise<{ leases: number; calls: number }> {
      // Most rounds find none: the reclaim statement (planned each time it is sent) is then not sent at all.
      if (!(await quotaRepo.hasLeaseToReclaim(now, all))) return { leases: 0, calls: 0 };
      return db.transaction(async (tx) => {
        const reclaimed = await quotaRepo.reclaimExpired(now, tx, all);
        for (const periodId of reclaimed.carrying) await quotaRepo.giveBackCarry(periodId, tx);
        return { leases: reclaimed.leases, calls: reclaimed.calls };
      });
    },

    /** The access's period covering `at`, or undefined when there is none. */
    async snapshot(accessId: string, at: Date, q: Queryable = db): Promise<QuotaSnapshot | undefined> {
      const period = await quotaRepo.currentPeriod(accessId, at, q);
      if (!period) return undefined;
      const available = period.granted_units - period.reserved_units - period.consumed_units;
      const toppedUp = period.topped_up_units ?? 0n;
      const typical = await quotaRepo.typicalCallUnits(accessId, q);
      const since = period.topped_up_at && period.topped_up_at > period.period_start ? period.topped_up_at : period.period_start;
      const refusedAt = await quotaRepo.quotaRefusedSince(accessId, since, q);
      let proration: QuotaSnapshot['proration'];
      if (period.source === 'plan_change') {
        const { planQuotaUnits, carriedUnits } = await quotaRepo.prorationOf(period, q);
        // granted = share - carried + top-ups, whatever has come back since (docs/decisions.md "Changing plan").
        const shareUnits = period.granted_units - toppedUp + carriedUnits;
        proration = { cycleStart: period.cycle_start, planQuotaUnits, shareUnits, carriedUnits };
      }
      return {
        toppedUpUnits: toppedUp,
        grantSource: period.source,
        ...(proration ? { proration } : {}),
        ...(typical !== undefined ? { typicalCallUnits: typical } : {}),
        ...(refusedAt ? { quotaRefusedAt: refusedAt } : {}),
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

/**
 * The quota primitives the gateway calls (reserve before the upstream, settle
 * or release after it, sweep what dead processes left) and the snapshot the
 * Admin API shows. Invariants (DESIGN.md): reservations never take consumed +
 * reserved past granted; every settlement writes exactly one USAGE event, plus
 * one ADJUSTMENT for what was consumed beyond the reservation.
 */
import type { Db, Queryable } from '../../db/database.js';
import { newId } from '../../ids.js';
import type { Clock } from '../actor.js';
import { computeUnits } from './quota-math.js';
import type { QuotaRepo } from './quota-repo.js';
import type { SettlementInput } from './settlement-sql.js';
import type { QuotaSnapshot, ReserveInput, ReserveResult, SettleInput, SettleResult } from './quota-types.js';

export function createQuotaService(deps: { db: Db; quotaRepo: QuotaRepo; clock: Clock }) {
  const { db, quotaRepo, clock } = deps;


  function settlement(reservationId: string, consumed: bigint | null, usage?: SettleInput): SettlementInput {
    return {
      rid: reservationId,
      status: consumed === null ? 'RELEASED' : 'SETTLED',
      units: consumed ?? 0n,
      charged: consumed !== null,
      usage_id: newId(),
      adjustment_id: newId(),
      invocation_id: usage?.invocationId ?? null,
      input_tokens: usage?.inputTokens ?? 0n,
      cached_tokens: usage?.cachedInputTokens ?? 0n,
      output_tokens: usage?.outputTokens ?? 0n,
      model: usage?.model ?? null,
      at: clock.now(),
    };
  }

  return {
    computeUnits,

    async reserve(input: ReserveInput, q: Queryable = db): Promise<ReserveResult> {
      if (input.units < 0n) throw new RangeError('units must be non-negative');
      const result = await quotaRepo.hold(
        {
          id: input.reservationId,
          workspaceId: input.workspaceId,
          accessId: input.accessId,
          periodId: input.periodId,
          need: input.units,
          want: input.units,
          share: 1,
          kind: 'CALL',
          requestId: input.requestId,
          now: clock.now(),
          expiresAt: input.expiresAt,
        },
        q,
      );
      if (result.held !== null) return { ok: true, remaining: result.remaining! };
      return { ok: false, available: result.available };
    },

    /** Idempotent: a reservation that is no longer HELD is left alone (null). */
    async settle(input: SettleInput, tx?: Queryable): Promise<SettleResult | null> {
      if (input.consumedUnits < 0n) throw new RangeError('consumedUnits must be non-negative');
      const row = settlement(input.reservationId, input.consumedUnits, input);
      const [settled] = await quotaRepo.settle([row], tx ?? db);
      if (!settled) return null;
      return { usageEventId: row.usage_id, adjustmentEventId: settled.units > settled.reserved_units ? row.adjustment_id : null };
    },

    /** Returns everything held, records no usage. True when it released something. */
    async release(reservationId: string, tx?: Queryable): Promise<boolean> {
      return (await quotaRepo.settle([settlement(reservationId, null)], tx ?? db)).length > 0;
    },

    /**
     * Reservations whose process died: EXPIRED, their units returned. Returns how many. Those past their
     * expiry, or with `all` every HELD one (when no other process can hold any: the embedded database at start).
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

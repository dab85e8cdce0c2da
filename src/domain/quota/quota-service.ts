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
import type { QuotaSnapshot, ReserveInput, ReserveResult, SettleInput, SettleResult } from './quota-types.js';

export function createQuotaService(deps: { db: Db; quotaRepo: QuotaRepo; clock: Clock }) {
  const { db, quotaRepo, clock } = deps;

  /** Runs fn in the caller's transaction, or in one of its own. */
  function inTx<T>(tx: Queryable | undefined, fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return tx && tx.isTransaction ? fn(tx) : db.transaction((own) => fn(own));
  }

  async function close(
    tx: Queryable,
    reservationId: string,
    outcome: { status: 'SETTLED' | 'RELEASED'; consumed: bigint },
  ) {
    const reservation = await quotaRepo.findReservationForUpdate(reservationId, tx);
    if (!reservation || reservation.status !== 'HELD') return undefined;
    await quotaRepo.applySettlement(reservation.quota_period_id, reservation.reserved_units, outcome.consumed, tx);
    await quotaRepo.closeReservation(
      reservationId,
      { status: outcome.status, consumed_units: outcome.consumed, settled_at: clock.now() },
      tx,
    );
    return reservation;
  }

  return {
    computeUnits,

    async reserve(input: ReserveInput, q: Queryable = db): Promise<ReserveResult> {
      if (input.units < 0n) throw new RangeError('units must be non-negative');
      const remaining = await quotaRepo.reserve(
        {
          id: input.reservationId,
          workspaceId: input.workspaceId,
          accessId: input.accessId,
          periodId: input.periodId,
          units: input.units,
          requestId: input.requestId,
          now: clock.now(),
          expiresAt: input.expiresAt,
        },
        q,
      );
      if (remaining !== undefined) return { ok: true, remaining };
      return { ok: false, available: await quotaRepo.availableUnits(input.periodId, q) };
    },

    /** Idempotent: a reservation that is no longer HELD is left alone (null). */
    async settle(input: SettleInput, tx?: Queryable): Promise<SettleResult | null> {
      if (input.consumedUnits < 0n) throw new RangeError('consumedUnits must be non-negative');
      return inTx(tx, async (q) => {
        const reservation = await close(q, input.reservationId, { status: 'SETTLED', consumed: input.consumedUnits });
        if (!reservation) return null;
        const now = clock.now();
        const base = {
          workspace_id: reservation.workspace_id,
          workspace_access_id: reservation.workspace_access_id,
          quota_period_id: reservation.quota_period_id,
          reservation_id: reservation.id,
          invocation_id: input.invocationId,
          model: input.model,
          created_at: now,
        };
        const within = input.consumedUnits < reservation.reserved_units ? input.consumedUnits : reservation.reserved_units;
        const usageEventId = newId();
        await quotaRepo.insertUsageEvent(
          {
            ...base,
            id: usageEventId,
            kind: 'USAGE',
            units: within,
            input_tokens: input.inputTokens,
            cached_input_tokens: input.cachedInputTokens,
            output_tokens: input.outputTokens,
            reason: null,
          },
          q,
        );
        let adjustmentEventId: string | null = null;
        if (input.consumedUnits > reservation.reserved_units) {
          adjustmentEventId = newId();
          await quotaRepo.insertUsageEvent(
            {
              ...base,
              id: adjustmentEventId,
              kind: 'ADJUSTMENT',
              units: input.consumedUnits - reservation.reserved_units,
              input_tokens: 0n,
              cached_input_tokens: 0n,
              output_tokens: 0n,
              reason: 'consumed_beyond_reservation',
            },
            q,
          );
        }
        return { usageEventId, adjustmentEventId };
      });
    },

    /** Returns everything held, records no usage. True when it released something. */
    async release(reservationId: string, tx?: Queryable): Promise<boolean> {
      return inTx(tx, async (q) => Boolean(await close(q, reservationId, { status: 'RELEASED', consumed: 0n })));
    },

    /** Reservations whose process died: EXPIRED, their units returned. Returns how many. */
    async sweepExpired(now: Date): Promise<number> {
      return db.transaction(async (tx) => {
        const expired = await quotaRepo.expireHeld(now, tx);
        const perPeriod = new Map<string, bigint>();
        for (const r of expired) perPeriod.set(r.quota_period_id, (perPeriod.get(r.quota_period_id) ?? 0n) + BigInt(r.reserved_units));
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

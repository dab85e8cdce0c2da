/**
 * The period ledger: an access's quota periods, as the accesses area opens, grants and
 * splits them. The first period opened at provisioning; the next granted (a renewal, a
 * billed period, idempotent on its start or external key, never overlapping another); a
 * billed period taking over an unbilled one; a plan change splitting the period it falls
 * in, with the carry its holds give back later (quotaRepo.giveBackCarry). Who may do it,
 * and on which plan and strategy, the accesses area decides and passes in: the ledger
 * reads and writes the periods only.
 */
import type { Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import type { Clock } from '../actor.js';
import { addInterval, splitPeriodForPlanChange, type ResetInterval } from './quota-math.js';
import type { QuotaRepo } from './quota-repo.js';
import type { QuotaPeriodRow } from './quota-types.js';

const INT64_MAX = 9223372036854775807n;

/** What the period ledger reads and writes through. */
export interface PeriodLedgerDeps {
  quotaRepo: QuotaRepo;
  clock: Clock;
}

/** The access a period belongs to. */
interface PeriodOwner {
  id: string;
  workspace_id: string;
}

/** What a period is granted from: the plan's quota strategy in force (plans/plan-types.ts). */
export interface PeriodStrategy {
  id: string;
  quota_units: bigint;
  reset_interval: ResetInterval;
}

type NewPeriod = Pick<QuotaPeriodRow, 'plan_id' | 'quota_strategy_id' | 'period_start' | 'period_end' | 'granted_units' | 'source'> & {
  topped_up_units?: bigint;
  external_period_key?: string | null;
  cycle_start?: Date;
};

/** The span of a period to grant, and what a billed one replaces. */
export interface PeriodSpan {
  periodStart: Date;
  periodEnd: Date;
  externalPeriodKey?: string | undefined;
  /**
   * Billing: a billed period replaces what is left of the unbilled ones it overlaps (the
   * period opened at provisioning, a manual renewal): one that started before it ends where
   * it starts; the first that starts within it is taken over (takeOverPeriod).
   */
  supersedeUnbilled?: boolean;
  /**
   * Billing: key prefixes of the subscriptions whose billed period still running at periodStart
   * ends there: the new period's own subscription (its provider restarted the cycle: a trial
   * ended early, a change of billing interval, `billing_cycle_anchor=now`) and subscriptions of
   * the access that were canceled (a new subscription replaces one that ended early).
   */
  supersedeBilledKeyPrefixes?: string[] | undefined;
}

/** The earliest unbilled period among these (a billed one never overlaps another billed one). */
function firstUnbilled(periods: QuotaPeriodRow[]): QuotaPeriodRow | undefined {
  return periods.filter((p) => p.source !== 'billing').sort((a, b) => a.period_start.getTime() - b.period_start.getTime())[0];
}

async function insertPeriod(
  { quotaRepo, clock }: PeriodLedgerDeps,
  access: PeriodOwner,
  values: NewPeriod,
  tx: Queryable,
): Promise<QuotaPeriodRow> {
  return quotaRepo.insertPeriod(
    {
      id: newId(),
      workspace_id: access.workspace_id,
      workspace_access_id: access.id,
      reserved_units: 0n,
      consumed_units: 0n,
      created_at: clock.now(),
      ...values,
      external_period_key: values.external_period_key ?? null,
      cycle_start: values.cycle_start ?? values.period_start,
    },
    tx,
  );
}

/** Opens the first period [start, start + resetInterval) from the plan's strategy in force at start. */
export async function openFirstPeriod(
  deps: PeriodLedgerDeps,
  access: PeriodOwner,
  planId: string,
  strategy: PeriodStrategy,
  start: Date,
  tx: Queryable,
): Promise<QuotaPeriodRow> {
  return insertPeriod(
    deps,
    access,
    {
      plan_id: planId,
      quota_strategy_id: strategy.id,
      period_start: start,
      period_end: addInterval(start, strategy.reset_interval),
      granted_units: strategy.quota_units,
      source: 'provision',
    },
    tx,
  );
}

/** The period already granted when this grant is a repeat: the same external key, or the same span on the same plan. */
export async function repeatedGrant(
  { quotaRepo }: PeriodLedgerDeps,
  accessId: string,
  span: PeriodSpan,
  planId: string,
  tx: Queryable,
): Promise<QuotaPeriodRow | undefined> {
  if (span.externalPeriodKey) {
    const byKey = await quotaRepo.findPeriodByExternalKey(accessId, span.externalPeriodKey, tx);
    if (byKey) return byKey;
  }
  const same = await quotaRepo.findPeriodByStart(accessId, span.periodStart, tx);
  if (same && same.period_end.getTime() === span.periodEnd.getTime() && same.plan_id === planId) return same;
  return undefined;
}

/**
 * Makes room for a new period over the span: ends what it supersedes there, then refuses any
 * period still overlapping it ('period_overlap'), but for the unbilled one a billed period
 * takes over, which it returns.
 */
export async function clearForGrant(
  { quotaRepo }: PeriodLedgerDeps,
  accessId: string,
  span: PeriodSpan,
  tx: Queryable,
): Promise<QuotaPeriodRow | undefined> {
  const { periodStart, periodEnd } = span;
  if (span.supersedeUnbilled) await quotaRepo.endUnbilledPeriodsAt(accessId, periodStart, tx);
  for (const prefix of span.supersedeBilledKeyPrefixes ?? []) await quotaRepo.endBilledPeriodsAt(accessId, periodStart, prefix, tx);
  const overlapping = await quotaRepo.overlapping(accessId, periodStart, periodEnd, tx);
  // What is left overlapping of an unbilled period starts at or after periodStart: the first is taken over.
  const takenOver = span.supersedeUnbilled ? firstUnbilled(overlapping) : undefined;
  const others = overlapping.filter((p) => p !== takenOver);
  if (others.length > 0) {
    const other = others[0]!;
    throw new AppError('period_overlap', `The period overlaps [${other.period_start.toISOString()}, ${other.period_end.toISOString()})`, {
      param: 'periodStart',
    });
  }
  return takenOver;
}

/**
 * Writes a granted period: a new row, or, when `takenOver` is given, that unbilled row
 * itself. A billed period takes over an unbilled one that starts within it (the period
 * opened at provisioning, when the billed period started earlier or in the same second): the
 * row itself becomes the billed period, so what it consumed counts against the billed
 * grant and the calls in flight on its leases settle there (docs/decisions.md "External billing").
 */
export async function writeGrant(
  deps: PeriodLedgerDeps,
  access: PeriodOwner,
  values: Omit<NewPeriod, 'cycle_start'> & { external_period_key: string | null },
  takenOver: QuotaPeriodRow | undefined,
  tx: Queryable,
): Promise<QuotaPeriodRow> {
  if (!takenOver) return insertPeriod(deps, access, values, tx);
  // What was topped up on the row taken over stays granted on it, and stays a top-up.
  const toppedUp = takenOver.topped_up_units ?? 0n;
  return deps.quotaRepo.updatePeriod(
    takenOver.id,
    { ...values, granted_units: values.granted_units + toppedUp, source: 'billing', cycle_start: values.period_start },
    tx,
  );
}

/**
 * A one-off grant of `units` to `period` (grantAccessUnits): its grant and its top-ups grow by them, under the
 * period's row lock (a plan change splitting it waits, and then moves them whole). Holds and consumption are not
 * touched, so nothing in flight is counted twice; leases see the units at their next extension. Returns the row.
 */
export async function topUpPeriod(
  { quotaRepo, clock }: PeriodLedgerDeps,
  period: QuotaPeriodRow,
  units: bigint,
  tx: Queryable,
): Promise<QuotaPeriodRow> {
  const locked = (await quotaRepo.findPeriodForUpdate(period.id, tx))!;
  if (locked.granted_units + units > INT64_MAX) {
    throw new AppError('invalid_parameter', `The period's grant would pass ${INT64_MAX} units`, { param: 'units' });
  }
  return quotaRepo.updatePeriod(
    locked.id,
    { granted_units: locked.granted_units + units, topped_up_units: (locked.topped_up_units ?? 0n) + units, topped_up_at: clock.now() },
    tx,
  );
}

/**
 * When a plan change may take effect (docs/decisions.md "Changing plan"), else 400
 * invalid_parameter on effectiveAt: not before the access starts; in a period, only
 * one that has not ended; outside every period, only in a gap that is not over, i.e.
 * no later period has started by now (the gap still running, one to come, or an access
 * with no period yet). A gap that is over would leave the periods after it on the old
 * plan while the access names the new one. (A past instant in the gap still running
 * changes nothing that `now` would not: the default effectiveAt, read before the
 * access's lock was taken, is such an instant.)
 */
export async function assertEffectiveAt(
  { quotaRepo }: PeriodLedgerDeps,
  access: { id: string; access_starts_at: Date },
  period: QuotaPeriodRow | undefined,
  effectiveAt: Date,
  now: Date,
  tx: Queryable,
): Promise<void> {
  if (effectiveAt < access.access_starts_at) {
    throw new AppError('invalid_parameter', `effectiveAt lies before the access starts (${access.access_starts_at.toISOString()})`, {
      param: 'effectiveAt',
    });
  }
  if (period) {
    if (period.period_end <= now) {
      throw new AppError('invalid_parameter', 'effectiveAt lies in a quota period that has already ended', { param: 'effectiveAt' });
    }
    return;
  }
  const later = await quotaRepo.firstPeriodAfter(access.id, effectiveAt, tx);
  if (later && later.period_start <= now) {
    throw new AppError(
      'invalid_parameter',
      `effectiveAt lies in the past outside any quota period (a later period started at ${later.period_start.toISOString()})`,
      { param: 'effectiveAt' },
    );
  }
}

/**
 * Splits the period covering `effectiveAt` for a plan change (docs/decisions.md "Changing
 * plan"): the old part keeps the old plan's prorated share (never less than what it used),
 * the new part [effectiveAt, periodEnd) gets the new plan's prorated share minus what was
 * used beyond the old share. The old part remembers its share and that carry, so what its
 * holds (a lease's unused units, a call's unused bound) give back later returns to the new
 * part (quotaRepo.giveBackCarry). At the period's start the whole period moves to the new
 * plan. Returns what the audit record says of it.
 */
export async function splitForPlanChange(
  deps: PeriodLedgerDeps,
  access: PeriodOwner,
  period: QuotaPeriodRow,
  planId: string,
  strategy: PeriodStrategy,
  effectiveAt: Date,
  tx: Queryable,
): Promise<Record<string, unknown>> {
  const { quotaRepo } = deps;
  // A part an earlier change split off still owes what it was charged for the part before it
  // (that part's carried_units): the split reckons in gross terms (grant and use with that debt), so
  // switching back and forth never forgives it. The part before is locked first, as giveBackCarry does.
  const debt = await quotaRepo.carriedInto(period, tx);
  const locked = (await quotaRepo.findPeriodForUpdate(period.id, tx))!;
  const used = locked.consumed_units + locked.reserved_units;
  // Top-ups are not the plan's to prorate: they move to the new part whole (splitPeriodForPlanChange's topUpUnits).
  const toppedUp = locked.topped_up_units ?? 0n;
  const result = splitPeriodForPlanChange({
    cycleStart: locked.cycle_start,
    periodStart: locked.period_start,
    periodEnd: locked.period_end,
    effectiveAt,
    oldGranted: locked.granted_units - toppedUp + debt,
    oldUsed: used + debt,
    newQuotaUnits: strategy.quota_units,
    topUpUnits: toppedUp,
  });
  if (effectiveAt.getTime() === locked.period_start.getTime()) {
    // The whole period moves to the new plan: nothing of the old one was owed (but the debt stays).
    const granted = result.newGranted + used;
    await quotaRepo.updatePeriod(locked.id, { plan_id: planId, quota_strategy_id: strategy.id, granted_units: granted }, tx);
    return { periodId: locked.id, grantedUnits: granted };
  }
  // Stored net of the debt, as the part's own grant and share (giveBackCarry compares them with its own use).
  await quotaRepo.updatePeriod(
    locked.id,
    {
      period_end: effectiveAt,
      granted_units: result.oldGranted - debt,
      share_units: result.oldShare - debt,
      carried_units: result.carried,
      topped_up_units: 0n,
    },
    tx,
  );
  const next = await insertPeriod(
    deps,
    access,
    {
      plan_id: planId,
      quota_strategy_id: strategy.id,
      period_start: effectiveAt,
      period_end: locked.period_end,
      granted_units: result.newGranted,
      topped_up_units: toppedUp,
      source: 'plan_change',
      cycle_start: locked.cycle_start,
    },
    tx,
  );
  return {
    endedPeriodId: locked.id,
    endedPeriodGrantedUnits: result.oldGranted - debt,
    newPeriodId: next.id,
    newPeriodGrantedUnits: result.newGranted,
    carriedUnits: result.carried,
  };
}

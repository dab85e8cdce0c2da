/**
 * The periods an access is granted after its first: a renewal by an administrator, and
 * billing's billed periods, each from the plan's strategy in force at the period's start.
 * The periods themselves are the ledger's (quota/period-ledger.ts).
 */
import type { Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import type { Actor } from '../actor.js';
import { clearForGrant, repeatedGrant, topUpPeriod, writeGrant, type PeriodSpan } from '../quota/period-ledger.js';
import type { QuotaPeriodRow } from '../quota/quota-types.js';
import { activePlanOf, inForce, lockVisible, view, type AccessDeps } from './access-common.js';
import { expireIfDue, restoredByRenewal, setStatus } from './access-status.js';
import type { AccessRow, AccessView } from './access-types.js';

export interface GrantPeriodInput extends PeriodSpan {
  planId?: string | undefined;
  source: 'renewal' | 'billing';
}

/** The audit record of a granted period, and of the unbilled period it took over. */
function grantChanges(
  input: GrantPeriodInput,
  granted: Pick<QuotaPeriodRow, 'plan_id' | 'quota_strategy_id' | 'granted_units'>,
  period: QuotaPeriodRow,
  takenOver: QuotaPeriodRow | undefined,
): Record<string, unknown> {
  return {
    periodId: period.id,
    planId: granted.plan_id,
    quotaStrategyId: granted.quota_strategy_id,
    periodStart: input.periodStart.toISOString(),
    periodEnd: input.periodEnd.toISOString(),
    grantedUnits: granted.granted_units,
    source: input.source,
    ...(input.externalPeriodKey ? { externalPeriodKey: input.externalPeriodKey } : {}),
    ...(takenOver
      ? {
          tookOverPeriod: {
            source: takenOver.source,
            periodStart: takenOver.period_start.toISOString(),
            periodEnd: takenOver.period_end.toISOString(),
            grantedUnits: takenOver.granted_units,
            consumedUnits: period.consumed_units,
            reservedUnits: period.reserved_units,
          },
        }
      : {}),
  };
}

/** Refuses a grant to a REVOKED access or over an empty span; returns the locked access. */
async function grantable(deps: AccessDeps, actor: Actor, accessId: string, input: GrantPeriodInput, tx: Queryable): Promise<AccessRow> {
  const access = await lockVisible(deps, actor, accessId, tx);
  if (access.status === 'REVOKED') {
    throw new AppError('illegal_transition', 'A REVOKED access gets no new periods', { current_status: access.status });
  }
  if (!(input.periodEnd > input.periodStart)) {
    throw new AppError('invalid_parameter', 'periodEnd must be after periodStart', { param: 'periodEnd' });
  }
  return access;
}

export async function grantPeriodInTx(
  deps: AccessDeps,
  actor: Actor,
  accessId: string,
  input: GrantPeriodInput,
  tx: Queryable,
): Promise<{ periodId: string; created: boolean }> {
  const { accessRepo, quotaRepo, audit, clock, changes } = deps;
  const access = await grantable(deps, actor, accessId, input, tx);
  const repeat = await repeatedGrant(deps, access.id, input, input.planId ?? access.plan_id, tx);
  if (repeat) return { periodId: repeat.id, created: false };
  const takenOver = await clearForGrant(deps, access.id, input, tx);
  const plan = await activePlanOf(deps, actor, access.workspace_id, input.planId ?? access.plan_id, tx);
  const strategy = await inForce(deps, plan, input.periodStart, tx);
  const values = {
    plan_id: plan.id,
    quota_strategy_id: strategy.id,
    period_start: input.periodStart,
    period_end: input.periodEnd,
    granted_units: strategy.quota_units,
    external_period_key: input.externalPeriodKey ?? null,
    source: input.source,
  };
  const period = await writeGrant(deps, access, values, takenOver, tx);
  await changes.announce({ kind: 'access', id: access.id }, tx);
  const latest = await quotaRepo.latestPeriod(access.id, tx);
  if (plan.id !== access.plan_id && latest?.id === period.id) {
    await accessRepo.update(access.id, { plan_id: plan.id, updated_at: clock.now() }, tx);
  }
  await audit.record(
    actor,
    {
      action: 'access.period_granted',
      resourceType: 'workspace_access',
      resourceId: access.id,
      workspaceId: access.workspace_id,
      changes: grantChanges(input, values, period, takenOver),
    },
    tx,
  );
  return { periodId: period.id, created: true };
}

/**
 * The next period [periodStart, periodEnd) from the plan's strategy in force
 * at periodStart. The same period again is a no-op; an overlapping one is
 * refused. PENDING and EXPIRED accesses with a period still to come become ACTIVE.
 */
export async function renew(
  deps: AccessDeps,
  actor: Actor,
  accessId: string,
  input: { planId: string; periodStart: Date; periodEnd: Date },
): Promise<AccessView> {
  return deps.db.transaction(async (tx) => {
    const access = await lockVisible(deps, actor, accessId, tx);
    await deps.workspaces.requireWritable(actor, access.workspace_id, tx);
    await expireIfDue(deps, access, tx);
    if (access.status === 'REVOKED') {
      throw new AppError('illegal_transition', 'A REVOKED access cannot be renewed', { current_status: access.status });
    }
    await grantPeriodInTx(deps, actor, accessId, { ...input, source: 'renewal' }, tx);
    const now = deps.clock.now();
    const last = await deps.quotaRepo.latestPeriod(accessId, tx);
    const ended = access.access_ends_at !== null && access.access_ends_at <= now;
    if ((access.status === 'EXPIRED' || access.status === 'PENDING') && last && last.period_end > now && !ended) {
      await setStatus(deps, actor, access, ...restoredByRenewal(access), tx);
    }
    return view(deps, accessId, tx);
  });
}

/**
 * A one-off grant of `units` to the period running now (a top-up, docs/decisions.md "Top-ups"): the ledger adds
 * them under the period's lock, the change feed tells every process at commit, the audit records them.
 */
export async function grantUnits(
  deps: AccessDeps,
  actor: Actor,
  accessId: string,
  input: { units: bigint; reason?: string | undefined },
): Promise<void> {
  if (input.units < 1n) throw new AppError('invalid_parameter', 'units must be at least 1', { param: 'units' });
  await deps.db.transaction(async (tx) => {
    const access = await lockVisible(deps, actor, accessId, tx);
    await deps.workspaces.requireWritable(actor, access.workspace_id, tx);
    await expireIfDue(deps, access, tx);
    if (access.status === 'REVOKED') {
      throw new AppError('illegal_transition', 'A REVOKED access gets no units', { current_status: access.status });
    }
    const period = await deps.quotaRepo.currentPeriod(access.id, deps.clock.now(), tx);
    if (!period) throw new AppError('quota_period_not_found', 'The access has no quota period running now to grant units in');
    const topped = await topUpPeriod(deps, period, input.units, tx);
    await deps.changes.announce({ kind: 'access', id: access.id }, tx);
    await deps.audit.record(
      actor,
      {
        action: 'access.units_granted',
        resourceType: 'workspace_access',
        resourceId: access.id,
        workspaceId: access.workspace_id,
        changes: {
          periodId: topped.id,
          units: input.units,
          grantedUnits: topped.granted_units,
          toppedUpUnits: topped.topped_up_units,
          ...(input.reason ? { reason: input.reason } : {}),
        },
      },
      tx,
    );
  });
}

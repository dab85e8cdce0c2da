/**
 * Moving an access to another plan, now or at a given instant, by an administrator or
 * by billing. The period it falls in is split by the ledger (quota/period-ledger.ts).
 */
import type { Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import type { Actor } from '../actor.js';
import { assertEffectiveAt, splitForPlanChange } from '../quota/period-ledger.js';
import { activePlanOf, inForce, lockVisible, view, type AccessDeps } from './access-common.js';
import { expireIfDue } from './access-status.js';
import type { AccessRow, AccessView } from './access-types.js';

/**
 * Moves the access to another plan at `effectiveAt` (docs/decisions.md
 * "Changing plan"): the period covering effectiveAt is split there; the old
 * part keeps the old plan's prorated share (never less than what it used),
 * the new part [effectiveAt, periodEnd) gets the new plan's prorated share
 * minus what was used beyond the old share. The old part remembers its share
 * and that carry, so what its holds (a lease's unused units, a call's unused
 * bound) give back later returns to the new part (quotaRepo.giveBackCarry).
 * effectiveAt may not precede the access's start, nor lie in a period or a gap
 * between periods that is already over (assertEffectiveAt).
 */
export async function changePlanInTx(
  deps: AccessDeps,
  actor: Actor,
  accessId: string,
  planId: string,
  effectiveAt: Date,
  tx: Queryable,
): Promise<AccessRow> {
  const { accessRepo, quotaRepo, audit, clock, changes } = deps;
  const access = await lockVisible(deps, actor, accessId, tx);
  await expireIfDue(deps, access, tx);
  if (access.status === 'REVOKED') {
    throw new AppError('illegal_transition', 'A REVOKED access cannot change plan', { current_status: access.status });
  }
  const plan = await activePlanOf(deps, actor, access.workspace_id, planId, tx);
  const now = clock.now();
  const period = await quotaRepo.currentPeriod(access.id, effectiveAt, tx);
  // Already on that plan: the access, and the period running at effectiveAt (a renewal or a change
  // scheduled later may have moved the access's plan while this period is still on the old one).
  if (plan.id === access.plan_id && (!period || period.plan_id === plan.id)) return access;
  await assertEffectiveAt(deps, access, period, effectiveAt, now, tx);
  const split = period
    ? await splitForPlanChange(deps, access, period, plan.id, await inForce(deps, plan, effectiveAt, tx), effectiveAt, tx)
    : {};
  await accessRepo.update(access.id, { plan_id: plan.id, updated_at: now }, tx);
  await changes.announce({ kind: 'access', id: access.id }, tx);
  await audit.record(
    actor,
    {
      action: 'access.plan_changed',
      resourceType: 'workspace_access',
      resourceId: access.id,
      workspaceId: access.workspace_id,
      changes: { fromPlanId: access.plan_id, planId: plan.id, effectiveAt: effectiveAt.toISOString(), ...split },
    },
    tx,
  );
  access.plan_id = plan.id;
  return access;
}

export async function changePlan(
  deps: AccessDeps,
  actor: Actor,
  accessId: string,
  input: { planId: string; effectiveAt?: Date | undefined },
): Promise<AccessView> {
  return deps.db.transaction(async (tx) => {
    const access = await lockVisible(deps, actor, accessId, tx);
    await deps.workspaces.requireWritable(actor, access.workspace_id, tx);
    await changePlanInTx(deps, actor, accessId, input.planId, input.effectiveAt ?? deps.clock.now(), tx);
    return view(deps, accessId, tx);
  });
}

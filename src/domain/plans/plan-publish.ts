/**
 * Publishing: a plan DRAFT -> ACTIVE once a published strategy is in force for it, and a
 * strategy version DRAFT -> PUBLISHED, immutable from then on.
 */
import { AppError } from '../../errors.js';
import type { Actor } from '../actor.js';
import { lockPlan, visibleStrategy, type PlanDeps } from './plan-common.js';
import type { PlanRow, QuotaStrategyRow } from './plan-types.js';

/** DRAFT -> ACTIVE once a published strategy is bound and in force; ACTIVE again is a no-op. */
export async function publishPlan(deps: PlanDeps, actor: Actor, planId: string): Promise<PlanRow> {
  const { db, planRepo, workspaces, audit, clock } = deps;
  return db.transaction(async (tx) => {
    const plan = await lockPlan(deps, actor, planId, tx);
    await workspaces.requireWritable(actor, plan.workspace_id, tx);
    if (plan.status === 'ACTIVE') return plan;
    if (plan.status !== 'DRAFT') {
      throw new AppError('plan_not_draft', 'Only a DRAFT plan can be published', { current_status: plan.status });
    }
    const now = clock.now();
    const inForce = await planRepo.strategyInForce(planId, now, tx);
    if (!inForce) {
      const live = await planRepo.liveBindings(planId, tx);
      const reason = live.some((b) => b.effective_from > now)
        ? 'its quota strategy binding is not in force yet'
        : 'no published quota strategy is bound to it';
      throw new AppError('plan_not_publishable', `The plan cannot be published: ${reason}`, { current_status: plan.status });
    }
    const updated = await planRepo.updatePlan(planId, { status: 'ACTIVE', published_at: now, updated_at: now }, tx);
    await audit.record(
      actor,
      {
        action: 'plan.published',
        resourceType: 'plan',
        resourceId: planId,
        workspaceId: plan.workspace_id,
        changes: { status: 'ACTIVE', strategyId: inForce.strategy.id },
      },
      tx,
    );
    return updated;
  });
}

/** DRAFT -> PUBLISHED; a published version is immutable, so publishing again is refused. */
export async function publishStrategy(
  { db, planRepo, workspaces, audit, clock }: PlanDeps,
  actor: Actor,
  strategyId: string,
): Promise<QuotaStrategyRow> {
  return db.transaction(async (tx) => {
    const strategy = visibleStrategy(actor, await planRepo.findStrategyForUpdate(strategyId, tx));
    await workspaces.requireWritable(actor, strategy.workspace_id, tx);
    if (strategy.status === 'PUBLISHED') {
      throw new AppError('strategy_published', 'This strategy version is published and immutable; create a new version', {
        current_status: strategy.status,
      });
    }
    const published = await planRepo.publishStrategy(strategyId, clock.now(), tx);
    await audit.record(
      actor,
      {
        action: 'quota_strategy.published',
        resourceType: 'quota_strategy',
        resourceId: strategyId,
        workspaceId: strategy.workspace_id,
        changes: { status: 'PUBLISHED', key: strategy.key, version: strategy.version },
      },
      tx,
    );
    return published;
  });
}

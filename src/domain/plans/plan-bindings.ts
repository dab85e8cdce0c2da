/**
 * The bindings that put one published strategy in force for a plan over a time range.
 * At any instant at most one QUOTA binding of a plan is in force: binding from T ends
 * the one in force at T.
 */
import type { Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, type Actor } from '../actor.js';
import type { Page, PageRequest } from '../pagination.js';
import { loadPlan, lockPlan, type PlanDeps } from './plan-common.js';
import type { BindingRow, PlanRow, QuotaStrategyRow } from './plan-types.js';

/** A published strategy of the plan's workspace, else 4xx on strategyId. */
async function bindableStrategy({ planRepo }: PlanDeps, plan: PlanRow, strategyId: string, tx: Queryable): Promise<QuotaStrategyRow> {
  const strategy = await planRepo.findStrategy(strategyId, tx);
  if (!strategy || strategy.workspace_id !== plan.workspace_id) {
    throw new AppError('strategy_not_found', "Quota strategy not found in this plan's workspace", { param: 'strategyId' });
  }
  if (strategy.status !== 'PUBLISHED') {
    throw new AppError('strategy_not_published', 'Only a published strategy version can be bound', {
      param: 'strategyId',
      current_status: strategy.status,
    });
  }
  return strategy;
}

/** Refuses a binding that would start at or after `from`; ends the one in force at `from` there, returning it. */
async function endCoveringAt({ planRepo }: PlanDeps, planId: string, from: Date, tx: Queryable): Promise<BindingRow | undefined> {
  const live = await planRepo.liveBindings(planId, tx);
  const later = live.find((b) => b.effective_from >= from);
  if (later) {
    throw new AppError(
      'binding_overlap',
      `Binding ${later.id} starts at ${later.effective_from.toISOString()}, not before effectiveFrom; close it first`,
      { param: 'effectiveFrom' },
    );
  }
  const covering = live.find((b) => b.effective_from < from && (b.effective_to === null || b.effective_to > from));
  if (covering) await planRepo.setBindingEnd(covering.id, from, tx);
  return covering;
}

/**
 * Binds a published strategy from `effectiveFrom`, open-ended. The binding in
 * force at that instant is ended there (a version upgrade); a binding that
 * starts at or after it would overlap and is refused.
 */
export async function bind(
  deps: PlanDeps,
  actor: Actor,
  planId: string,
  input: { strategyId: string; effectiveFrom: Date },
): Promise<BindingRow> {
  const { db, planRepo, workspaces, audit, clock } = deps;
  const from = input.effectiveFrom;
  return db.transaction(async (tx) => {
    const plan = await lockPlan(deps, actor, planId, tx);
    await workspaces.requireWritable(actor, plan.workspace_id, tx);
    if (plan.status === 'ARCHIVED') {
      throw new AppError('plan_not_active', 'An archived plan takes no new bindings', { current_status: plan.status });
    }
    const strategy = await bindableStrategy(deps, plan, input.strategyId, tx);
    const covering = await endCoveringAt(deps, planId, from, tx);
    const binding = await planRepo.insertBinding(
      {
        id: newId(),
        workspace_id: plan.workspace_id,
        plan_id: planId,
        strategy_id: strategy.id,
        strategy_type: 'QUOTA',
        effective_from: from,
        effective_to: null,
        created_at: clock.now(),
      },
      tx,
    );
    await audit.record(
      actor,
      {
        action: 'plan.strategy_bound',
        resourceType: 'plan_strategy_binding',
        resourceId: binding.id,
        workspaceId: plan.workspace_id,
        changes: { planId, strategyId: strategy.id, effectiveFrom: from.toISOString(), endedBindingId: covering?.id ?? null },
      },
      tx,
    );
    return binding;
  });
}

export async function listBindings(deps: PlanDeps, actor: Actor, planId: string, page: PageRequest): Promise<Page<BindingRow>> {
  await loadPlan(deps, actor, planId);
  return deps.planRepo.listBindings({ ...page, planId });
}

/**
 * Ends the binding at `effectiveAt`: by default now, or its start if it has
 * not started (a plain close withdraws a scheduled binding). At its start the
 * binding is cancelled (never in force). Already ended by then: 409.
 */
export async function closeBinding(deps: PlanDeps, actor: Actor, bindingId: string, effectiveAt?: Date): Promise<BindingRow> {
  const { db, planRepo, workspaces, audit, clock } = deps;
  const requested = effectiveAt;
  return db.transaction(async (tx) => {
    const found = await planRepo.findBinding(bindingId, tx);
    if (!found) throw new AppError('binding_not_found', 'Strategy binding not found');
    assertVisible(actor, found.workspace_id, 'binding_not_found', 'Strategy binding');
    await lockPlan(deps, actor, found.plan_id, tx);
    await workspaces.requireWritable(actor, found.workspace_id, tx);
    const binding = (await planRepo.findBinding(bindingId, tx))!;
    const now = clock.now();
    const at = requested ?? (binding.effective_from > now ? binding.effective_from : now);
    if (binding.effective_to !== null && binding.effective_to <= at) {
      throw new AppError('binding_closed', `The binding already ended at ${binding.effective_to.toISOString()}`, {
        current_status: 'CLOSED',
      });
    }
    if (at < binding.effective_from) {
      throw new AppError('invalid_parameter', "effectiveAt must not be before the binding's effectiveFrom", { param: 'effectiveAt' });
    }
    const closed = await planRepo.setBindingEnd(bindingId, at, tx);
    await audit.record(
      actor,
      {
        action: 'plan.strategy_binding_closed',
        resourceType: 'plan_strategy_binding',
        resourceId: bindingId,
        workspaceId: binding.workspace_id,
        changes: { effectiveTo: at.toISOString() },
      },
      tx,
    );
    return closed;
  });
}

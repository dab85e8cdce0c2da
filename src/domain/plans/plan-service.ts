/**
 * Plans (DRAFT -> ACTIVE), versioned quota strategies (DRAFT -> PUBLISHED,
 * immutable once published, plan-strategies.ts), the bindings that put one strategy
 * in force for a plan over a time range (plan-bindings.ts), publishing
 * (plan-publish.ts), a plan's rate limits (plan-limits.ts) and its passthrough
 * classes (plan-passthrough.ts). Here the plans themselves; createPlanService binds every rule.
 */
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import type { Actor } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { Page, PageRequest } from '../pagination.js';
import type { RateLimits } from '../rate-limits/rate-types.js';
import { passthroughClassesOf, sameClasses } from '../workspaces/passthrough-classes.js';
import { assertMetadataSize } from '../workspaces/workspace-service.js';
import { bind, closeBinding, listBindings } from './plan-bindings.js';
import { eventThresholdsOf, loadPlan, lockPlan, type PlanDeps } from './plan-common.js';
import { rateColumns, setRateLimits } from './plan-limits.js';
import { setPassthroughClasses } from './plan-passthrough.js';
import { setRequestLog } from './plan-request-log.js';
import { publishPlan, publishStrategy } from './plan-publish.js';
import { createStrategy, getStrategy, listStrategies, strategyInForce } from './plan-strategies.js';
import type { BindingRow, Interval, PlanRow, PlanStatus } from './plan-types.js';

export type { CreateStrategyInput } from './plan-strategies.js';

interface CreatePlanInput {
  key: string;
  name: string;
  billingInterval: Interval;
  metadata?: Record<string, unknown> | undefined;
  rateLimits?: Partial<RateLimits> | undefined;
  /** Percentages (1..1000) of the granted units that raise quota.threshold_crossed where the strategy sets none; unset: 80 and 100. */
  eventThresholds?: number[] | undefined;
  /** The classes of unmetered paths its accesses' calls may take, beside the workspace's; unset: none. */
  passthroughClasses?: string[] | undefined;
}

interface UpdatePlanInput {
  key?: string | undefined;
  name?: string | undefined;
  billingInterval?: Interval | undefined;
  /** Replaces the plan's limits as a whole. */
  rateLimits?: Partial<RateLimits> | undefined;
  /** Replaces the plan's thresholds; null removes them. */
  eventThresholds?: number[] | null | undefined;
  /** Replaces the plan's passthrough classes (on a plan of any status: setPassthroughClasses). */
  passthroughClasses?: string[] | undefined;
}

async function createPlan(
  { db, planRepo, workspaces, audit, clock }: PlanDeps,
  actor: Actor,
  workspaceId: string,
  input: CreatePlanInput,
): Promise<PlanRow> {
  assertMetadataSize(input.metadata);
  const limits = rateColumns(input.rateLimits);
  const thresholds = eventThresholdsOf(input.eventThresholds);
  const classes = passthroughClassesOf(input.passthroughClasses ?? []);
  return db.transaction(async (tx) => {
    await workspaces.requireWritable(actor, workspaceId, tx);
    const now = clock.now();
    const plan = await planRepo.insertPlan(
      {
        id: newId(),
        workspace_id: workspaceId,
        key: input.key,
        name: input.name,
        billing_interval: input.billingInterval,
        status: 'DRAFT',
        metadata: input.metadata ?? {},
        created_at: now,
        updated_at: now,
        published_at: null,
        ...limits,
        event_thresholds: thresholds,
        passthrough_classes: classes,
        request_log: null,
      },
      tx,
    );
    await audit.record(
      actor,
      { action: 'plan.created', resourceType: 'plan', resourceId: plan.id, workspaceId, changes: { ...input } },
      tx,
    );
    return plan;
  });
}

async function listPlans(
  { workspaces, planRepo }: PlanDeps,
  actor: Actor,
  workspaceId: string,
  filter: PageRequest & { status?: PlanStatus; key?: string },
): Promise<Page<PlanRow>> {
  await workspaces.get(actor, workspaceId);
  return planRepo.listPlans({ ...filter, workspaceId });
}

/** The plan and the bindings in force now. */
async function getPlan(deps: PlanDeps, actor: Actor, planId: string): Promise<{ plan: PlanRow; bindings: BindingRow[] }> {
  const plan = await loadPlan(deps, actor, planId);
  const inForce = await deps.planRepo.strategyInForce(planId, deps.clock.now());
  return { plan, bindings: inForce ? [inForce.binding] : [] };
}

async function updatePlan(deps: PlanDeps, actor: Actor, planId: string, input: UpdatePlanInput): Promise<PlanRow> {
  const { db, planRepo, workspaces, audit, clock } = deps;
  rateColumns(input.rateLimits);
  const thresholds = eventThresholdsOf(input.eventThresholds);
  const classes = input.passthroughClasses === undefined ? undefined : passthroughClassesOf(input.passthroughClasses);
  return db.transaction(async (tx) => {
    const plan = await lockPlan(deps, actor, planId, tx);
    await workspaces.requireWritable(actor, plan.workspace_id, tx);
    if (plan.status !== 'DRAFT') {
      throw new AppError('plan_not_draft', 'Only a DRAFT plan can be updated', { current_status: plan.status });
    }
    const patch: Partial<PlanRow> = {};
    if (input.key !== undefined) patch.key = input.key;
    if (input.name !== undefined) patch.name = input.name;
    if (input.billingInterval !== undefined) patch.billing_interval = input.billingInterval;
    if (input.rateLimits !== undefined) Object.assign(patch, rateColumns(input.rateLimits));
    if (input.eventThresholds !== undefined) patch.event_thresholds = thresholds;
    if (classes && !sameClasses(classes, plan.passthrough_classes)) patch.passthrough_classes = classes;
    if (Object.keys(patch).length === 0) return plan;
    const updated = await planRepo.updatePlan(planId, { ...patch, updated_at: clock.now() }, tx);
    await audit.record(
      actor,
      { action: 'plan.updated', resourceType: 'plan', resourceId: planId, workspaceId: plan.workspace_id, changes: { ...input } },
      tx,
    );
    return updated;
  });
}

export const createPlanService = (deps: PlanDeps) =>
  bindDeps(deps, {
    loadPlan,
    strategyInForce,
    createPlan,
    listPlans,
    getPlan,
    updatePlan,
    setRateLimits,
    setPassthroughClasses,
    setRequestLog,
    publishPlan,
    createStrategy,
    listStrategies,
    getStrategy,
    publishStrategy,
    bind,
    listBindings,
    closeBinding,
  });

export type PlanService = ReturnType<typeof createPlanService>;

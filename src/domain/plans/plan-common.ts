/**
 * What every plan rule reads and writes through (PlanDeps), and what they share: a plan
 * or strategy as the actor may see it, and the event thresholds plans and strategies store.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { PlanRepo } from './plan-repo.js';
import type { PlanRow, QuotaStrategyRow } from './plan-types.js';

export const MAX_INT32 = 2_147_483_647;
const MAX_EVENT_THRESHOLDS = 5;

/** What the plan rules read and write through. */
export interface PlanDeps {
  db: Db;
  planRepo: PlanRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
  changes: ChangeFeed;
}

/**
 * The percentages of a period's granted units that raise quota.threshold_crossed, as stored: one to five
 * distinct whole numbers from 1 to 1000, ascending; null stays null (the default applies).
 */
export function eventThresholdsOf(thresholds: number[] | null | undefined): number[] | null {
  if (thresholds === undefined || thresholds === null) return null;
  if (
    thresholds.length < 1 ||
    thresholds.length > MAX_EVENT_THRESHOLDS ||
    thresholds.some((p) => !Number.isInteger(p) || p < 1 || p > 1000) ||
    new Set(thresholds).size !== thresholds.length
  ) {
    throw new AppError(
      'invalid_parameter',
      `eventThresholds must be 1 to ${MAX_EVENT_THRESHOLDS} distinct whole percentages from 1 to 1000`,
      { param: 'eventThresholds' },
    );
  }
  return [...thresholds].sort((a, b) => a - b);
}

function visiblePlan(actor: Actor, plan: PlanRow | undefined): PlanRow {
  if (!plan) throw new AppError('plan_not_found', 'Plan not found');
  assertVisible(actor, plan.workspace_id, 'plan_not_found', 'Plan');
  return plan;
}

export async function loadPlan({ db, planRepo }: PlanDeps, actor: Actor, planId: string, q: Queryable = db): Promise<PlanRow> {
  return visiblePlan(actor, await planRepo.findPlan(planId, q));
}

/** The plan, locked until the transaction ends. */
export async function lockPlan({ planRepo }: PlanDeps, actor: Actor, planId: string, tx: Queryable): Promise<PlanRow> {
  return visiblePlan(actor, await planRepo.findPlanForUpdate(planId, tx));
}

export function visibleStrategy(actor: Actor, strategy: QuotaStrategyRow | undefined): QuotaStrategyRow {
  if (!strategy) throw new AppError('strategy_not_found', 'Quota strategy not found');
  assertVisible(actor, strategy.workspace_id, 'strategy_not_found', 'Quota strategy');
  return strategy;
}

/** The settings of a plan that are operational, not what it sells: set whatever its status. */
type OperationalColumn = 'passthrough_classes' | 'request_log';

/**
 * Sets one of the plan's operational settings whatever its status: nothing when `same` finds it unchanged, else
 * written, audited as `action` (before and after) and applied to the next call on every gateway process (the change
 * feed).
 */
export async function setOperational<C extends OperationalColumn>(
  deps: PlanDeps,
  actor: Actor,
  planId: string,
  change: { column: C; after: PlanRow[C]; same: (before: PlanRow[C], after: PlanRow[C]) => boolean; action: string },
): Promise<PlanRow> {
  const { db, planRepo, workspaces, audit, clock, changes } = deps;
  const { column, after, same, action } = change;
  return db.transaction(async (tx) => {
    const plan = await lockPlan(deps, actor, planId, tx);
    await workspaces.requireWritable(actor, plan.workspace_id, tx);
    const before = plan[column];
    if (same(before, after)) return plan;
    const updated = await planRepo.updatePlan(planId, { [column]: after, updated_at: clock.now() }, tx);
    await audit.record(
      actor,
      { action, resourceType: 'plan', resourceId: planId, workspaceId: plan.workspace_id, changes: { before, after } },
      tx,
    );
    await changes.announce({ kind: 'plan', id: planId }, tx);
    return updated;
  });
}

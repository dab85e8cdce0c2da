/**
 * What every rule of the accesses area reads and writes through (AccessDeps), and what
 * they share: an access as the API shows it, an access locked after the visibility check,
 * the plan and strategy a new period may use, and the first period of an access.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import type { Events } from '../events/outbox.js';
import type { InferenceKeyService } from '../inference-keys/inference-key-service.js';
import type { PlanService } from '../plans/plan-service.js';
import type { PlanRow, QuotaStrategyRow } from '../plans/plan-types.js';
import { openFirstPeriod as openPeriod } from '../quota/period-ledger.js';
import type { QuotaRepo } from '../quota/quota-repo.js';
import type { QuotaService } from '../quota/quota-service.js';
import type { QuotaPeriodRow } from '../quota/quota-types.js';
import type { RateService } from '../rate-limits/rate-service.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { AccessRepo } from './access-repo.js';
import type { AccessRow, AccessView } from './access-types.js';

/** What the access rules read and write through. */
export interface AccessDeps {
  db: Db;
  accessRepo: AccessRepo;
  quotaRepo: QuotaRepo;
  quota: QuotaService;
  rates: RateService;
  plans: PlanService;
  inferenceKeys: InferenceKeyService;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
  changes: ChangeFeed;
  events: Events;
}

export async function view({ accessRepo }: AccessDeps, accessId: string, q: Queryable): Promise<AccessView> {
  const found = await accessRepo.findView(accessId, q);
  if (!found) throw new AppError('access_not_found', 'Workspace access not found');
  return found;
}

/** Locks the access for the rest of the transaction, after the visibility check. */
export async function lockVisible({ accessRepo }: AccessDeps, actor: Actor, accessId: string, tx: Queryable): Promise<AccessRow> {
  const access = await accessRepo.lock(accessId, tx);
  if (!access) throw new AppError('access_not_found', 'Workspace access not found');
  assertVisible(actor, access.workspace_id, 'access_not_found', 'Workspace access');
  return access;
}

/** A plan of the access's workspace that new periods may use. */
export async function activePlanOf(
  { plans }: AccessDeps,
  actor: Actor,
  workspaceId: string,
  planId: string,
  tx: Queryable,
): Promise<PlanRow> {
  const plan = await plans.loadPlan(actor, planId, tx).catch((err: unknown) => {
    if (err instanceof AppError && err.code === 'plan_not_found')
      throw new AppError('plan_not_found', 'Plan not found', { param: 'planId' });
    throw err;
  });
  if (plan.workspace_id !== workspaceId) throw new AppError('plan_not_found', 'Plan not found in this workspace', { param: 'planId' });
  if (plan.status !== 'ACTIVE') {
    throw new AppError('plan_not_active', 'The plan is not ACTIVE; publish it first', { param: 'planId', current_status: plan.status });
  }
  return plan;
}

/** The plan's strategy in force at `at`, which a period starting then is granted from. */
export async function inForce({ plans }: AccessDeps, plan: PlanRow, at: Date, tx: Queryable): Promise<QuotaStrategyRow> {
  const found = await plans.strategyInForce(plan.id, at, tx);
  if (!found) {
    throw new AppError('strategy_not_in_force', `Plan '${plan.key}' has no quota strategy in force at ${at.toISOString()}`, {
      param: 'planId',
    });
  }
  return found.strategy;
}

/** Opens the first period [now, now + resetInterval) from the plan's strategy in force now. */
export async function openFirstPeriod(deps: AccessDeps, access: AccessRow, plan: PlanRow, tx: Queryable): Promise<QuotaPeriodRow> {
  const now = deps.clock.now();
  const strategy = await inForce(deps, plan, now, tx);
  return openPeriod(deps, access, plan.id, strategy, now, tx);
}

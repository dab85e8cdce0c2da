/**
 * A plan's rate limits (docs/rate-limits.md): as its columns, and replaced on a plan
 * whatever its status.
 */
import { AppError } from '../../errors.js';
import type { Actor } from '../actor.js';
import { limitsOf } from '../rate-limits/rate-service.js';
import type { RateLimits } from '../rate-limits/rate-types.js';
import { lockPlan, MAX_INT32, type PlanDeps } from './plan-common.js';
import type { PlanRow } from './plan-types.js';

/** A plan's limits as its columns: each a positive integer or null (absent); anything else 400 naming it. */
export function rateColumns(
  limits: Partial<RateLimits> | undefined,
): Pick<PlanRow, 'requests_per_minute' | 'tokens_per_minute' | 'concurrent_calls'> {
  const one = (value: number | null | undefined, name: string): number | null => {
    if (value === undefined || value === null) return null;
    if (!Number.isInteger(value) || value < 1 || value > MAX_INT32) {
      throw new AppError('invalid_parameter', `rateLimits.${name} must be an integer from 1 to ${MAX_INT32}`, {
        param: `rateLimits.${name}`,
      });
    }
    return value;
  };
  return {
    requests_per_minute: one(limits?.requestsPerMinute, 'requestsPerMinute'),
    tokens_per_minute: one(limits?.tokensPerMinute, 'tokensPerMinute'),
    concurrent_calls: one(limits?.concurrentCalls, 'concurrentCalls'),
  };
}

/**
 * Replaces the plan's rate limits, whatever its status (docs/rate-limits.md: they are operational, not
 * what the plan sells); audited, and applied to the next call on every gateway process (the change feed).
 */
export async function setRateLimits(deps: PlanDeps, actor: Actor, planId: string, limits: Partial<RateLimits>): Promise<PlanRow> {
  const { db, planRepo, workspaces, audit, clock, changes } = deps;
  const columns = rateColumns(limits);
  return db.transaction(async (tx) => {
    const plan = await lockPlan(deps, actor, planId, tx);
    await workspaces.requireWritable(actor, plan.workspace_id, tx);
    const before = limitsOf(plan);
    const after = limitsOf(columns);
    const same = (Object.keys(before) as (keyof RateLimits)[]).every((k) => before[k] === after[k]);
    if (same) return plan;
    const updated = await planRepo.updatePlan(planId, { ...columns, updated_at: clock.now() }, tx);
    await audit.record(
      actor,
      {
        action: 'plan.rate_limits_changed',
        resourceType: 'plan',
        resourceId: planId,
        workspaceId: plan.workspace_id,
        changes: { before, after },
      },
      tx,
    );
    await changes.announce({ kind: 'plan', id: planId }, tx);
    return updated;
  });
}

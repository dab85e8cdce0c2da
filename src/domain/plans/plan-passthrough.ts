/**
 * A plan's passthrough classes (src/protocols/passthrough.ts): the unmetered paths its accesses' gateway calls may
 * take beside those the workspace lets through. Like its rate limits (plan-limits.ts), and unlike what the plan
 * sells (its quota strategy, its billing interval), they are replaced on a plan whatever its status: a class found
 * abused is closed on the live plan at once, and one opened for its users without moving them to another plan.
 */
import type { Actor } from '../actor.js';
import { passthroughClassesOf, sameClasses } from '../workspaces/passthrough-classes.js';
import { lockPlan, type PlanDeps } from './plan-common.js';
import type { PlanRow } from './plan-types.js';

/**
 * Replaces the plan's passthrough classes, whatever its status: audited (`plan.passthrough_classes_changed`, before
 * and after), and applied to the next call on every gateway process (the change feed).
 */
export async function setPassthroughClasses(deps: PlanDeps, actor: Actor, planId: string, classes: string[]): Promise<PlanRow> {
  const { db, planRepo, workspaces, audit, clock, changes } = deps;
  const after = passthroughClassesOf(classes);
  return db.transaction(async (tx) => {
    const plan = await lockPlan(deps, actor, planId, tx);
    await workspaces.requireWritable(actor, plan.workspace_id, tx);
    const before = plan.passthrough_classes;
    if (sameClasses(before, after)) return plan;
    const updated = await planRepo.updatePlan(planId, { passthrough_classes: after, updated_at: clock.now() }, tx);
    await audit.record(
      actor,
      {
        action: 'plan.passthrough_classes_changed',
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

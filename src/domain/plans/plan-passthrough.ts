/**
 * A plan's passthrough classes (src/protocols/passthrough.ts): the unmetered paths its accesses' gateway calls may
 * take beside those the workspace lets through. Like its rate limits (plan-limits.ts), and unlike what the plan
 * sells (its quota strategy, its billing interval), they are replaced on a plan whatever its status: a class found
 * abused is closed on the live plan at once, and one opened for its users without moving them to another plan.
 */
import type { Actor } from '../actor.js';
import { passthroughClassesOf, sameClasses } from '../workspaces/passthrough-classes.js';
import { setOperational, type PlanDeps } from './plan-common.js';
import type { PlanRow } from './plan-types.js';

/**
 * Replaces the plan's passthrough classes, whatever its status: audited (`plan.passthrough_classes_changed`, before
 * and after), and applied to the next call on every gateway process (the change feed).
 */
export async function setPassthroughClasses(deps: PlanDeps, actor: Actor, planId: string, classes: string[]): Promise<PlanRow> {
  return setOperational(deps, actor, planId, {
    column: 'passthrough_classes',
    after: passthroughClassesOf(classes),
    same: sameClasses,
    action: 'plan.passthrough_classes_changed',
  });
}

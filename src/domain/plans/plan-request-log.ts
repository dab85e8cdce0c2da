/**
 * A plan's request log policy (src/domain/workspaces/request-log-policy.ts): whether its accesses' gateway calls keep
 * their request and answer, over the workspace's policy. Like its passthrough classes (plan-passthrough.ts), it is
 * operational, so it is set on a plan whatever its status: a support case on a live plan is looked into without
 * moving its users.
 */
import type { Actor } from '../actor.js';
import { requestLogPolicyOf, samePolicy, type RequestLogPolicyInput } from '../workspaces/request-log-policy.js';
import { setOperational, type PlanDeps } from './plan-common.js';
import type { PlanRow } from './plan-types.js';

/**
 * Sets (null: removes) the plan's request log policy, whatever its status: audited (`plan.request_log_changed`, before
 * and after), and applied to the next call on every gateway process (the change feed).
 */
export async function setRequestLog(deps: PlanDeps, actor: Actor, planId: string, input: RequestLogPolicyInput | null): Promise<PlanRow> {
  return setOperational(deps, actor, planId, {
    column: 'request_log',
    after: requestLogPolicyOf(input),
    same: samePolicy,
    action: 'plan.request_log_changed',
  });
}

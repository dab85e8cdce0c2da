/**
 * What the gateway does with the costs of the calls it records (call-repo.ts returns them with each batch): counts
 * them in the metrics (cost by workspace, connection and model; the calls no price matched), and has the budgets of
 * their workspaces checked (src/domain/budgets/budget-service.ts). Both after the batch is written, never on a call's
 * response path; a check that fails is logged, and the next batch of the workspace checks again.
 */
import type { Logger } from '../observability/logger.js';
import type { RecordedCost } from '../domain/recording/record-sql.js';

export interface SpendDeps {
  /** The budgets' check of the workspaces with a budget that a batch charged. */
  checkBudgets?: ((workspaceIds: string[]) => Promise<void>) | undefined;
  /** Metrics: the cost of a series' calls in a batch, and how many of them no price matched. */
  onCost?: ((workspaceId: string, connectionId: string, model: string, costMicros: bigint | null, unpriced: number) => void) | undefined;
  logger: Logger;
}

export function createCallSpend(deps: SpendDeps) {
  const { checkBudgets, onCost, logger } = deps;
  const pending = new Set<Promise<void>>();

  return {
    /** A batch's costs (summed per series), once it is written. */
    recorded(costs: RecordedCost[]): void {
      if (!costs.length) return;
      const workspaces = new Set<string>();
      for (const c of costs) {
        onCost?.(c.workspace_id, c.connection_id, c.model ?? '', c.cost_micros === null ? null : BigInt(c.cost_micros), Number(c.unpriced));
        if (c.cost_micros !== null && c.budgeted) workspaces.add(c.workspace_id);
      }
      if (!checkBudgets || !workspaces.size) return;
      const check = checkBudgets([...workspaces])
        .catch((err: Error) => {
          logger.warn({ msg: "could not check the workspaces' budgets", error: err.message });
        })
        .finally(() => pending.delete(check));
      pending.add(check);
    },

    /** Waits for the budget checks under way. */
    async drain(): Promise<void> {
      await Promise.all([...pending]);
    },
  };
}

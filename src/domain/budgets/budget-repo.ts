/**
 * All SQL of workspace_budgets, and the spend it is checked against (the cost in usage_key_rollups, added by the
 * statements that record the calls: usage_rollups' sums, in fewer rows).
 */
import type { Queryable } from '../../db/database.js';

export type BudgetPeriod = 'DAY' | 'MONTH';

export interface BudgetRow {
  workspace_id: string;
  period: BudgetPeriod;
  soft_micros: bigint | null;
  hard_micros: bigint | null;
  soft_crossed_window: Date | null;
  hard_crossed_window: Date | null;
  hard_exceeded_until: Date | null;
  updated_at: Date;
}

export function createBudgetRepo(db: Queryable) {
  return {
    async find(workspaceId: string, q: Queryable = db): Promise<BudgetRow | undefined> {
      return q('workspace_budgets').where({ workspace_id: workspaceId }).first();
    },

    /** The budgets of these workspaces, locked in id order (two checks of the same workspaces wait, never deadlock). */
    async lock(workspaceIds: string[], tx: Queryable): Promise<BudgetRow[]> {
      return tx('workspace_budgets').whereIn('workspace_id', workspaceIds).orderBy('workspace_id').forUpdate();
    },

    async upsert(row: BudgetRow, tx: Queryable): Promise<BudgetRow> {
      const [saved] = await tx('workspace_budgets').insert(row).onConflict('workspace_id').merge().returning('*');
      return saved as BudgetRow;
    },

    async update(workspaceId: string, patch: Partial<BudgetRow>, tx: Queryable): Promise<void> {
      await tx('workspace_budgets').where({ workspace_id: workspaceId }).update(patch);
    },

    /** The workspace's currency and time zone: its budget's money, and whose days and months its windows are. */
    async settingsOf(workspaceId: string, q: Queryable = db): Promise<{ currency: string; timeZone: string }> {
      const row: { currency: string; time_zone: string } | undefined = await q('workspaces')
        .where({ id: workspaceId })
        .first('currency', 'time_zone');
      return { currency: row!.currency, timeZone: row!.time_zone };
    },

    /**
     * The workspace's cost recorded from `since`, in micro-units. Costs are summed per UTC hour: the hours that
     * begin at or after `since` count (in a zone whose offset is not a whole hour, from the first hour after its midnight).
     */
    async spentSince(workspaceId: string, since: Date, q: Queryable = db): Promise<bigint> {
      const result = await q.raw(
        'select coalesce(sum(cost_micros), 0)::bigint as spent from usage_key_rollups where workspace_id = ? and hour >= ?',
        [workspaceId, since],
      );
      return BigInt((result.rows as { spent: bigint | string }[])[0]!.spent);
    },
  };
}

export type BudgetRepo = ReturnType<typeof createBudgetRepo>;

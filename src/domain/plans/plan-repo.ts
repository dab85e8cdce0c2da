/** All SQL of plans, quota_strategies and plan_strategy_bindings. */
import type { Queryable } from '../../db/database.js';
import { table } from '../../db/table.js';
import { AppError } from '../../errors.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';
import type { BindingRow, PlanRow, PlanStatus, QuotaStrategyRow, StrategyInForce } from './plan-types.js';

export function createPlanRepo(db: Queryable) {
  const plans = table<PlanRow>(db, 'plans', {
    json: ['metadata', 'event_thresholds', 'passthrough_classes', 'request_log'],
    conflict: (values) => new AppError('plan_key_exists', `A plan with key '${values.key}' exists in this workspace`, { param: 'key' }),
  });
  const strategies = table<QuotaStrategyRow>(db, 'quota_strategies');
  const bindings = table<BindingRow>(db, 'plan_strategy_bindings');
  return {
    insertPlan: plans.insert,
    findPlan: plans.findById,
    findPlanForUpdate: plans.findByIdForUpdate,
    updatePlan: plans.updateById,

    async listPlans(
      filter: PageRequest & { workspaceId: string; status?: PlanStatus | undefined; key?: string | undefined },
      q: Queryable = db,
    ): Promise<Page<PlanRow>> {
      const query = q('plans').select('*').where({ workspace_id: filter.workspaceId });
      if (filter.status) query.where({ status: filter.status });
      if (filter.key) query.where({ key: filter.key });
      return paginate<PlanRow>(query, filter);
    },

    /** Serialises version numbering of one strategy key until the transaction ends. */
    async lockStrategyKey(workspaceId: string, key: string, q: Queryable): Promise<void> {
      await q.raw('select pg_advisory_xact_lock(hashtext(?))', [`quota_strategy:${workspaceId}:${key}`]);
    },

    async nextStrategyVersion(workspaceId: string, key: string, q: Queryable): Promise<number> {
      const row = await q('quota_strategies').where({ workspace_id: workspaceId, key }).max('version as v').first();
      return Number((row as { v: number | null } | undefined)?.v ?? 0) + 1;
    },

    /** A version numbered twice at once fails on its unique key, unmapped: the service retries it (withVersionRetry). */
    async insertStrategy(row: QuotaStrategyRow, tx: Queryable): Promise<QuotaStrategyRow> {
      const columns = {
        ...row,
        // JSON text: knex would send an array as a PostgreSQL array.
        model_rules: JSON.stringify(row.model_rules),
        kind_multipliers: row.kind_multipliers ? JSON.stringify(row.kind_multipliers) : null,
        allowed_models: row.allowed_models === null ? null : JSON.stringify(row.allowed_models),
        event_thresholds: row.event_thresholds ? JSON.stringify(row.event_thresholds) : null,
      };
      const [created] = await tx('quota_strategies').insert(columns).returning('*');
      return created as QuotaStrategyRow;
    },
    findStrategy: strategies.findById,
    findStrategyForUpdate: strategies.findByIdForUpdate,

    async publishStrategy(id: string, at: Date, q: Queryable): Promise<QuotaStrategyRow> {
      const [updated] = await q('quota_strategies')
        .where({ id, status: 'DRAFT' })
        .update({ status: 'PUBLISHED', published_at: at })
        .returning('*');
      return updated as QuotaStrategyRow;
    },

    async listStrategies(
      filter: PageRequest & { workspaceId: string; key?: string | undefined; status?: 'DRAFT' | 'PUBLISHED' | undefined },
      q: Queryable = db,
    ): Promise<Page<QuotaStrategyRow>> {
      const query = q('quota_strategies').select('*').where({ workspace_id: filter.workspaceId });
      if (filter.key) query.where({ key: filter.key });
      if (filter.status) query.where({ status: filter.status });
      return paginate<QuotaStrategyRow>(query, filter);
    },

    insertBinding: bindings.insert,
    findBinding: bindings.findById,

    async setBindingEnd(id: string, end: Date, tx: Queryable): Promise<BindingRow> {
      return bindings.updateById(id, { effective_to: end }, tx);
    },

    /** Bindings that are not empty (a binding closed at its start was cancelled). */
    async liveBindings(planId: string, q: Queryable = db): Promise<BindingRow[]> {
      return q('plan_strategy_bindings')
        .where({ plan_id: planId })
        .where((w) => void w.whereNull('effective_to').orWhereRaw('effective_to > effective_from'))
        .orderBy('effective_from', 'asc');
    },

    async listBindings(filter: PageRequest & { planId: string }, q: Queryable = db): Promise<Page<BindingRow>> {
      return paginate<BindingRow>(q('plan_strategy_bindings').select('*').where({ plan_id: filter.planId }), filter);
    },

    /** The binding in force at `at` and its strategy: effective_from <= at < effective_to. */
    async strategyInForce(planId: string, at: Date, q: Queryable = db): Promise<StrategyInForce | undefined> {
      const binding = (await q('plan_strategy_bindings')
        .where({ plan_id: planId })
        .where('effective_from', '<=', at)
        .where((w) => void w.whereNull('effective_to').orWhere('effective_to', '>', at))
        .orderBy('effective_from', 'desc')
        .first()) as BindingRow | undefined;
      if (!binding) return undefined;
      const strategy = (await strategies.findById(binding.strategy_id, q))!;
      return { binding, strategy };
    },
  };
}

export type PlanRepo = ReturnType<typeof createPlanRepo>;

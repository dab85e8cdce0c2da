/**
 * Plans (DRAFT -> ACTIVE), versioned quota strategies (DRAFT -> PUBLISHED,
 * immutable once published) and the bindings that put one strategy in force
 * for a plan over a time range. At any instant at most one QUOTA binding of a
 * plan is in force: binding from T ends the one in force at T.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError, isUniqueViolation } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import type { Page, PageRequest } from '../pagination.js';
import { assertMetadataSize, type WorkspaceService } from '../workspaces/workspace-service.js';
import { patternProblem, rulesToStored, type ModelRule } from '../quota/model-pricing.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import { limitsOf } from '../rate-limits/rate-service.js';
import type { RateLimits } from '../rate-limits/rate-types.js';
import type { PlanRepo } from './plan-repo.js';
import type { BindingRow, Interval, OutputCapPolicy, PlanRow, PlanStatus, QuotaStrategyRow, StrategyInForce } from './plan-types.js';

export interface CreatePlanInput {
  key: string;
  name: string;
  billingInterval: Interval;
  metadata?: Record<string, unknown> | undefined;
  rateLimits?: Partial<RateLimits> | undefined;
  /** Percentages (1..1000) of the granted units that raise quota.threshold_crossed where the strategy sets none; unset: 80 and 100. */
  eventThresholds?: number[] | undefined;
}

export interface UpdatePlanInput {
  key?: string | undefined;
  name?: string | undefined;
  billingInterval?: Interval | undefined;
  /** Replaces the plan's limits as a whole. */
  rateLimits?: Partial<RateLimits> | undefined;
  /** Replaces the plan's thresholds; null removes them. */
  eventThresholds?: number[] | null | undefined;
}

export interface CreateStrategyInput {
  key: string;
  resetInterval: Interval;
  quotaUnits: bigint;
  inputMultiplierPpm: bigint;
  outputMultiplierPpm: bigint;
  cachedInputMultiplierPpm: bigint;
  maxOutputTokens: number;
  /** Tried in list order: the first whose pattern matches the requested model applies. */
  modelRules: ModelRule[];
  /** null: every model. */
  allowedModels: string[] | null;
  outputCapPolicy: OutputCapPolicy;
  /** Percentages (1..1000) of the granted units that raise quota.threshold_crossed; unset: the plan's, else 80 and 100. */
  eventThresholds?: number[] | undefined;
}

const MAX_INT32 = 2_147_483_647;
const MAX_MODEL_RULES = 100;
const MAX_ALLOWED_MODELS = 200;
const MAX_EVENT_THRESHOLDS = 5;

/**
 * The percentages of a period's granted units that raise quota.threshold_crossed, as stored: one to five
 * distinct whole numbers from 1 to 1000, ascending; null stays null (the default applies).
 */
function eventThresholdsOf(thresholds: number[] | null | undefined): number[] | null {
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

/** Patterns valid, none listed twice: a second rule with the same pattern could never apply. */
function checkPatterns(patterns: string[], param: string, max: number): void {
  if (patterns.length > max) throw new AppError('invalid_parameter', `${param} may hold at most ${max} entries`, { param });
  const seen = new Set<string>();
  patterns.forEach((pattern, i) => {
    const at = param === 'modelRules' ? `modelRules.${i}.pattern` : `${param}.${i}`;
    const problem = patternProblem(pattern);
    if (problem) throw new AppError('invalid_parameter', `${at} ${problem}`, { param: at });
    if (seen.has(pattern)) throw new AppError('invalid_parameter', `${at} repeats the pattern '${pattern}'`, { param: at });
    seen.add(pattern);
  });
}

/** A plan's limits as its columns: each a positive integer or null (absent); anything else 400 naming it. */
function rateColumns(
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

export function createPlanService(deps: {
  db: Db;
  planRepo: PlanRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
  changes: ChangeFeed;
}) {
  const { db, planRepo, workspaces, audit, clock, changes } = deps;

  function visiblePlan(actor: Actor, plan: PlanRow | undefined): PlanRow {
    if (!plan) throw new AppError('plan_not_found', 'Plan not found');
    assertVisible(actor, plan.workspace_id, 'plan_not_found', 'Plan');
    return plan;
  }

  async function loadPlan(actor: Actor, planId: string, q: Queryable = db): Promise<PlanRow> {
    return visiblePlan(actor, await planRepo.findPlan(planId, q));
  }

  /** The plan, locked until the transaction ends. */
  async function lockPlan(actor: Actor, planId: string, tx: Queryable): Promise<PlanRow> {
    return visiblePlan(actor, await planRepo.findPlanForUpdate(planId, tx));
  }

  function visibleStrategy(actor: Actor, strategy: QuotaStrategyRow | undefined): QuotaStrategyRow {
    if (!strategy) throw new AppError('strategy_not_found', 'Quota strategy not found');
    assertVisible(actor, strategy.workspace_id, 'strategy_not_found', 'Quota strategy');
    return strategy;
  }

  /** Retries a transaction that lost a race on a unique key (strategy versions). */
  async function withVersionRetry<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (attempt < 5 && isUniqueViolation(err, 'quota_strategies_key_version_unique')) continue;
        throw err;
      }
    }
  }

  return {
    loadPlan,

    /** The plan's strategy in force at `at` (accesses use it for periods). */
    strategyInForce(planId: string, at: Date, q: Queryable = db): Promise<StrategyInForce | undefined> {
      return planRepo.strategyInForce(planId, at, q);
    },

    async createPlan(actor: Actor, workspaceId: string, input: CreatePlanInput): Promise<PlanRow> {
      assertMetadataSize(input.metadata);
      const limits = rateColumns(input.rateLimits);
      const thresholds = eventThresholdsOf(input.eventThresholds);
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
    },

    async listPlans(
      actor: Actor,
      workspaceId: string,
      filter: PageRequest & { status?: PlanStatus; key?: string },
    ): Promise<Page<PlanRow>> {
      await workspaces.get(actor, workspaceId);
      return planRepo.listPlans({ ...filter, workspaceId });
    },

    /** The plan and the bindings in force now. */
    async getPlan(actor: Actor, planId: string): Promise<{ plan: PlanRow; bindings: BindingRow[] }> {
      const plan = await loadPlan(actor, planId);
      const inForce = await planRepo.strategyInForce(planId, clock.now());
      return { plan, bindings: inForce ? [inForce.binding] : [] };
    },

    async updatePlan(actor: Actor, planId: string, input: UpdatePlanInput): Promise<PlanRow> {
      rateColumns(input.rateLimits);
      const thresholds = eventThresholdsOf(input.eventThresholds);
      return db.transaction(async (tx) => {
        const plan = await lockPlan(actor, planId, tx);
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
        if (Object.keys(patch).length === 0) return plan;
        const updated = await planRepo.updatePlan(planId, { ...patch, updated_at: clock.now() }, tx);
        await audit.record(
          actor,
          { action: 'plan.updated', resourceType: 'plan', resourceId: planId, workspaceId: plan.workspace_id, changes: { ...input } },
          tx,
        );
        return updated;
      });
    },

    /**
     * Replaces the plan's rate limits, whatever its status (docs/rate-limits.md: they are operational, not
     * what the plan sells); audited, and applied to the next call on every gateway process (the change feed).
     */
    async setRateLimits(actor: Actor, planId: string, limits: Partial<RateLimits>): Promise<PlanRow> {
      const columns = rateColumns(limits);
      return db.transaction(async (tx) => {
        const plan = await lockPlan(actor, planId, tx);
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
    },

    /** DRAFT -> ACTIVE once a published strategy is bound and in force; ACTIVE again is a no-op. */
    async publishPlan(actor: Actor, planId: string): Promise<PlanRow> {
      return db.transaction(async (tx) => {
        const plan = await lockPlan(actor, planId, tx);
        await workspaces.requireWritable(actor, plan.workspace_id, tx);
        if (plan.status === 'ACTIVE') return plan;
        if (plan.status !== 'DRAFT') {
          throw new AppError('plan_not_draft', 'Only a DRAFT plan can be published', { current_status: plan.status });
        }
        const now = clock.now();
        const inForce = await planRepo.strategyInForce(planId, now, tx);
        if (!inForce) {
          const live = await planRepo.liveBindings(planId, tx);
          const reason = live.some((b) => b.effective_from > now)
            ? 'its quota strategy binding is not in force yet'
            : 'no published quota strategy is bound to it';
          throw new AppError('plan_not_publishable', `The plan cannot be published: ${reason}`, { current_status: plan.status });
        }
        const updated = await planRepo.updatePlan(planId, { status: 'ACTIVE', published_at: now, updated_at: now }, tx);
        await audit.record(
          actor,
          {
            action: 'plan.published',
            resourceType: 'plan',
            resourceId: planId,
            workspaceId: plan.workspace_id,
            changes: { status: 'ACTIVE', strategyId: inForce.strategy.id },
          },
          tx,
        );
        return updated;
      });
    },

    async createStrategy(actor: Actor, workspaceId: string, input: CreateStrategyInput): Promise<QuotaStrategyRow> {
      const values = {
        quota_units: input.quotaUnits,
        input_multiplier_ppm: input.inputMultiplierPpm,
        output_multiplier_ppm: input.outputMultiplierPpm,
        cached_input_multiplier_ppm: input.cachedInputMultiplierPpm,
      };
      if (!Number.isInteger(input.maxOutputTokens) || input.maxOutputTokens < 1 || input.maxOutputTokens > MAX_INT32) {
        throw new AppError('invalid_parameter', `maxOutputTokens must be an integer from 1 to ${MAX_INT32}`, { param: 'maxOutputTokens' });
      }
      checkPatterns(
        input.modelRules.map((r) => r.pattern),
        'modelRules',
        MAX_MODEL_RULES,
      );
      if (input.allowedModels !== null) {
        if (input.allowedModels.length === 0) {
          throw new AppError(
            'invalid_parameter',
            'allowedModels must list at least one model; omit it (or send null) to allow every model',
            {
              param: 'allowedModels',
            },
          );
        }
        checkPatterns(input.allowedModels, 'allowedModels', MAX_ALLOWED_MODELS);
      }
      if (input.outputCapPolicy !== 'clamp' && input.outputCapPolicy !== 'refuse') {
        throw new AppError('invalid_parameter', 'outputCapPolicy must be clamp or refuse', { param: 'outputCapPolicy' });
      }
      const thresholds = eventThresholdsOf(input.eventThresholds);
      return withVersionRetry(() =>
        db.transaction(async (tx) => {
          await workspaces.requireWritable(actor, workspaceId, tx);
          await planRepo.lockStrategyKey(workspaceId, input.key, tx);
          const version = await planRepo.nextStrategyVersion(workspaceId, input.key, tx);
          const strategy = await planRepo.insertStrategy(
            {
              id: newId(),
              workspace_id: workspaceId,
              key: input.key,
              version,
              type: 'QUOTA',
              reset_interval: input.resetInterval,
              ...values,
              max_output_tokens: input.maxOutputTokens,
              model_rules: rulesToStored(input.modelRules),
              allowed_models: input.allowedModels,
              output_cap_policy: input.outputCapPolicy,
              event_thresholds: thresholds,
              status: 'DRAFT',
              created_at: clock.now(),
              published_at: null,
            },
            tx,
          );
          await audit.record(
            actor,
            {
              action: 'quota_strategy.created',
              resourceType: 'quota_strategy',
              resourceId: strategy.id,
              workspaceId,
              changes: { ...input, version },
            },
            tx,
          );
          return strategy;
        }),
      );
    },

    async listStrategies(
      actor: Actor,
      workspaceId: string,
      filter: PageRequest & { key?: string; status?: 'DRAFT' | 'PUBLISHED' },
    ): Promise<Page<QuotaStrategyRow>> {
      await workspaces.get(actor, workspaceId);
      return planRepo.listStrategies({ ...filter, workspaceId });
    },

    async getStrategy(actor: Actor, strategyId: string): Promise<QuotaStrategyRow> {
      return visibleStrategy(actor, await planRepo.findStrategy(strategyId));
    },

    /** DRAFT -> PUBLISHED; a published version is immutable, so publishing again is refused. */
    async publishStrategy(actor: Actor, strategyId: string): Promise<QuotaStrategyRow> {
      return db.transaction(async (tx) => {
        const strategy = visibleStrategy(actor, await planRepo.findStrategyForUpdate(strategyId, tx));
        await workspaces.requireWritable(actor, strategy.workspace_id, tx);
        if (strategy.status === 'PUBLISHED') {
          throw new AppError('strategy_published', 'This strategy version is published and immutable; create a new version', {
            current_status: strategy.status,
          });
        }
        const published = await planRepo.publishStrategy(strategyId, clock.now(), tx);
        await audit.record(
          actor,
          {
            action: 'quota_strategy.published',
            resourceType: 'quota_strategy',
            resourceId: strategyId,
            workspaceId: strategy.workspace_id,
            changes: { status: 'PUBLISHED', key: strategy.key, version: strategy.version },
          },
          tx,
        );
        return published;
      });
    },

    /**
     * Binds a published strategy from `effectiveFrom`, open-ended. The binding in
     * force at that instant is ended there (a version upgrade); a binding that
     * starts at or after it would overlap and is refused.
     */
    async bind(actor: Actor, planId: string, input: { strategyId: string; effectiveFrom: Date }): Promise<BindingRow> {
      const from = input.effectiveFrom;
      return db.transaction(async (tx) => {
        const plan = await lockPlan(actor, planId, tx);
        await workspaces.requireWritable(actor, plan.workspace_id, tx);
        if (plan.status === 'ARCHIVED') {
          throw new AppError('plan_not_active', 'An archived plan takes no new bindings', { current_status: plan.status });
        }
        const strategy = await planRepo.findStrategy(input.strategyId, tx);
        if (!strategy || strategy.workspace_id !== plan.workspace_id) {
          throw new AppError('strategy_not_found', "Quota strategy not found in this plan's workspace", { param: 'strategyId' });
        }
        if (strategy.status !== 'PUBLISHED') {
          throw new AppError('strategy_not_published', 'Only a published strategy version can be bound', {
            param: 'strategyId',
            current_status: strategy.status,
          });
        }
        const live = await planRepo.liveBindings(planId, tx);
        const later = live.find((b) => b.effective_from >= from);
        if (later) {
          throw new AppError(
            'binding_overlap',
            `Binding ${later.id} starts at ${later.effective_from.toISOString()}, not before effectiveFrom; close it first`,
            { param: 'effectiveFrom' },
          );
        }
        const covering = live.find((b) => b.effective_from < from && (b.effective_to === null || b.effective_to > from));
        if (covering) await planRepo.setBindingEnd(covering.id, from, tx);
        const binding = await planRepo.insertBinding(
          {
            id: newId(),
            workspace_id: plan.workspace_id,
            plan_id: planId,
            strategy_id: strategy.id,
            strategy_type: 'QUOTA',
            effective_from: from,
            effective_to: null,
            created_at: clock.now(),
          },
          tx,
        );
        await audit.record(
          actor,
          {
            action: 'plan.strategy_bound',
            resourceType: 'plan_strategy_binding',
            resourceId: binding.id,
            workspaceId: plan.workspace_id,
            changes: { planId, strategyId: strategy.id, effectiveFrom: from.toISOString(), endedBindingId: covering?.id ?? null },
          },
          tx,
        );
        return binding;
      });
    },

    async listBindings(actor: Actor, planId: string, page: PageRequest): Promise<Page<BindingRow>> {
      await loadPlan(actor, planId);
      return planRepo.listBindings({ ...page, planId });
    },

    /**
     * Ends the binding at `effectiveAt`: by default now, or its start if it has
     * not started (a plain close withdraws a scheduled binding). At its start the
     * binding is cancelled (never in force). Already ended by then: 409.
     */
    async closeBinding(actor: Actor, bindingId: string, effectiveAt?: Date): Promise<BindingRow> {
      const requested = effectiveAt;
      return db.transaction(async (tx) => {
        const found = await planRepo.findBinding(bindingId, tx);
        if (!found) throw new AppError('binding_not_found', 'Strategy binding not found');
        assertVisible(actor, found.workspace_id, 'binding_not_found', 'Strategy binding');
        await lockPlan(actor, found.plan_id, tx);
        await workspaces.requireWritable(actor, found.workspace_id, tx);
        const binding = (await planRepo.findBinding(bindingId, tx))!;
        const now = clock.now();
        const at = requested ?? (binding.effective_from > now ? binding.effective_from : now);
        if (binding.effective_to !== null && binding.effective_to <= at) {
          throw new AppError('binding_closed', `The binding already ended at ${binding.effective_to.toISOString()}`, {
            current_status: 'CLOSED',
          });
        }
        if (at < binding.effective_from) {
          throw new AppError('invalid_parameter', "effectiveAt must not be before the binding's effectiveFrom", { param: 'effectiveAt' });
        }
        const closed = await planRepo.setBindingEnd(bindingId, at, tx);
        await audit.record(
          actor,
          {
            action: 'plan.strategy_binding_closed',
            resourceType: 'plan_strategy_binding',
            resourceId: bindingId,
            workspaceId: binding.workspace_id,
            changes: { effectiveTo: at.toISOString() },
          },
          tx,
        );
        return closed;
      });
    },
  };
}

export type PlanService = ReturnType<typeof createPlanService>;

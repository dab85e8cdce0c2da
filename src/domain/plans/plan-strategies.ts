/**
 * Versioned quota strategies: each new version of a key DRAFT, immutable once published
 * (plan-publish.ts); and the strategy a plan has in force at an instant.
 */
import type { Queryable } from '../../db/database.js';
import { AppError, isUniqueViolation } from '../../errors.js';
import { newId } from '../../ids.js';
import type { Actor } from '../actor.js';
import type { Page, PageRequest } from '../pagination.js';
import { kindsToStored, patternProblem, rulesToStored, type KindMultipliers, type ModelRule } from '../quota/model-pricing.js';
import { eventThresholdsOf, MAX_INT32, visibleStrategy, type PlanDeps } from './plan-common.js';
import type { Interval, OutputCapPolicy, QuotaStrategyRow, StrategyInForce } from './plan-types.js';

export interface CreateStrategyInput {
  key: string;
  resetInterval: Interval;
  quotaUnits: bigint;
  inputMultiplierPpm: bigint;
  outputMultiplierPpm: bigint;
  cachedInputMultiplierPpm: bigint;
  /** The kinds beyond text tokens' own multipliers (absent: each at its default, docs/pricing.md "Kinds"). */
  kindMultipliers: KindMultipliers;
  maxOutputTokens: number;
  /** Tried in list order: the first whose pattern matches the requested model applies. */
  modelRules: ModelRule[];
  /** null: every model. */
  allowedModels: string[] | null;
  outputCapPolicy: OutputCapPolicy;
  /** Percentages (1..1000) of the granted units that raise quota.threshold_crossed; unset: the plan's, else 80 and 100. */
  eventThresholds?: number[] | undefined;
}

const MAX_MODEL_RULES = 100;
const MAX_ALLOWED_MODELS = 200;

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

/** A new version's fields, each valid, else 400 naming it; returns its thresholds as stored. */
function checkStrategyInput(input: CreateStrategyInput): number[] | null {
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
      throw new AppError('invalid_parameter', 'allowedModels must list at least one model; omit it (or send null) to allow every model', {
        param: 'allowedModels',
      });
    }
    checkPatterns(input.allowedModels, 'allowedModels', MAX_ALLOWED_MODELS);
  }
  if (input.outputCapPolicy !== 'clamp' && input.outputCapPolicy !== 'refuse') {
    throw new AppError('invalid_parameter', 'outputCapPolicy must be clamp or refuse', { param: 'outputCapPolicy' });
  }
  return eventThresholdsOf(input.eventThresholds);
}

/** The kinds' multipliers as stored: null when none is set. */
function storedKinds(kinds: KindMultipliers) {
  const stored = kindsToStored(kinds);
  return Object.keys(stored).length === 0 ? null : stored;
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

/** The plan's strategy in force at `at` (accesses use it for periods). */
export function strategyInForce(
  { db, planRepo }: PlanDeps,
  planId: string,
  at: Date,
  q: Queryable = db,
): Promise<StrategyInForce | undefined> {
  return planRepo.strategyInForce(planId, at, q);
}

export async function createStrategy(
  deps: PlanDeps,
  actor: Actor,
  workspaceId: string,
  input: CreateStrategyInput,
): Promise<QuotaStrategyRow> {
  const { db, planRepo, workspaces, audit, clock } = deps;
  const thresholds = checkStrategyInput(input);
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
          quota_units: input.quotaUnits,
          input_multiplier_ppm: input.inputMultiplierPpm,
          output_multiplier_ppm: input.outputMultiplierPpm,
          cached_input_multiplier_ppm: input.cachedInputMultiplierPpm,
          kind_multipliers: storedKinds(input.kindMultipliers),
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
}

export async function listStrategies(
  { workspaces, planRepo }: PlanDeps,
  actor: Actor,
  workspaceId: string,
  filter: PageRequest & { key?: string; status?: 'DRAFT' | 'PUBLISHED' },
): Promise<Page<QuotaStrategyRow>> {
  await workspaces.get(actor, workspaceId);
  return planRepo.listStrategies({ ...filter, workspaceId });
}

export async function getStrategy({ planRepo }: PlanDeps, actor: Actor, strategyId: string): Promise<QuotaStrategyRow> {
  return visibleStrategy(actor, await planRepo.findStrategy(strategyId));
}

/** Rows <-> DTOs for plans, strategies and bindings; the only bigint <-> string place here. */
import type {
  CreateQuotaStrategyDto,
  Int64String,
  PlanDetailDto,
  QuotaStrategyDto,
  RateLimits,
  StrategyBindingDto,
  WorkspacePlanDto,
} from '../../../generated/client/types.gen.js';
import { AppError } from '../../errors.js';
import type { ModelRule } from '../../domain/quota/model-pricing.js';
import { INT64_MAX } from '../../domain/quota/quota-math.js';
import type { CreateStrategyInput } from '../../domain/plans/plan-service.js';
import type { BindingRow, PlanRow, QuotaStrategyRow } from '../../domain/plans/plan-types.js';

/** A decimal string to bigint: digits only, 0 .. 2^63-1, else 400 naming the field. */
export function parseInt64(value: string, param: string): bigint {
  if (!/^(0|[1-9][0-9]*)$/.test(value)) {
    throw new AppError('invalid_parameter', `${param} must be a non-negative decimal integer string`, { param });
  }
  const n = BigInt(value);
  if (n > INT64_MAX) throw new AppError('invalid_parameter', `${param} must be at most 9223372036854775807`, { param });
  return n;
}

/** A createQuotaStrategy body to the service's input: its 64-bit decimal strings as bigints. */
export function fromCreateStrategyDto(dto: CreateQuotaStrategyDto): CreateStrategyInput {
  return {
    key: dto.key,
    resetInterval: dto.resetInterval,
    quotaUnits: parseInt64(dto.quotaUnits, 'quotaUnits'),
    inputMultiplierPpm: parseInt64(dto.inputMultiplierPpm, 'inputMultiplierPpm'),
    outputMultiplierPpm: parseInt64(dto.outputMultiplierPpm, 'outputMultiplierPpm'),
    cachedInputMultiplierPpm: parseInt64(dto.cachedInputMultiplierPpm, 'cachedInputMultiplierPpm'),
    maxOutputTokens: dto.maxOutputTokens,
    modelRules: (dto.modelRules ?? []).map((rule, i): ModelRule => ({
      pattern: rule.pattern,
      inputMultiplierPpm: parseInt64(rule.inputMultiplierPpm, `modelRules.${i}.inputMultiplierPpm`),
      cachedInputMultiplierPpm: parseInt64(rule.cachedInputMultiplierPpm, `modelRules.${i}.cachedInputMultiplierPpm`),
      outputMultiplierPpm: parseInt64(rule.outputMultiplierPpm, `modelRules.${i}.outputMultiplierPpm`),
    })),
    allowedModels: dto.allowedModels ?? null,
    outputCapPolicy: dto.outputCapPolicy ?? 'clamp',
    ...(dto.eventThresholds ? { eventThresholds: dto.eventThresholds } : {}),
  };
}

export function toPlanDto(row: PlanRow): WorkspacePlanDto {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    key: row.key,
    name: row.name,
    billingInterval: row.billing_interval,
    status: row.status,
    metadata: row.metadata,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    ...(row.published_at ? { publishedAt: row.published_at.toISOString() } : {}),
    rateLimits: toRateLimitsDto(row),
    ...(row.event_thresholds ? { eventThresholds: row.event_thresholds } : {}),
    passthroughClasses: row.passthrough_classes,
  };
}

/** The plan's limits on the wire: only those it sets. */
function toRateLimitsDto(row: Pick<PlanRow, 'requests_per_minute' | 'tokens_per_minute' | 'concurrent_calls'>): RateLimits {
  return {
    ...(row.requests_per_minute !== null ? { requestsPerMinute: row.requests_per_minute } : {}),
    ...(row.tokens_per_minute !== null ? { tokensPerMinute: row.tokens_per_minute } : {}),
    ...(row.concurrent_calls !== null ? { concurrentCalls: row.concurrent_calls } : {}),
  };
}

export function toPlanDetailDto(row: PlanRow, bindings: BindingRow[]): PlanDetailDto {
  return { ...toPlanDto(row), strategyBindings: bindings.map(toBindingDto) };
}

export function toStrategyDto(row: QuotaStrategyRow): QuotaStrategyDto {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    key: row.key,
    version: row.version,
    type: row.type,
    resetInterval: row.reset_interval,
    quotaUnits: `${row.quota_units}`,
    inputMultiplierPpm: `${row.input_multiplier_ppm}`,
    outputMultiplierPpm: `${row.output_multiplier_ppm}`,
    cachedInputMultiplierPpm: `${row.cached_input_multiplier_ppm}`,
    maxOutputTokens: row.max_output_tokens,
    modelRules: row.model_rules.map((r) => ({
      pattern: r.pattern,
      inputMultiplierPpm: r.inputMultiplierPpm as Int64String,
      cachedInputMultiplierPpm: r.cachedInputMultiplierPpm as Int64String,
      outputMultiplierPpm: r.outputMultiplierPpm as Int64String,
    })),
    ...(row.allowed_models ? { allowedModels: [...row.allowed_models] } : {}),
    outputCapPolicy: row.output_cap_policy,
    ...(row.event_thresholds ? { eventThresholds: row.event_thresholds } : {}),
    status: row.status,
    createdAt: row.created_at.toISOString(),
    ...(row.published_at ? { publishedAt: row.published_at.toISOString() } : {}),
  };
}

export function toBindingDto(row: BindingRow): StrategyBindingDto {
  return {
    id: row.id,
    planId: row.plan_id,
    strategyId: row.strategy_id,
    strategyType: row.strategy_type,
    effectiveFrom: row.effective_from.toISOString(),
    ...(row.effective_to ? { effectiveTo: row.effective_to.toISOString() } : {}),
    createdAt: row.created_at.toISOString(),
  };
}

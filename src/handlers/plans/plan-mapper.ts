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
import { KIND_MULTIPLIERS, type KindMultipliers, type ModelRule, type StoredKindMultipliers } from '../../domain/quota/model-pricing.js';
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

/** An image tier: `{quality}/{size}` as a request names them. */
const TIER = /^[a-z0-9_-]{1,32}\/[a-z0-9_-]{1,32}$/;
const MAX_TIERS = 50;

/** The kinds' multipliers of a strategy or a rule on the wire (`at`: its field path's prefix), as bigints; 400 naming a bad one. */
function kindsFromDto(dto: StoredKindMultipliers, at: string): KindMultipliers {
  const kinds: KindMultipliers = {};
  for (const name of KIND_MULTIPLIERS) {
    const value = dto[name];
    if (value !== undefined) kinds[name] = parseInt64(value, `${at}${name}`);
  }
  const tiers = dto.imageTierMultipliersPpm;
  if (tiers !== undefined) {
    const param = `${at}imageTierMultipliersPpm`;
    const entries = Object.entries(tiers);
    if (entries.length > MAX_TIERS) throw new AppError('invalid_parameter', `${param} may hold at most ${MAX_TIERS} tiers`, { param });
    kinds.imageTierMultipliersPpm = Object.fromEntries(
      entries.map(([tier, value]) => {
        if (!TIER.test(tier)) {
          throw new AppError('invalid_parameter', `${param} names '${tier}', not a tier {quality}/{size} (hd/1024x1792)`, { param });
        }
        return [tier, parseInt64(value, `${param}.${tier}`)];
      }),
    );
  }
  return kinds;
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
    kindMultipliers: kindsFromDto(dto, ''),
    maxOutputTokens: dto.maxOutputTokens,
    modelRules: (dto.modelRules ?? []).map((rule, i): ModelRule => ({
      pattern: rule.pattern,
      inputMultiplierPpm: parseInt64(rule.inputMultiplierPpm, `modelRules.${i}.inputMultiplierPpm`),
      cachedInputMultiplierPpm: parseInt64(rule.cachedInputMultiplierPpm, `modelRules.${i}.cachedInputMultiplierPpm`),
      outputMultiplierPpm: parseInt64(rule.outputMultiplierPpm, `modelRules.${i}.outputMultiplierPpm`),
      ...kindsFromDto(rule, `modelRules.${i}.`),
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
    requestLog: row.request_log,
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
    ...kindsDto(row.kind_multipliers),
    maxOutputTokens: row.max_output_tokens,
    modelRules: row.model_rules.map((r) => ({
      ...kindsDto(r),
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

/** The kinds' multipliers a strategy or rule stores, as on the wire (those it sets). */
function kindsDto(
  stored: StoredKindMultipliers | null,
): Pick<QuotaStrategyDto, (typeof KIND_MULTIPLIERS)[number] | 'imageTierMultipliersPpm'> {
  if (!stored) return {};
  const dto: Pick<QuotaStrategyDto, (typeof KIND_MULTIPLIERS)[number] | 'imageTierMultipliersPpm'> = {};
  for (const name of KIND_MULTIPLIERS) if (stored[name] !== undefined) dto[name] = stored[name] as Int64String;
  if (stored.imageTierMultipliersPpm) dto.imageTierMultipliersPpm = stored.imageTierMultipliersPpm as Record<string, Int64String>;
  return dto;
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

import type { RequestLogPolicy } from '../workspaces/request-log-policy.js';
import type { PassthroughClass } from '../../protocols/passthrough.js';
import type { StoredKindMultipliers, StoredModelRule } from '../quota/model-pricing.js';

export type PlanStatus = 'DRAFT' | 'ACTIVE' | 'ARCHIVED';
export type Interval = 'MONTH' | 'YEAR';

export interface PlanRow {
  id: string;
  workspace_id: string;
  key: string;
  name: string;
  billing_interval: Interval;
  status: PlanStatus;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  published_at: Date | null;
  /** Rate limits (docs/rate-limits.md); null: none on that dimension. */
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  concurrent_calls: number | null;
  /** Percentages of the granted units that raise quota.threshold_crossed where the strategy sets none; null: 80 and 100. */
  event_thresholds: number[] | null;
  /** The classes of unmetered paths its accesses' calls may take, beside the workspace's (plan-passthrough.ts). */
  passthrough_classes: PassthroughClass[];
  /** Whether its accesses' calls keep their request and answer, over the workspace's (plan-request-log.ts); null: none set. */
  request_log: RequestLogPolicy | null;
}

export interface QuotaStrategyRow {
  id: string;
  workspace_id: string;
  key: string;
  version: number;
  type: 'QUOTA';
  reset_interval: Interval;
  quota_units: bigint;
  input_multiplier_ppm: bigint;
  output_multiplier_ppm: bigint;
  cached_input_multiplier_ppm: bigint;
  /** The multipliers of the kinds beyond text tokens it sets (docs/pricing.md, "Kinds"); null: every kind at its default. */
  kind_multipliers: StoredKindMultipliers | null;
  max_output_tokens: number;
  /** Tried in order; the first whose pattern matches the requested model prices the call (model-pricing.ts). */
  model_rules: StoredModelRule[];
  /** The models a call may name; null: every model. */
  allowed_models: string[] | null;
  output_cap_policy: OutputCapPolicy;
  /** Percentages of the granted units that raise quota.threshold_crossed; null: the plan's, else 80 and 100. */
  event_thresholds?: number[] | null;
  status: 'DRAFT' | 'PUBLISHED';
  created_at: Date;
  published_at: Date | null;
}

/** A request asking for more output than maxOutputTokens: its cap lowered to it, or refused 400. */
export type OutputCapPolicy = 'clamp' | 'refuse';

export interface BindingRow {
  id: string;
  workspace_id: string;
  plan_id: string;
  strategy_id: string;
  strategy_type: 'QUOTA';
  effective_from: Date;
  effective_to: Date | null;
  created_at: Date;
}

/** A binding and the strategy it binds, as "in force" lookups return them. */
export interface StrategyInForce {
  binding: BindingRow;
  strategy: QuotaStrategyRow;
}

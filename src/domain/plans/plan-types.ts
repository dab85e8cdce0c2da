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
  max_output_tokens: number;
  status: 'DRAFT' | 'PUBLISHED';
  created_at: Date;
  published_at: Date | null;
}

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

import type { RateView } from '../rate-limits/rate-types.js';
type PeriodSource = 'renewal' | 'provision' | 'billing' | 'plan_change';

export interface QuotaPeriodRow {
  id: string;
  workspace_id: string;
  workspace_access_id: string;
  plan_id: string;
  quota_strategy_id: string;
  period_start: Date;
  period_end: Date;
  granted_units: bigint;
  reserved_units: bigint;
  consumed_units: bigint;
  source: PeriodSource;
  external_period_key: string | null;
  cycle_start: Date;
  created_at: Date;
  /** Set on a part a plan change split off: its own share of the cycle's grant (net of what it owed before). */
  share_units?: bigint | null;
  /** What that split charged the part after it (quotaRepo.giveBackCarry). */
  carried_units?: bigint;
  /** Of granted_units, what one-off grants (top-ups) added: moved whole by a plan change, never prorated. */
  topped_up_units?: bigint;
  topped_up_at?: Date | null;
}

/** The kinds beyond text tokens a usage event records (src/domain/recording/kind-sql.ts); null: not reported, or none. */
export interface KindColumns {
  audio_input_tokens?: bigint | null;
  audio_output_tokens?: bigint | null;
  image_input_tokens?: bigint | null;
  image_output_tokens?: bigint | null;
  images?: bigint | null;
  image_tier?: string | null;
  audio_ms?: bigint | null;
  characters?: bigint | null;
}

export interface UsageEventRow extends KindColumns {
  id: string;
  workspace_id: string;
  workspace_access_id: string;
  quota_period_id: string;
  lease_id: string | null;
  invocation_id: string | null;
  kind: 'USAGE' | 'ADJUSTMENT';
  units: bigint;
  input_tokens: bigint;
  cached_input_tokens: bigint;
  output_tokens: bigint;
  model: string | null;
  reason: string | null;
  created_at: Date;
  /** The pricing applied (null on events recorded before it was kept; model_rule null: the strategy's own multipliers). */
  model_rule: string | null;
  input_multiplier_ppm: bigint | null;
  cached_input_multiplier_ppm: bigint | null;
  output_multiplier_ppm: bigint | null;
  /** USAGE events: the provider cost in micro-units of the workspace's currency, under `price_id` (null: unpriced). */
  cost_micros?: bigint | null;
  /** Of the input tokens, those written to the provider's prompt cache; of the output, the reasoning ones (null: not reported). */
  cache_write_tokens?: bigint | null;
  reasoning_tokens?: bigint | null;
  price_id?: string | null;
}

export interface QuotaSnapshot {
  workspaceAccessId: string;
  planId: string;
  quotaStrategyId: string;
  quotaPeriodId: string;
  periodStart: Date;
  periodEnd: Date;
  grantedUnits: bigint;
  reservedUnits: bigint;
  consumedUnits: bigint;
  /** granted - reserved - consumed, floored at 0. */
  availableUnits: bigint;
  /** Where the rate limits of the access's plan stand (none when it sets none). */
  rateLimits?: RateView;
  toppedUpUnits: bigint;
  grantSource: PeriodSource;
  /** A period a plan change opened: how its grant was reckoned. */
  proration?: { cycleStart: Date; planQuotaUnits: bigint; shareUnits: bigint; carriedUnits: bigint };
  /** The median units of the access's last charged calls; none before its first. */
  typicalCallUnits?: bigint;
  /** When the access's latest call was refused for quota in this period, after its last top-up; none otherwise. */
  quotaRefusedAt?: Date;
}

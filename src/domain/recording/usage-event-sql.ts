/**
 * The usage events part of the record statement (record-sql.ts): a charged call appends exactly one USAGE
 * event (at most its bound) and an ADJUSTMENT event for anything consumed beyond it; its events name the lease and
 * the invocation. A USAGE event carries the call's cost under the price in force when it started (price-sql.ts); an
 * ADJUSTMENT event carries units only.
 */
import { KIND_COLUMNS, kindColumnsOf, NO_KINDS } from './kind-sql.js';
import { priceOfCall } from './price-sql.js';
import { ROLLED_EVENT_COLUMNS } from './rollup-sql.js';

const USAGE_COLUMNS = `id, workspace_id, workspace_access_id, quota_period_id, lease_id, invocation_id, kind,
  units, input_tokens, cached_input_tokens, output_tokens, model, reason, created_at,
  model_rule, input_multiplier_ppm, cached_input_multiplier_ppm, output_multiplier_ppm, cost_micros, price_id,
  cache_write_tokens, reasoning_tokens, ${KIND_COLUMNS.join(', ')}`;

/**
 * The events of the calls of CTE `settled` (one row per call: its lease `id`, period, bound, units, `charged`, the
 * events' ids, tokens, model, pricing, `at`, and what price-sql.ts reads), as `u` (USAGE) and `a` (ADJUSTMENT),
 * both in `new_events` for the rollups (rollup-sql.ts). `costScale`: the factor of each cost (price-sql.ts).
 */
export const usageEventCtes = (settled: string, costScale?: string) => `u as (
  insert into usage_events (${USAGE_COLUMNS})
  select s.usage_id, s.workspace_id, s.workspace_access_id, s.quota_period_id, s.id, s.invocation_id, 'USAGE',
         least(s.units, s.bound), s.input_tokens, s.cached_tokens, s.output_tokens, s.model, null, s.at,
         s.model_rule, s.input_ppm, s.cached_ppm, s.output_ppm, mp.cost_micros, mp.id, s.cache_write_tokens, s.reasoning_tokens,
         ${kindColumnsOf('s')}
    from ${settled} s ${priceOfCall('s', costScale)}
   where s.charged and (s.per_call_only is null or mp.per_call is not null)
  returning ${ROLLED_EVENT_COLUMNS}
), a as (
  insert into usage_events (${USAGE_COLUMNS})
  select adjustment_id, workspace_id, workspace_access_id, quota_period_id, id, invocation_id, 'ADJUSTMENT',
         units - bound, 0, 0, 0, model, 'consumed_beyond_reservation', at,
         model_rule, input_ppm, cached_ppm, output_ppm, null, null, null, null, ${NO_KINDS}
    from ${settled} where charged and units > bound
  returning ${ROLLED_EVENT_COLUMNS}
), new_events as (
  select * from u union all select * from a
)`;

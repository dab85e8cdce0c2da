/**
 * The gateway's first database round trip, before a call (cached by auth-cache.ts): one join of the key, its access,
 * workspace, plan and connection, and the access's current period with its strategy, its rate window and its
 * workspace's budget.
 */
import type { Db } from '../db/database.js';
import { namedQuery, type IdleStatement } from '../db/named-query.js';
import type { RequestLogPolicy } from '../domain/workspaces/request-log-policy.js';
import type { OutputCapPolicy } from '../domain/plans/plan-types.js';
import type { ConnectionRetry } from '../domain/provider-connections/connection-retry.js';
import type { ProtocolProfile } from '../protocols/index.js';
import type { PassthroughClass } from '../protocols/passthrough.js';

/** The key, its access, workspace and connection, and the access's current period with its strategy. */
export interface AuthRow {
  key_id: string;
  workspace_id: string;
  workspace_access_id: string;
  expires_at: Date;
  revoked_at: Date | null;
  last_request_at: Date | null;
  access_status: string;
  access_starts_at: Date;
  access_ends_at: Date | null;
  workspace_status: string;
  /** Deprecated: every passthrough class. */
  allow_unmetered_passthrough: boolean;
  /** The passthrough classes the workspace, and the access's plan, let through (admission.ts). */
  workspace_passthrough_classes: PassthroughClass[];
  plan_passthrough_classes: PassthroughClass[];
  connection_id: string | null;
  protocol_profile: ProtocolProfile | null;
  base_url: string | null;
  connection_status: string | null;
  api_key_ciphertext: string | null;
  api_key_key_id: string | null;
  upstream_timeout_ms: number | null;
  /** The connection's retries (null: one attempt per call). */
  connection_retry: ConnectionRetry | null;
  /** false: the connection's upstream may answer past the output cap it is sent (docs/reliability.md). */
  connection_enforces_output_cap: boolean | null;
  period_id: string | null;
  period_end: Date | null;
  granted_units: bigint | null;
  reserved_units: bigint | null;
  consumed_units: bigint | null;
  input_multiplier_ppm: bigint | null;
  output_multiplier_ppm: bigint | null;
  cached_input_multiplier_ppm: bigint | null;
  max_output_tokens: number | null;
  /** The period's strategy version: published, so immutable (its compiled model policy is kept by its id). */
  strategy_id: string | null;
  /**
   * The strategy's model rules (as JSON text: parsed only when its policy is compiled, once per strategy version, not
   * at every lookup), allow-list and output cap policy (src/domain/quota/model-pricing.ts).
   */
  model_rules_json: string | null;
  /** The strategy's multipliers of the kinds beyond text tokens (JSON text, parsed with its model rules; null: the defaults). */
  kind_multipliers_json: string | null;
  allowed_models: string[] | null;
  output_cap_policy: OutputCapPolicy | null;
  key_prefix: string;
  /** The access's plan (the one new calls run on) and its rate limits (null: none on that dimension). */
  plan_id: string;
  plan_key: string;
  plan_name: string;
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  concurrent_calls: number | null;
  /** The access's rate window row, if it has one (what processes were granted and hold). */
  rate_requests_tat: number | null;
  rate_requests_limit: number | null;
  rate_tokens_tat: number | null;
  rate_tokens_limit: number | null;
  rate_concurrent: number | null;
  period_start: Date | null;
  /** While now is before it, the workspace's hard spend budget is crossed: metered calls are refused (402). */
  budget_exceeded_until: Date | null;
  /** Whether the call keeps its request and answer (src/records/request-log.ts): the plan's policy over the workspace's; null: none. */
  workspace_request_log: RequestLogPolicy | null;
  plan_request_log: RequestLogPolicy | null;
}

const LOOKUP = `
select k.id as key_id, k.workspace_id, k.workspace_access_id, k.expires_at, k.revoked_at, k.last_request_at, k.prefix as key_prefix,
       a.status as access_status, a.access_starts_at, a.access_ends_at,
       pl.id as plan_id, pl.key as plan_key, pl.name as plan_name,
       pl.requests_per_minute, pl.tokens_per_minute, pl.concurrent_calls,
       rw.requests_tat as rate_requests_tat, rw.requests_limit as rate_requests_limit,
       rw.tokens_tat as rate_tokens_tat, rw.tokens_limit as rate_tokens_limit, rw.concurrent as rate_concurrent,
       p.period_start,
       w.status as workspace_status, w.allow_unmetered_passthrough,
       w.passthrough_classes as workspace_passthrough_classes, pl.passthrough_classes as plan_passthrough_classes,
       w.request_log as workspace_request_log, pl.request_log as plan_request_log,
       c.id as connection_id, c.protocol_profile, c.base_url, c.status as connection_status,
       c.api_key_ciphertext, c.api_key_key_id, c.upstream_timeout_ms, c.retry as connection_retry,
       c.enforces_output_cap as connection_enforces_output_cap,
       p.id as period_id, p.period_end, p.granted_units, p.reserved_units, p.consumed_units,
       s.input_multiplier_ppm, s.output_multiplier_ppm, s.cached_input_multiplier_ppm, s.max_output_tokens,
       s.id as strategy_id, s.model_rules::text as model_rules_json, s.kind_multipliers::text as kind_multipliers_json, s.allowed_models, s.output_cap_policy,
       wb.hard_exceeded_until as budget_exceeded_until
  from inference_keys k
  join workspace_accesses a on a.id = k.workspace_access_id
  join workspaces w on w.id = k.workspace_id
  join plans pl on pl.id = a.plan_id
  left join rate_windows rw on rw.workspace_access_id = a.id
  left join workspace_budgets wb on wb.workspace_id = k.workspace_id
  left join provider_connections c on c.id = cast($1 as uuid) and c.workspace_id = k.workspace_id
  left join lateral (
    select * from quota_periods qp
     where qp.workspace_access_id = a.id and qp.period_start <= $2 and qp.period_end > $2
     order by qp.period_start desc limit 1) p on true
  left join quota_strategies s on s.id = p.quota_strategy_id
 where k.key_hash = $3`;

const NO_CONNECTION = '00000000-0000-0000-0000-000000000000';

export function createAuthRepo(db: Db, prepared = true) {
  const query = namedQuery(db, prepared);
  return {
    async lookup(keyHash: string, connectionId: string, now: Date): Promise<AuthRow | null> {
      // A named statement, as the records' are: planned once per connection, not at each lookup of a key's row.
      const rows = await query<AuthRow>('nexus_key_lookup', LOOKUP, [connectionId, now, keyHash]);
      return rows[0] ?? null;
    },
    /** The lookup of a key no one has (no key's hash is empty), for a fresh process's warm-up (src/gateway/warm-up.ts). */
    idleStatements(now: Date): IdleStatement[] {
      return [{ name: 'nexus_key_lookup', text: LOOKUP, values: [NO_CONNECTION, now, ''] }];
    },
  };
}

export type AuthRepo = ReturnType<typeof createAuthRepo>;

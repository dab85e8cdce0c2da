/**
 * The SQL of a gateway call: the key lookup before it (cached by auth-cache.ts)
 * and its records after it (batched by call-recorder.ts).
 *
 * A call's records are one statement per batch of calls, composed by
 * src/domain/recording/record-sql.ts: their invocations, each with its
 * attempt, their settlement on their quota leases, their usage events, rollups
 * and thresholds. One round trip, so a busy access's period row is locked for
 * one statement. A call whose lease is no longer HELD (the
 * sweeper reclaimed it: its process stalled past the TTL) is charged on its
 * period directly, unless the reclaim already recorded it from its heartbeat
 * (the record is idempotent by invocation id): once either way.
 * The rows travel as JSON text (src/db/row-json.ts), made when the call ends.
 */
import type { Db } from '../db/database.js';
import { jsonArray, RowJson } from '../db/row-json.js';
import type { InvocationRow } from '../domain/invocations/invocation-types.js';
import type { Pricing } from '../domain/quota/model-pricing.js';
import type { RequestLogPolicy } from '../domain/workspaces/request-log-policy.js';
import type { OutputCapPolicy } from '../domain/plans/plan-types.js';
import type { ConnectionRetry } from '../domain/provider-connections/connection-retry.js';
import { KIND_COLUMN_TYPES, KIND_COLUMNS } from '../domain/recording/kind-sql.js';
import { recordCallsSql, type RecordedCost } from '../domain/recording/record-sql.js';
import { lockedInIdOrder } from '../domain/recording/settlement-sql.js';
import { newId } from '../ids.js';
import type { ProtocolProfile } from '../protocols/index.js';
import type { PassthroughClass } from '../protocols/passthrough.js';
import type { UsageKinds } from '../protocols/usage.js';
import { namedQuery } from './gateway-db.js';

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
  /** Whether the call keeps its request and answer (request-log.ts): the plan's policy over the workspace's; null: none. */
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

/** What a call consumed, as it is charged. */
export interface Consumption extends UsageKinds {
  units: bigint;
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
  /** Of the input, written to the provider's cache; of the output, reasoning (null or absent: not reported). */
  cacheWriteTokens?: bigint | null;
  reasoningTokens?: bigint | null;
  model: string | null;
  /** What the units were priced at: the rule of the model the request named. */
  pricing: Pricing;
  /** A passed-through call's (0 units): recorded only where its price sets a price per call (docs/pricing.md). */
  perCallOnly?: boolean;
}

/** The kinds beyond text tokens of a call's row (those reported; a call of text tokens only adds nothing). */
function withKinds(row: RowJson, kinds: UsageKinds): RowJson {
  return row
    .big('audio_input_tokens', kinds.audioInputTokens)
    .big('audio_output_tokens', kinds.audioOutputTokens)
    .big('image_input_tokens', kinds.imageInputTokens)
    .big('image_output_tokens', kinds.imageOutputTokens)
    .big('images', kinds.images)
    .str('image_tier', kinds.imageTier)
    .big('audio_ms', kinds.audioMs)
    .big('characters', kinds.characters);
}

export interface CallToRecord {
  /** With its attempt's columns; its lease_id is the lease's, when it was admitted on one. */
  invocation: InvocationRow;
  /** The quota lease the call was admitted on (quota-leases.ts): its bound and the units the lease gives up. */
  lease: { id: string; bound: bigint; take: bigint } | undefined;
  /** null: nothing charged (no usage event). */
  consumed: Consumption | null;
}

const RECORD_CALLS = recordCallsSql();

/**
 * Calls in flight (the JSON array at placeholder `calls`) on the leases of `held` (a CTE of lease ids),
 * written as they stand at placeholder `at`: one row each in lease_calls, made or updated.
 */
const writeCallsCtes = (held: string, calls: string, at: string) => `x as (
  select * from json_to_recordset(cast(${calls} as json)) as x(invocation_id uuid, lease_id uuid, bound bigint, units bigint, input_tokens bigint,
         cached_tokens bigint, output_tokens bigint, model text, usage_id uuid, adjustment_id uuid, invocation json,
         model_rule text, input_ppm bigint, cached_ppm bigint, output_ppm bigint, cache_write_tokens bigint, reasoning_tokens bigint,
         ${KIND_COLUMN_TYPES})
), calls as (
  insert into lease_calls (invocation_id, lease_id, bound, units, input_tokens, cached_tokens, output_tokens, model, usage_id,
                           adjustment_id, invocation, updated_at, model_rule, input_multiplier_ppm, cached_input_multiplier_ppm,
                           output_multiplier_ppm, cache_write_tokens, reasoning_tokens, ${KIND_COLUMNS.join(', ')})
  select x.invocation_id, x.lease_id, x.bound, x.units, x.input_tokens, x.cached_tokens, x.output_tokens, x.model, x.usage_id,
         x.adjustment_id, x.invocation, cast(${at} as timestamptz), x.model_rule, x.input_ppm, x.cached_ppm, x.output_ppm,
         x.cache_write_tokens, x.reasoning_tokens, ${KIND_COLUMNS.map((c) => `x.${c}`).join(', ')}
    from x
   where x.lease_id in (select id from ${held})
  on conflict (invocation_id) do update
     set units = excluded.units, input_tokens = excluded.input_tokens, cached_tokens = excluded.cached_tokens,
         output_tokens = excluded.output_tokens, model = excluded.model, invocation = excluded.invocation, updated_at = excluded.updated_at,
         cache_write_tokens = excluded.cache_write_tokens, reasoning_tokens = excluded.reasoning_tokens,
         ${KIND_COLUMNS.map((c) => `${c} = excluded.${c}`).join(', ')}
)`;

const namedLeases = 'select cast(value as uuid) from json_array_elements_text(cast($1 as json))';

/**
 * A process's heartbeat: its leases ($1, ids) still HELD now expire at $2, and its calls in flight on them
 * ($3) are written as they stand at $4 (lease_calls). The rows of those leases whose call is recorded
 * already go (a recorded call is never charged by a reclaim: they only take room). Returns the leases
 * renewed: the others are lost. The leases are locked in id order (lockedInIdOrder), before any row of
 * lease_calls.
 */
const HEARTBEAT = `
with renewed as (
  update quota_leases set expires_at = cast($2 as timestamptz)
   where id in ${lockedInIdOrder('quota_leases', namedLeases)}
     and status = 'HELD'
  returning id
), ${writeCallsCtes('renewed', '$3', '$4')}, done as (
  delete from lease_calls c
   where c.lease_id in (select id from renewed)
     and c.invocation_id not in (select invocation_id from x)
     and exists (select from invocations i where i.id = c.invocation_id and i.started_at = cast(c.invocation->>'started_at' as timestamptz))
)
select id from renewed`;

/**
 * A process's snapshot: its calls in flight ($2) on its leases ($1, ids) still HELD, written as they stand
 * at $3. The leases are locked (in id order, as by the heartbeat) and not renewed: that is the
 * heartbeat's. Returns the leases still HELD.
 */
const SNAPSHOT = `
with held as (
  select id from quota_leases
   where id in ${lockedInIdOrder('quota_leases', namedLeases)}
     and status = 'HELD'
), ${writeCallsCtes('held', '$2', '$3')}
select id from held`;

/** A call's rows as JSON text (row-json.ts), made when it ends. */
export interface CallRows {
  /** The invocation's id: the key that makes its record idempotent. */
  id: string;
  invocation: string;
  /** Its settlement on its lease (a LeaseCallSettlement), when it was charged. */
  leaseCall: string | null;
}

/** The invocation row as JSON text. */
function invocationJson(i: InvocationRow): string {
  const row = new RowJson()
    .id('id', i.id)
    .id('workspace_id', i.workspace_id)
    .id('workspace_access_id', i.workspace_access_id)
    .id('provider_connection_id', i.provider_connection_id)
    .id('inference_key_id', i.inference_key_id)
    .str('request_id', i.request_id)
    .str('trace_id', i.trace_id)
    .str('method', i.method)
    .str('endpoint', i.endpoint)
    .str('requested_model', i.requested_model)
    .str('status', i.status)
    .str('metering_status', i.metering_status)
    .raw('streamed', i.streamed ? 'true' : 'false')
    .str('lease_id', i.lease_id)
    .big('quota_units', i.quota_units)
    .str('error_code', i.error_code)
    .str('error_message', i.error_message ?? null)
    .time('started_at', i.started_at)
    .time('first_token_at', i.first_token_at)
    .time('completed_at', i.completed_at)
    .num('total_latency_ms', i.total_latency_ms)
    .num('provider_latency_ms', i.provider_latency_ms)
    .num('nexus_latency_ms', i.nexus_latency_ms)
    .num('total_ttft_ms', i.total_ttft_ms)
    .num('provider_ttft_ms', i.provider_ttft_ms)
    .num('nexus_ttft_ms', i.nexus_ttft_ms)
    .str('upstream_response_id', i.upstream_response_id)
    .str('attempt_id', i.attempt_id)
    .str('attempt_upstream_model', i.attempt_upstream_model)
    .str('attempt_status', i.attempt_status)
    .num('attempt_http_status', i.attempt_http_status)
    .str('attempt_error_code', i.attempt_error_code)
    .time('attempt_started_at', i.attempt_started_at)
    .time('attempt_first_token_at', i.attempt_first_token_at)
    .time('attempt_completed_at', i.attempt_completed_at)
    .num('attempt_duration_ms', i.attempt_duration_ms)
    .str('route_id', i.route_id)
    .raw('attempts', i.attempts?.length ? JSON.stringify(i.attempts) : 'null')
    .str('plan_id', i.plan_id)
    .str('session_id', i.session_id);
  // A Realtime session's own invocation (src/realtime/realtime-record.ts); absent on every call's.
  if (i.session) row.raw('session', JSON.stringify(i.session));
  return row.done();
}

/** What the heartbeat wrote of a call under way: the units of its last row written and of the one being written, its events' ids. */
export interface Beat {
  written: bigint;
  writing: bigint;
  usage: string;
  adjustment: string;
  attempt: string;
}

export const newBeat = (): Beat => ({ written: -1n, writing: -1n, usage: newId(), adjustment: newId(), attempt: newId() });

/**
 * A call under way as the heartbeat writes it to lease_calls: what it would be charged (`counted`, at `pricing`) on
 * its lease, and its invocation as it would be recorded (`lost`), were its process to die now; its events keep the
 * ids of `beat` from one write to the next.
 */
export function leaseCallRow(
  lost: InvocationRow,
  lease: { id: string; bound: bigint },
  counted: Omit<Consumption, 'model' | 'pricing'>,
  pricing: Pricing,
  beat: Beat,
): string {
  return withKinds(new RowJson(), counted)
    .id('invocation_id', lost.id)
    .id('lease_id', lease.id)
    .big('bound', lease.bound)
    .big('units', counted.units)
    .big('input_tokens', counted.inputTokens)
    .big('cached_tokens', counted.cachedInputTokens)
    .big('output_tokens', counted.outputTokens)
    .big('cache_write_tokens', counted.cacheWriteTokens)
    .big('reasoning_tokens', counted.reasoningTokens)
    .str('model', lost.attempt_upstream_model || null)
    .str('model_rule', pricing.rule)
    .big('input_ppm', pricing.inputMultiplierPpm)
    .big('cached_ppm', pricing.cachedInputMultiplierPpm)
    .big('output_ppm', pricing.outputMultiplierPpm)
    .id('usage_id', beat.usage)
    .id('adjustment_id', beat.adjustment)
    .raw('invocation', invocationJson(lost))
    .done();
}

export function callRows(c: CallToRecord): CallRows {
  const i = c.invocation;
  const invocation = invocationJson(i);
  // A call charged nothing moves nothing on its lease and has no event.
  if (!c.lease || !c.consumed) return { id: i.id, invocation, leaseCall: null };
  const leaseCall = withKinds(new RowJson(), c.consumed)
    .id('lease_id', c.lease.id)
    .big('bound', c.lease.bound)
    .big('take', c.lease.take)
    .big('units', c.consumed.units)
    .raw('charged', 'true')
    .id('usage_id', newId())
    .str('adjustment_id', c.consumed.units > c.lease.bound ? newId() : null)
    .id('invocation_id', i.id)
    .big('input_tokens', c.consumed.inputTokens)
    .big('cached_tokens', c.consumed.cachedInputTokens)
    .big('output_tokens', c.consumed.outputTokens)
    .big('cache_write_tokens', c.consumed.cacheWriteTokens)
    .big('reasoning_tokens', c.consumed.reasoningTokens)
    .str('model', c.consumed.model)
    .str('model_rule', c.consumed.pricing.rule)
    .big('input_ppm', c.consumed.pricing.inputMultiplierPpm)
    .big('cached_ppm', c.consumed.pricing.cachedInputMultiplierPpm)
    .big('output_ppm', c.consumed.pricing.outputMultiplierPpm)
    .time('at', i.completed_at ?? new Date());
  if (c.consumed.perCallOnly) leaseCall.raw('per_call_only', 'true');
  return { id: i.id, invocation, leaseCall: leaseCall.done() };
}

/** `prepared`: false sends the statements unnamed (behind a transaction pooler: NEXUS_DATABASE_PREPARED_STATEMENTS). */
export function createCallRepo(db: Db, prepared = true) {
  const query = namedQuery(db, prepared);
  return {
    async lookup(keyHash: string, connectionId: string, now: Date): Promise<AuthRow | null> {
      // A named statement, as the records' are: planned once per connection, not at each lookup of a key's row.
      const rows = await query<AuthRow>('nexus_key_lookup', LOOKUP, [connectionId, now, keyHash]);
      return rows[0] ?? null;
    },

    /**
     * Records the calls in one statement (all or nothing); a call recorded already is left as it is. Returns the
     * costs of the calls it charged.
     */
    async record(calls: CallRows[]): Promise<RecordedCost[]> {
      const invocations: string[] = [];
      const leaseCalls: string[] = [];
      for (const c of calls) {
        invocations.push(c.invocation);
        if (c.leaseCall) leaseCalls.push(c.leaseCall);
      }
      return query<RecordedCost>('nexus_record_calls', RECORD_CALLS, [jsonArray(leaseCalls), jsonArray(invocations)]);
    },

    /**
     * Renews the leases still HELD to `until` and writes the calls in flight on them (`calls`: lease_calls
     * rows as JSON text); returns the ids of the leases renewed.
     */
    async heartbeat(leaseIds: string[], until: Date, calls: string[], now: Date): Promise<Set<string>> {
      const rows = await query<{ id: string }>('nexus_heartbeat', HEARTBEAT, [
        JSON.stringify(leaseIds),
        until.toISOString(),
        jsonArray(calls),
        now.toISOString(),
      ]);
      return new Set(rows.map((r) => r.id));
    },

    /** Writes the calls in flight (`calls`) on those of the leases still HELD, without renewing them; returns those. */
    async snapshot(leaseIds: string[], calls: string[], now: Date): Promise<Set<string>> {
      const rows = await query<{ id: string }>('nexus_snapshot', SNAPSHOT, [JSON.stringify(leaseIds), jsonArray(calls), now.toISOString()]);
      return new Set(rows.map((r) => r.id));
    },
  };
}

export type CallRepo = ReturnType<typeof createCallRepo>;

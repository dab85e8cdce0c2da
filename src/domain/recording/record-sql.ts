/**
 * The record statement: a batch of calls written in ONE statement (one round trip), composed here from named parts,
 * each a function of one file, so a change to one rule edits one part. In the statement's order:
 * - the invocations recorded (`recorded`): this file;
 * - the leases settled (`lc`, `l`, `settled`) and the periods charged (`p`): settlement-sql.ts;
 * - the usage events, each USAGE event priced (`u`, `a`, `new_events`): usage-event-sql.ts, joining price-sql.ts;
 * - the thresholds crossed (`crossed`, `marks`, `threshold_events`, `threshold_messages`): threshold-sql.ts;
 * - the usage rollups (`rolled_rows`, `rolled`, `rolled_series`): rollup-sql.ts;
 * then the costs recorded, per series (RecordedCost). test/quota/record-sql.test.ts prints the whole statement.
 *
 * The gateway's record (src/records/call-repo.ts, batched by call-recorder.ts) writes calls that ended; the sweeper's
 * reclaim (src/domain/quota/quota-repo.ts) writes the calls a dead process's last heartbeat left, from the same parts
 * where the rule is the same. Both are composed once, when this module loads; never per call.
 */
import { rollUpCtes, ROLLED_CALL_COLUMNS } from './rollup-sql.js';
import { chargedHeartbeatCtes, chargedPeriodCtes, expiredLeaseCtes, reclaimedPeriodCtes, settledLeaseCtes } from './settlement-sql.js';
import { thresholdEventCtes } from './threshold-sql.js';
import { usageEventCtes } from './usage-event-sql.js';

/** A named part of a statement: one or more of its CTEs (`name as (...)`, comma-separated). */
export interface StatementPart {
  name: string;
  ctes: string;
}

/** The statement `with` the parts' CTEs, in their order, then `select`. */
const composed = (parts: StatementPart[], select: string) => `
with ${parts.map((p) => p.ctes).join(', ')}
${select}`;

/**
 * An invocation as the record statement reads it: the attributes of the composite type `nexus_invocation_input`
 * (migration 20261217010000_record_input_types), in its order; a call's row is an element of an array of it
 * (src/db/row-record.ts). A column added here is added to the type by a migration, in the same place.
 */
export const INVOCATION_COLUMNS = [
  'id',
  'workspace_id',
  'workspace_access_id',
  'provider_connection_id',
  'inference_key_id',
  'request_id',
  'trace_id',
  'method',
  'endpoint',
  'requested_model',
  'status',
  'metering_status',
  'streamed',
  'lease_id',
  'quota_units',
  'error_code',
  'error_message',
  'started_at',
  'first_token_at',
  'completed_at',
  'total_latency_ms',
  'provider_latency_ms',
  'nexus_latency_ms',
  'total_ttft_ms',
  'provider_ttft_ms',
  'nexus_ttft_ms',
  'upstream_response_id',
  'attempt_id',
  'attempt_upstream_model',
  'attempt_status',
  'attempt_http_status',
  'attempt_error_code',
  'attempt_started_at',
  'attempt_first_token_at',
  'attempt_completed_at',
  'attempt_duration_ms',
  'route_id',
  'attempts',
  'plan_id',
  'session_id',
  'session',
];

/** `recorded`: the invocations of the array (of nexus_invocation_input) at placeholder `calls`, those not recorded already. */
const recordedInvocationCtes = (calls: string) => `recorded as (
  insert into invocations (${INVOCATION_COLUMNS.join(', ')})
  select ${INVOCATION_COLUMNS.map((c) => `i.${c}`).join(', ')}
    from unnest(cast(${calls} as nexus_invocation_input[])) i
  on conflict (id, started_at) do nothing
  returning ${ROLLED_CALL_COLUMNS}
)`;

/** `recorded`: the invocations the heartbeat wrote of the CTE `calls` (lease_calls rows), those not recorded already. */
const reclaimedInvocationCtes = (calls: string) => `recorded as (
  insert into invocations select (json_populate_record(cast(null as invocations), c.invocation)).* from ${calls} c
  on conflict (id, started_at) do nothing
  returning ${ROLLED_CALL_COLUMNS}
)`;

/**
 * The costs of a batch's calls, summed per workspace, connection and model, for the metrics and the budgets: one row
 * per series, not per call (null: no call of the series had a price; `unpriced`: how many had none; `budgeted`: its
 * workspace has a budget, read in the same statement so a batch of a workspace without one costs no other query).
 */
export interface RecordedCost {
  workspace_id: string;
  connection_id: string;
  model: string | null;
  cost_micros: string | null;
  unpriced: string;
  budgeted: boolean;
}

const RECORDED_COSTS = `select u.workspace_id, r.provider_connection_id as connection_id, u.model, sum(u.cost_micros) as cost_micros,
       count(*) filter (where u.cost_micros is null) as unpriced,
       exists (select 1 from workspace_budgets b where b.workspace_id = u.workspace_id) as budgeted
  from u join recorded r on r.id = u.invocation_id
 group by u.workspace_id, r.provider_connection_id, u.model`;

/**
 * The record's parts: the calls' invocations ($2), those not recorded already, their settlement on their leases
 * ($1), their usage events priced, the thresholds their periods cross and, unless `rollUp` is false, their usage
 * rollup ('hours': the hourly ones only; scripts/bench-rollup.ts and bench-pg-parts.ts measure what they cost). It leaves the rows a heartbeat wrote of them (lease_calls)
 * to the next heartbeat, the lease's release or its reclaim: a row of lease_calls is changed only by a statement
 * that holds its lease's lock, so none of them waits for another in the opposite order.
 */
export const recordCallsParts = (rollUp: boolean | 'hours' = true): StatementPart[] => [
  { name: 'the invocations recorded', ctes: recordedInvocationCtes('$2') },
  { name: 'the leases settled', ctes: settledLeaseCtes('$1', 'recorded') },
  { name: 'the periods charged', ctes: chargedPeriodCtes('settled') },
  { name: 'the usage events, priced', ctes: usageEventCtes('settled') },
  { name: 'the thresholds crossed', ctes: thresholdEventCtes('p') },
  ...(rollUp ? [{ name: 'the usage rollups', ctes: rollUpCtes('recorded', 'new_events', undefined, rollUp === true) }] : []),
];

/** The gateway's record of a batch of calls ($1: their lease calls, $2: their invocations, arrays of rows); its rows: RecordedCost. */
export const recordCallsSql = (rollUp: boolean | 'hours' = true) => composed(recordCallsParts(rollUp), RECORDED_COSTS);

/**
 * The reclaim's parts: the leases of dead processes (HELD, past their expiry, or with :all every HELD one) become
 * EXPIRED, and the calls their last heartbeat wrote (lease_calls) are settled by the same rule: each recorded as its
 * heartbeat left it (FAILED `gateway_lost`) and charged its units, unless its invocation is recorded already (its
 * process lived to write it), and added to the usage rollup. What the leases held returns to their periods, and what
 * the calls consumed is added, in the same statement (periods locked in id order), which raises
 * quota.threshold_crossed as the record does.
 */
export const reclaimParts = (): StatementPart[] => [
  { name: 'the leases expired', ctes: expiredLeaseCtes(':now', ':all') },
  { name: 'the invocations recorded', ctes: reclaimedInvocationCtes('calls') },
  { name: 'the calls charged', ctes: chargedHeartbeatCtes('recorded') },
  { name: 'the usage events, priced', ctes: usageEventCtes('charged') },
  { name: 'the usage rollups', ctes: rollUpCtes('recorded', 'new_events') },
  { name: 'the periods given back and charged', ctes: reclaimedPeriodCtes('charged') },
  { name: 'the thresholds crossed', ctes: thresholdEventCtes('p') },
];

/**
 * The reclaim (named parameters :now, :all): one row per period, its id and carried units (the caller gives back
 * the carry of a period a plan change split: quotaRepo.giveBackCarry), with how many leases and calls it reclaimed.
 */
export const RECLAIM_EXPIRED_SQL = composed(
  reclaimParts(),
  `select p.id as quota_period_id, p.carried_units, (select count(*) from expired) as leases, (select count(*) from charged) as calls
  from p
 order by p.id`,
);

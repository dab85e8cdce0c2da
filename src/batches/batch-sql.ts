/**
 * The statements that settle a batch (docs/batches.md), composed from the record statement's parts where the rule is
 * the same (src/domain/recording/): the usage events priced (at the batch tier), the thresholds crossed, the usage
 * rollups.
 *
 * - SETTLE_REQUESTS_SQL: a chunk of the batch's requests, read from its output file, charged in ONE statement. A
 *   request is charged once: its batch_requests row is inserted in the same statement (on conflict, nothing), and
 *   only the requests whose row it inserted are charged. Their units leave the batch's lease (what it still holds at
 *   most) and are consumed on its period; each gets a USAGE event on the batch's lease, naming the request's own id
 *   as its invocation (an invocation holds one USAGE event), its cost at the batch tier; the rollups count them under
 *   the batch's key, connection and plan.
 * - FINISH_SQL: the batch settled: its lease released (what never ran returns to the period), its invocation
 *   recorded (counted as a call by the rollups), and `batch.completed` raised for the webhook endpoints that want it.
 */
import { fanOutCte } from '../domain/events/outbox-sql.js';
import { KIND_COLUMNS } from '../domain/recording/kind-sql.js';
import { ROLLED_CALL_COLUMNS, ROLLED_EVENT_COLUMNS, rollUpCtes } from '../domain/recording/rollup-sql.js';
import { thresholdEventCtes } from '../domain/recording/threshold-sql.js';
import { usageEventCtes } from '../domain/recording/usage-event-sql.js';

/** The providers' batch discount: a request costs half its price (docs/batches.md, "Price"). */
const BATCH_COST_SCALE = '0.5';

/** Each request charged as the rollups read it: as the batch's invocation, under the request's own id. */
const CALLS_OF_REQUESTS = `select lc.request_id as id, b.workspace_id, b.workspace_access_id, b.provider_connection_id,
         b.inference_key_id, b.plan_id, 'SUCCEEDED'::text as status, b.model as requested_model, ''::text as attempt_upstream_model,
         b.created_at as started_at, null::timestamptz as completed_at, null::jsonb as session
    from lc cross join b`;

const NO_KINDS = KIND_COLUMNS.map((c) => `null::${c === 'image_tier' ? 'text' : 'bigint'} as ${c}`).join(', ');

/** Named parameters: :batchId, :now, :rows (JSON: a request each, SettledRequest). Returns the requests and units charged. */
export const SETTLE_REQUESTS_SQL = `
with b as (
  select * from batches where id = :batchId
), x as (
  select * from json_to_recordset(cast(:rows as json)) as x(
    custom_id text, request_id uuid, usage_id uuid, units bigint, input_tokens bigint, cached_tokens bigint, output_tokens bigint,
    reasoning_tokens bigint, model text, requested_model text, model_rule text, input_ppm bigint, cached_ppm bigint,
    output_ppm bigint)
), ins as (
  insert into batch_requests (batch_id, custom_id, id, usage_event_id, units, created_at)
  select cast(:batchId as uuid), x.custom_id, x.request_id, x.usage_id, x.units, cast(:now as timestamptz) from x
  on conflict do nothing
  returning custom_id
), lc as (
  select x.* from x join ins on ins.custom_id = x.custom_id
), t as (
  select coalesce(sum(units), 0)::bigint as units, count(*) as requests from lc
), lk as (
  select q.id, least(q.reserved_units, t.units) as take
    from quota_leases q join b on q.id = b.lease_id cross join t
   where q.status = 'HELD'
     for update of q
), l as (
  update quota_leases q set reserved_units = q.reserved_units - lk.take, consumed_units = coalesce(q.consumed_units, 0) + t.units
    from lk cross join t where q.id = lk.id
), p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - coalesce((select take from lk), 0), consumed_units = qp.consumed_units + t.units
    from t cross join b
   where qp.id = b.quota_period_id and t.requests > 0
  returning qp.id, qp.workspace_id, qp.workspace_access_id, qp.plan_id, qp.quota_strategy_id, qp.granted_units,
            qp.consumed_units, qp.period_end, t.units
), settled as (
  select b.lease_id as id, b.workspace_id, b.workspace_access_id, b.quota_period_id, lc.units as bound, lc.units,
         true as charged, lc.usage_id, null::uuid as adjustment_id, lc.request_id as invocation_id, lc.input_tokens, lc.cached_tokens,
         lc.output_tokens, lc.model, cast(:now as timestamptz) as at, lc.model_rule, lc.input_ppm, lc.cached_ppm, lc.output_ppm,
         b.created_at as call_started_at, b.provider_connection_id as call_connection_id,
         lc.requested_model as call_requested_model, null::bigint as cache_write_tokens, lc.reasoning_tokens, ${NO_KINDS},
         null::boolean as per_call_only
    from lc cross join b
), ${usageEventCtes('settled', BATCH_COST_SCALE)}, ${thresholdEventCtes('p')},
calls_of_requests as (${CALLS_OF_REQUESTS}),
no_calls as (select * from calls_of_requests where false),
${rollUpCtes('no_calls', 'new_events', 'calls_of_requests')},
bu as (
  update batches set settled_requests = settled_requests + t.requests, settled_units = settled_units + t.units,
         cost_micros = cost_micros + coalesce((select sum(cost_micros) from u), 0)
    from t where batches.id = :batchId and t.requests > 0
)
select t.requests, t.units from t`;

/**
 * Named parameters: :batchId, :now, :upstreamStatus, :status and :errorCode (the invocation's). Returns the batch as
 * settled, or nothing when it was settled already.
 */
export const FINISH_SQL = `
with b as (
  update batches set status = 'SETTLED', settled_at = :now, upstream_status = :upstreamStatus
   where id = :batchId and status = 'OPEN'
  returning *
), lk as (
  select q.id, q.quota_period_id, q.reserved_units from quota_leases q join b on q.id = b.lease_id where q.status = 'HELD' for update of q
), rel as (
  update quota_leases q set status = 'RELEASED', settled_at = :now from lk where q.id = lk.id
), per as (
  update quota_periods qp set reserved_units = qp.reserved_units - lk.reserved_units from lk where qp.id = lk.quota_period_id
), recorded as (
  insert into invocations (id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, request_id,
                           method, endpoint, requested_model, status, metering_status, streamed, lease_id, quota_units,
                           error_code, started_at, completed_at, total_latency_ms, plan_id, upstream_response_id)
  select b.invocation_id, b.workspace_id, b.workspace_access_id, b.provider_connection_id, b.inference_key_id, b.request_id,
         'POST', b.endpoint, b.model, :status, 'metered', false, b.lease_id, b.settled_units, :errorCode, b.created_at,
         cast(:now as timestamptz), extract(epoch from (cast(:now as timestamptz) - b.created_at)) * 1000, b.plan_id,
         b.upstream_batch_id
    from b
  on conflict (id, started_at) do nothing
  returning ${ROLLED_CALL_COLUMNS}
), no_events as (
  select ${ROLLED_EVENT_COLUMNS} from usage_events where false
), ${rollUpCtes('recorded', 'no_events')},
batch_events as (
  insert into events (id, workspace_id, type, data, created_at)
  select nexus_uuid_v7(), b.workspace_id, 'batch.completed',
         jsonb_build_object('workspaceAccessId', b.workspace_access_id, 'invocationId', b.invocation_id,
           'batchId', b.upstream_batch_id, 'status', b.upstream_status, 'requests', b.requests,
           'settledRequests', b.settled_requests, 'boundUnits', cast(b.bound_units as text),
           'settledUnits', cast(b.settled_units as text), 'costMicros', cast(b.cost_micros as text)),
         cast(:now as timestamptz)
    from b
  returning id, workspace_id, type, created_at
), ${fanOutCte('batch_messages', 'batch_events')}
select * from b`;

/**
 * A Batch API request other than a batch made (an upload, a read, a list, a cancel, a file's content) recorded as an
 * invocation of its own, unmetered and of 0 units (its batch's requests are charged when it is settled), counted as a
 * call by the rollups. Named parameters: the invocation's columns (camelCase).
 */
export const RECORD_OPERATION_SQL = `
with recorded as (
  insert into invocations (id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, request_id,
                           method, endpoint, requested_model, status, metering_status, streamed, quota_units, error_code,
                           started_at, completed_at, total_latency_ms, plan_id, upstream_response_id)
  values (:id, :workspaceId, :accessId, :connectionId, :keyId, :requestId, :method, :endpoint, '', :status, 'unmetered', false, 0,
          :errorCode, :startedAt, :completedAt, :latencyMs, :planId, :upstreamId)
  returning ${ROLLED_CALL_COLUMNS}
), no_events as (
  select ${ROLLED_EVENT_COLUMNS} from usage_events where false
), ${rollUpCtes('recorded', 'no_events')}
select count(*) from recorded`;

/**
 * Gateway calls' records as ONE statement per batch: the settlement of each
 * call on its quota lease (the rule of src/domain/quota/settlement-sql.ts,
 * shared with services.quota.settle/release), plus the invocations, each with
 * its attempt. One round trip, so a busy access's period row is locked for one
 * statement (a multi-statement transaction per call capped a single access at
 * ~200 calls/s here). A call whose lease is no longer HELD (the sweeper expired
 * it) is charged nothing and its invocation records 0 units.
 */
import type { NamedQuery } from './gateway-db.js';
import type { InvocationRow } from '../domain/invocations/invocation-types.js';
import { newId } from '../ids.js';
import { jsonParam, leaseCallSettlementCtes, type LeaseCallSettlement } from '../domain/quota/settlement-sql.js';

export interface Consumption {
  units: bigint;
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
  model: string | null;
}

export interface CallToRecord {
  /** With its attempt's columns; its reservation_id is the lease's, when it was admitted on one. */
  invocation: InvocationRow;
  /** The quota lease the call was admitted on (quota-leases.ts): its bound and the units the lease gives up. */
  lease?: { id: string; bound: bigint; take: bigint };
  /** null: nothing charged (no usage event). */
  consumed: Consumption | null;
}

const INVOCATION_COLUMNS = [
  'id', 'workspace_id', 'workspace_access_id', 'provider_connection_id', 'inference_key_id', 'request_id', 'trace_id',
  'method', 'endpoint', 'requested_model', 'status', 'metering_status', 'streamed', 'reservation_id', 'quota_units',
  'error_code', 'started_at', 'first_token_at', 'completed_at', 'total_latency_ms', 'provider_latency_ms',
  'nexus_latency_ms', 'total_ttft_ms', 'provider_ttft_ms', 'nexus_ttft_ms', 'upstream_response_id', 'attempt_id',
  'attempt_upstream_model', 'attempt_status', 'attempt_http_status', 'attempt_error_code', 'attempt_started_at',
  'attempt_first_token_at', 'attempt_completed_at', 'attempt_duration_ms',
];

const SQL = `
with ${leaseCallSettlementCtes('$1')}, inv as (
  insert into invocations (${INVOCATION_COLUMNS.join(', ')})
  select ${INVOCATION_COLUMNS.map((c) =>
    c === 'quota_units'
      ? `case when i.reservation_id is not null and not exists (select 1 from l where l.id = i.reservation_id) then 0 else i.quota_units end`
      : `i.${c}`,
  ).join(', ')}
    from json_populate_recordset(cast(null as invocations), cast($2 as json)) i
)
select count(*) as n from settled`;

/** Records the calls in one statement (all or nothing). */
export async function recordCalls(query: NamedQuery, calls: CallToRecord[]): Promise<void> {
  const leaseCalls: LeaseCallSettlement[] = [];
  for (const c of calls) {
    // A call charged nothing moves nothing on its lease and has no event.
    if (!c.lease || !c.consumed) continue;
    leaseCalls.push({
      lease_id: c.lease.id,
      bound: c.lease.bound,
      take: c.lease.take,
      units: c.consumed.units,
      charged: true,
      usage_id: newId(),
      adjustment_id: c.consumed.units > c.lease.bound ? newId() : null,
      invocation_id: c.invocation.id,
      input_tokens: c.consumed.inputTokens,
      cached_tokens: c.consumed.cachedInputTokens,
      output_tokens: c.consumed.outputTokens,
      model: c.consumed.model,
      at: c.invocation.completed_at ?? new Date(),
    });
  }
  await query('nexus_record_calls', SQL, [jsonParam(leaseCalls), jsonParam(calls.map((c) => c.invocation))]);
}

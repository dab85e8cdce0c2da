/**
 * Gateway calls' records as ONE statement per batch: the settlement of each
 * call's reservation (the rule of src/domain/quota/settlement-sql.ts, shared
 * with services.quota.settle/release), plus the invocations and their
 * attempts. One round trip, so a busy access's period row is locked for one
 * statement (a multi-statement transaction per call capped a single access at
 * ~200 calls/s here). Idempotent per reservation: one that is no longer HELD
 * (settled, or expired by the sweeper) is left alone and its invocation
 * records 0 units.
 */
import type { NamedQuery } from './gateway-db.js';
import type { AttemptRow, InvocationRow } from '../domain/invocations/invocation-types.js';
import { newId } from '../ids.js';
import { settlementCtesWith, jsonParam, type LeaseCallSettlement, type SettlementInput } from '../domain/quota/settlement-sql.js';

export interface Consumption {
  units: bigint;
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
  model: string | null;
}

export interface CallToRecord {
  /** Its reservation_id is the call's own reservation: a HELD row, or with `lease` the row this statement inserts. */
  invocation: InvocationRow;
  attempt: AttemptRow | null;
  /** The quota lease the call was admitted on (quota-leases.ts): its bound and the units the lease gives up. */
  lease?: { id: string; bound: bigint; take: bigint };
  /** null with a reservation: release it (nothing charged, no usage event). */
  consumed: Consumption | null;
}

const INVOCATION_COLUMNS = [
  'id', 'workspace_id', 'workspace_access_id', 'provider_connection_id', 'inference_key_id', 'request_id', 'trace_id',
  'method', 'endpoint', 'requested_model', 'status', 'metering_status', 'streamed', 'reservation_id', 'quota_units',
  'error_code', 'started_at', 'first_token_at', 'completed_at', 'total_latency_ms', 'provider_latency_ms',
  'nexus_latency_ms', 'total_ttft_ms', 'provider_ttft_ms', 'nexus_ttft_ms', 'upstream_response_id',
];

const SQL = `
with ${settlementCtesWith({ settlements: '$1', leaseCalls: '$2' })}, inv as (
  insert into invocations (${INVOCATION_COLUMNS.join(', ')})
  select ${INVOCATION_COLUMNS.map((c) =>
    c === 'quota_units'
      ? `case when i.reservation_id is not null and not exists (select 1 from settled where settled.id = i.reservation_id) then 0 else i.quota_units end`
      : `i.${c}`,
  ).join(', ')}
    from json_populate_recordset(cast(null as invocations), cast($3 as json)) i
), att as (
  insert into invocation_attempts select * from json_populate_recordset(cast(null as invocation_attempts), cast($4 as json))
)
select count(*) as n from settled`;

/** What every settlement of a call says, however its units were held. */
function settlementOf(c: CallToRecord): SettlementInput {
  return {
    rid: c.invocation.reservation_id!,
    status: c.consumed ? 'SETTLED' : 'RELEASED',
    units: c.consumed?.units ?? 0n,
    charged: Boolean(c.consumed),
    usage_id: newId(),
    adjustment_id: newId(),
    invocation_id: c.invocation.id,
    input_tokens: c.consumed?.inputTokens ?? 0n,
    cached_tokens: c.consumed?.cachedInputTokens ?? 0n,
    output_tokens: c.consumed?.outputTokens ?? 0n,
    model: c.consumed?.model ?? null,
    at: c.invocation.completed_at ?? new Date(),
  };
}

/** Records the calls in one statement (all or nothing). */
export async function recordCalls(query: NamedQuery, calls: CallToRecord[]): Promise<void> {
  const settlements = calls.filter((c) => c.invocation.reservation_id && !c.lease).map(settlementOf);
  const leaseCalls = calls
    .filter((c) => c.lease)
    .map(
      (c): LeaseCallSettlement =>
        Object.assign(settlementOf(c), {
          lease_id: c.lease!.id,
          bound: c.lease!.bound,
          take: c.lease!.take,
          request_id: c.invocation.request_id,
          created_at: c.invocation.started_at,
        }),
    );
  await query('nexus_record_calls', SQL, [
    jsonParam(settlements),
    jsonParam(leaseCalls),
    jsonParam(calls.map((c) => c.invocation)),
    jsonParam(calls.flatMap((c) => (c.attempt ? [c.attempt] : []))),
  ]);
}

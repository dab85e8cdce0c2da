/**
 * Gateway calls' settlements as ONE statement per batch: close each HELD
 * reservation, move its units on its quota period (consumed += actual,
 * reserved -= held), append one USAGE event per charged call (at most the held
 * units) and an ADJUSTMENT event for anything beyond, and insert the
 * invocations and their attempts. The rules are those of
 * services.quota.settle/release (src/domain/quota/quota-service.ts), written
 * as one round trip so that a busy access's period row is locked for one
 * statement, not a multi-statement transaction per call (which capped a single
 * access at ~200 calls/s here). Idempotent: a reservation that is no longer
 * HELD (settled, or expired by the sweeper) is left alone and its invocation
 * records 0 units.
 */
import type { Knex } from 'knex';
import type { AttemptRow, InvocationRow } from '../domain/invocations/invocation-types.js';
import { newId } from '../ids.js';

export interface Consumption {
  units: bigint;
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
  model: string | null;
}

export interface CallToRecord {
  invocation: InvocationRow;
  attempt: AttemptRow | null;
  reservationId: string | null;
  /** null with a reservation: release it (nothing charged, no usage event). */
  consumed: Consumption | null;
}

const INVOCATION_COLUMNS = [
  'id', 'workspace_id', 'workspace_access_id', 'provider_connection_id', 'inference_key_id', 'request_id', 'trace_id',
  'method', 'endpoint', 'requested_model', 'status', 'metering_status', 'streamed', 'reservation_id', 'quota_units',
  'error_code', 'started_at', 'first_token_at', 'completed_at', 'total_latency_ms', 'provider_latency_ms',
  'nexus_latency_ms', 'total_ttft_ms', 'provider_ttft_ms', 'nexus_ttft_ms',
];

const USAGE_COLUMNS = `id, workspace_id, workspace_access_id, quota_period_id, reservation_id, invocation_id, kind,
  units, input_tokens, cached_input_tokens, output_tokens, model, reason, created_at`;

const SQL = `
with s as (
  select * from json_to_recordset(cast(:settlements as json)) as x(
    rid uuid, status text, units bigint, charged boolean, usage_id uuid, adjustment_id uuid, invocation_id uuid,
    input_tokens bigint, cached_tokens bigint, output_tokens bigint, model text, at timestamptz)
), r as (
  update quota_reservations q set status = s.status, consumed_units = s.units, settled_at = s.at
    from s where q.id = s.rid and q.status = 'HELD'
  returning q.id, q.workspace_id, q.workspace_access_id, q.quota_period_id, q.reserved_units, s.units, s.charged,
            s.usage_id, s.adjustment_id, s.invocation_id, s.input_tokens, s.cached_tokens, s.output_tokens, s.model, s.at
), p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - t.reserved, consumed_units = qp.consumed_units + t.consumed
    from (select quota_period_id, sum(reserved_units) as reserved, sum(units) as consumed from r group by quota_period_id) t
   where qp.id = t.quota_period_id
  returning qp.id
), u as (
  insert into usage_events (${USAGE_COLUMNS})
  select usage_id, workspace_id, workspace_access_id, quota_period_id, id, invocation_id, 'USAGE',
         least(units, reserved_units), input_tokens, cached_tokens, output_tokens, model, null, at
    from r where charged
), a as (
  insert into usage_events (${USAGE_COLUMNS})
  select adjustment_id, workspace_id, workspace_access_id, quota_period_id, id, invocation_id, 'ADJUSTMENT',
         units - reserved_units, 0, 0, 0, model, 'consumed_beyond_reservation', at
    from r where charged and units > reserved_units
), inv as (
  insert into invocations (${INVOCATION_COLUMNS.join(', ')})
  select ${INVOCATION_COLUMNS.map((c) =>
    c === 'quota_units'
      ? `case when i.reservation_id is not null and not exists (select 1 from r where r.id = i.reservation_id) then 0 else i.quota_units end`
      : `i.${c}`,
  ).join(', ')}
    from json_populate_recordset(cast(null as invocations), cast(:invocations as json)) i
), att as (
  insert into invocation_attempts select * from json_populate_recordset(cast(null as invocation_attempts), cast(:attempts as json))
)
select count(*) as settled from r`;

const json = (rows: unknown[]) => JSON.stringify(rows, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));

/** Records the calls in one statement (all or nothing). */
export async function recordCalls(db: Knex, calls: CallToRecord[]): Promise<void> {
  const settlements = calls
    .filter((c) => c.reservationId)
    .map((c) => ({
      rid: c.reservationId,
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
    }));
  await db.raw(SQL, {
    settlements: json(settlements),
    invocations: json(calls.map((c) => c.invocation)),
    attempts: json(calls.flatMap((c) => (c.attempt ? [c.attempt] : []))),
  });
}

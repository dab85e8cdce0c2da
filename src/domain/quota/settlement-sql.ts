/**
 * The settlement rule, in one place, as SQL that settles any number of
 * reservations in ONE statement (so a busy access's period row is locked for
 * one statement, not a multi-statement transaction per call):
 * - each reservation still HELD is closed (SETTLED with what it consumed, or
 *   RELEASED with nothing); one that is not HELD is left alone (idempotent);
 * - its period: reserved -= held, consumed += consumed;
 * - a charged settlement appends exactly one USAGE event (at most the held
 *   units) and an ADJUSTMENT event for anything consumed beyond them.
 * `settlementCtes` reads the JSON array bound to `:settlements` and leaves the
 * settled rows in the CTE `r`; callers add their own CTEs and final select
 * (services.quota settles one; the gateway adds its invocation records).
 */
export interface SettlementInput {
  rid: string;
  status: 'SETTLED' | 'RELEASED';
  units: bigint;
  charged: boolean;
  usage_id: string;
  adjustment_id: string;
  invocation_id: string | null;
  input_tokens: bigint;
  cached_tokens: bigint;
  output_tokens: bigint;
  model: string | null;
  at: Date;
}

const USAGE_COLUMNS = `id, workspace_id, workspace_access_id, quota_period_id, reservation_id, invocation_id, kind,
  units, input_tokens, cached_input_tokens, output_tokens, model, reason, created_at`;

export const settlementCtes = `
s as (
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
)`;

/** Rows as a JSON parameter (bigints as decimal strings), e.g. for `:settlements`. */
export function jsonParam(rows: unknown[]): string {
  return JSON.stringify(rows, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
}

/**
 * The settlement rule, in one place, as SQL that settles any number of
 * reservations in ONE statement (so a busy access's period row is locked for
 * one statement, not a multi-statement transaction per call):
 * - each reservation still HELD is closed (SETTLED with what it consumed, or
 *   RELEASED with nothing); one that is not HELD is left alone (idempotent);
 * - its period: reserved -= held, consumed += consumed;
 * - a charged settlement appends exactly one USAGE event (at most the held
 *   units) and an ADJUSTMENT event for anything consumed beyond them.
 * Calls admitted on a quota lease (src/gateway/quota-leases.ts) come in
 * `:leaseCalls`: each carries its bound and `take`, the units it moves from the
 * lease's hold to consumed. For those whose lease is still HELD the lease
 * shrinks by `take`, the period's reserved by `take` and its consumed grows by
 * the units, the call's own reservation row is inserted already closed, and its
 * events are written by the same rule. A call whose lease is no longer HELD
 * (expired by the sweeper) is charged nothing, like a call reservation.
 * `settlementCtes` reads `:settlements` and `:leaseCalls` (JSON arrays) and
 * leaves every call it settled in the CTE `settled` (the plain reservations
 * also in `r`); callers add their own CTEs and final select (services.quota
 * settles one; the gateway adds its invocation records).
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

/**
 * A call admitted on a quota lease, settled with the same rule (its `status` is
 * derived from `charged`; `units` is 0 when released).
 */
export interface LeaseCallSettlement extends SettlementInput {
  lease_id: string;
  /** The call's upper bound, admitted against the lease: its own reservation's reserved_units. */
  bound: bigint;
  /** Units the lease's hold gives up: the units, or less when they exceeded what the lease still held. */
  take: bigint;
  request_id: string;
  created_at: Date;
}

const USAGE_COLUMNS = `id, workspace_id, workspace_access_id, quota_period_id, reservation_id, invocation_id, kind,
  units, input_tokens, cached_input_tokens, output_tokens, model, reason, created_at`;

/** The settlement CTEs, reading their two JSON arrays from these placeholders. */
export const settlementCtesWith = (params: { settlements: string; leaseCalls: string }) => `
s as (
  select * from json_to_recordset(cast(${params.settlements} as json)) as x(
    rid uuid, status text, units bigint, charged boolean, usage_id uuid, adjustment_id uuid, invocation_id uuid,
    input_tokens bigint, cached_tokens bigint, output_tokens bigint, model text, at timestamptz)
), r as (
  update quota_reservations q set status = s.status, consumed_units = s.units, settled_at = s.at
    from s where q.id = s.rid and q.status = 'HELD'
  returning q.id, q.workspace_id, q.workspace_access_id, q.quota_period_id, q.reserved_units, s.units, s.charged,
            s.usage_id, s.adjustment_id, s.invocation_id, s.input_tokens, s.cached_tokens, s.output_tokens, s.model, s.at
), lc as (
  select * from json_to_recordset(cast(${params.leaseCalls} as json)) as x(
    rid uuid, lease_id uuid, bound bigint, take bigint, units bigint, charged boolean, usage_id uuid, adjustment_id uuid,
    invocation_id uuid, input_tokens bigint, cached_tokens bigint, output_tokens bigint, model text, at timestamptz,
    request_id text, created_at timestamptz)
), l as (
  update quota_reservations q
     set reserved_units = q.reserved_units - t.take, consumed_units = coalesce(q.consumed_units, 0) + t.units
    from (select lease_id, sum(take) as take, sum(units) as units from lc group by lease_id) t
   where q.id = t.lease_id and q.status = 'HELD' and q.kind = 'LEASE'
  returning q.id, q.workspace_id, q.workspace_access_id, q.quota_period_id, t.take, t.units
), lr as (
  insert into quota_reservations (id, workspace_id, workspace_access_id, quota_period_id, reserved_units, consumed_units,
                                  status, request_id, created_at, expires_at, settled_at, kind, lease_id)
  select lc.rid, l.workspace_id, l.workspace_access_id, l.quota_period_id, lc.bound, lc.units,
         case when lc.charged then 'SETTLED' else 'RELEASED' end, lc.request_id, lc.created_at, lc.at, lc.at, 'CALL', l.id
    from lc join l on l.id = lc.lease_id
), settled as (
  select id, workspace_id, workspace_access_id, quota_period_id, reserved_units, units, charged, usage_id, adjustment_id,
         invocation_id, input_tokens, cached_tokens, output_tokens, model, at
    from r
  union all
  select lc.rid, l.workspace_id, l.workspace_access_id, l.quota_period_id, lc.bound, lc.units, lc.charged, lc.usage_id,
         lc.adjustment_id, lc.invocation_id, lc.input_tokens, lc.cached_tokens, lc.output_tokens, lc.model, lc.at
    from lc join l on l.id = lc.lease_id
), p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - t.reserved, consumed_units = qp.consumed_units + t.consumed
    from (select quota_period_id, sum(reserved) as reserved, sum(consumed) as consumed
            from (select quota_period_id, reserved_units as reserved, units as consumed from r
                  union all
                  select quota_period_id, take, units from l) x
           group by quota_period_id) t
   where qp.id = t.quota_period_id
  returning qp.id
), u as (
  insert into usage_events (${USAGE_COLUMNS})
  select usage_id, workspace_id, workspace_access_id, quota_period_id, id, invocation_id, 'USAGE',
         least(units, reserved_units), input_tokens, cached_tokens, output_tokens, model, null, at
    from settled where charged
), a as (
  insert into usage_events (${USAGE_COLUMNS})
  select adjustment_id, workspace_id, workspace_access_id, quota_period_id, id, invocation_id, 'ADJUSTMENT',
         units - reserved_units, 0, 0, 0, model, 'consumed_beyond_reservation', at
    from settled where charged and units > reserved_units
)`;

/** With knex's named bindings `:settlements` and `:leaseCalls`. */
export const settlementCtes = settlementCtesWith({ settlements: ':settlements', leaseCalls: ':leaseCalls' });

/**
 * Rows as a JSON parameter: bigints as decimal strings, dates as ISO strings,
 * null fields left out (a missing key reads as NULL, and the text to build and
 * parse is shorter). Written out by hand because the gateway serializes every
 * call it records and JSON.stringify with a replacer function was ~30% slower;
 * the keys are column names, which need no escaping.
 */
export function jsonParam(rows: object[]): string {
  let out = '[';
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i] as Record<string, unknown>;
    let item = i ? ',{' : '{';
    let first = true;
    for (const key in row) {
      const v = row[key];
      if (v === null || v === undefined) continue;
      let json: string;
      if (typeof v === 'string') json = JSON.stringify(v);
      else if (typeof v === 'bigint') json = `"${v}"`;
      else if (v instanceof Date) json = `"${v.toISOString()}"`;
      else json = JSON.stringify(v);
      item += (first ? '"' : ',"') + key + '":' + json;
      first = false;
    }
    out += item + '}';
  }
  return out + ']';
}

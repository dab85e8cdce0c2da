/**
 * The settlement rule, in one place: calls admitted on a quota lease
 * (quota-leases.ts) settled, any number of them, in ONE statement, so a busy
 * access's period row is locked for one statement, not a transaction per call.
 * Each call comes with its bound and `take`, the units it moves from the
 * lease's hold to consumed. For those whose lease is still HELD:
 * - the lease shrinks by `take` and records the units as its consumed;
 * - the period: reserved -= take, consumed += units;
 * - a charged call appends exactly one USAGE event (at most its bound) and an
 *   ADJUSTMENT event for anything consumed beyond it; its events name the lease
 *   and the invocation.
 * A call whose lease is no longer HELD (expired by the sweeper) is charged
 * nothing. The CTEs leave every call they settled in `settled`; the gateway's
 * record statement (src/gateway/call-repo.ts) adds its invocations and final select.
 */

/** A call admitted on a quota lease, as the statement reads it (`units` is 0 when it is not charged). */
export interface LeaseCallSettlement {
  lease_id: string;
  /** The call's upper bound, admitted against the lease: what its USAGE event may hold at most. */
  bound: bigint;
  /** Units the lease's hold gives up: the units, or less when they exceeded what the lease still held. */
  take: bigint;
  units: bigint;
  charged: boolean;
  usage_id: string;
  /** The ADJUSTMENT event's id, when the units exceed the bound. */
  adjustment_id: string | null;
  invocation_id: string;
  input_tokens: bigint;
  cached_tokens: bigint;
  output_tokens: bigint;
  model: string | null;
  at: Date;
}

const USAGE_COLUMNS = `id, workspace_id, workspace_access_id, quota_period_id, reservation_id, invocation_id, kind,
  units, input_tokens, cached_input_tokens, output_tokens, model, reason, created_at`;

/** Calls admitted on quota leases, from the JSON array at this placeholder. */
export const leaseCallSettlementCtes = (leaseCalls: string) => `
lc as (
  select * from json_to_recordset(cast(${leaseCalls} as json)) as x(
    lease_id uuid, bound bigint, take bigint, units bigint, charged boolean, usage_id uuid, adjustment_id uuid,
    invocation_id uuid, input_tokens bigint, cached_tokens bigint, output_tokens bigint, model text, at timestamptz)
), l as (
  update quota_reservations q
     set reserved_units = q.reserved_units - t.take, consumed_units = coalesce(q.consumed_units, 0) + t.units
    from (select lease_id, sum(take) as take, sum(units) as units from lc group by lease_id) t
   where q.id = t.lease_id and q.status = 'HELD' and q.kind = 'LEASE'
  returning q.id, q.workspace_id, q.workspace_access_id, q.quota_period_id, t.take, t.units
), settled as (
  select l.id, l.workspace_id, l.workspace_access_id, l.quota_period_id, lc.bound, lc.units, lc.charged,
         lc.usage_id, lc.adjustment_id, lc.invocation_id, lc.input_tokens, lc.cached_tokens, lc.output_tokens, lc.model, lc.at
    from lc join l on l.id = lc.lease_id
), p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - t.take, consumed_units = qp.consumed_units + t.units
    from (select quota_period_id, sum(take) as take, sum(units) as units from l group by quota_period_id) t
   where qp.id = t.quota_period_id
  returning qp.id
), u as (
  insert into usage_events (${USAGE_COLUMNS})
  select usage_id, workspace_id, workspace_access_id, quota_period_id, id, invocation_id, 'USAGE',
         least(units, bound), input_tokens, cached_tokens, output_tokens, model, null, at
    from settled where charged
), a as (
  insert into usage_events (${USAGE_COLUMNS})
  select adjustment_id, workspace_id, workspace_access_id, quota_period_id, id, invocation_id, 'ADJUSTMENT',
         units - bound, 0, 0, 0, model, 'consumed_beyond_reservation', at
    from settled where charged and units > bound
)`;

/**
 * The settlement rule, in one place, as SQL that settles any number of calls
 * in ONE statement (so a busy access's period row is locked for one
 * statement, not a multi-statement transaction per call):
 * - the period: reserved -= what the settled holds give up, consumed += what
 *   was consumed;
 * - a charged settlement appends exactly one USAGE event (at most the held
 *   units) and an ADJUSTMENT event for anything consumed beyond them.
 * Two statements use it:
 * - `reservationSettlementCtes` closes reservations of their own (`:settlements`):
 *   each still HELD becomes SETTLED with what it consumed, or RELEASED with
 *   nothing; one that is not HELD is left alone (idempotent). Its events name it.
 * - `leaseCallSettlementCtes`: calls admitted on a quota lease
 *   (src/gateway/quota-leases.ts), each with its bound and `take`, the units it
 *   moves from the lease's hold to consumed. For those whose lease is still
 *   HELD the lease shrinks by `take` and records the units as its consumed; its
 *   events name the lease and the invocation. A call whose lease is no longer
 *   HELD (expired by the sweeper) is charged nothing.
 * Both leave every call they settled in the CTE `settled`; callers add their
 * own CTEs and final select (services.quota settles one reservation; the
 * gateway adds its invocation records).
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

/** A call admitted on a quota lease, settled with the same rule (`units` is 0 when it is not charged). */
export interface LeaseCallSettlement extends Omit<SettlementInput, 'rid' | 'status' | 'adjustment_id'> {
  /** The ADJUSTMENT event's id, when the units exceed the bound. */
  adjustment_id: string | null;
  lease_id: string;
  /** The call's upper bound, admitted against the lease: what its USAGE event may hold at most. */
  bound: bigint;
  /** Units the lease's hold gives up: the units, or less when they exceeded what the lease still held. */
  take: bigint;
}

const USAGE_COLUMNS = `id, workspace_id, workspace_access_id, quota_period_id, reservation_id, invocation_id, kind,
  units, input_tokens, cached_input_tokens, output_tokens, model, reason, created_at`;

/** The period's counters, and the events of the charged settlements, from `settled` and `moved` (period, reserved, consumed). */
const settledCtes = (moved: string) => `
p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - t.reserved, consumed_units = qp.consumed_units + t.consumed
    from (select quota_period_id, sum(reserved) as reserved, sum(consumed) as consumed from (${moved}) x group by quota_period_id) t
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

/** Reservations of their own, from the JSON array at this placeholder. */
export const reservationSettlementCtes = (settlements: string) => `
s as (
  select * from json_to_recordset(cast(${settlements} as json)) as x(
    rid uuid, status text, units bigint, charged boolean, usage_id uuid, adjustment_id uuid, invocation_id uuid,
    input_tokens bigint, cached_tokens bigint, output_tokens bigint, model text, at timestamptz)
), r as (
  update quota_reservations q set status = s.status, consumed_units = s.units, settled_at = s.at
    from s where q.id = s.rid and q.status = 'HELD'
  returning q.id, q.workspace_id, q.workspace_access_id, q.quota_period_id, q.reserved_units, s.units, s.charged,
            s.usage_id, s.adjustment_id, s.invocation_id, s.input_tokens, s.cached_tokens, s.output_tokens, s.model, s.at
), settled as (
  select * from r
), ${settledCtes('select quota_period_id, reserved_units as reserved, units as consumed from r')}`;

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
  select l.id, l.workspace_id, l.workspace_access_id, l.quota_period_id, lc.bound as reserved_units, lc.units, lc.charged,
         lc.usage_id, lc.adjustment_id, lc.invocation_id, lc.input_tokens, lc.cached_tokens, lc.output_tokens, lc.model, lc.at
    from lc join l on l.id = lc.lease_id
), ${settledCtes('select quota_period_id, take as reserved, units as consumed from l')}`;

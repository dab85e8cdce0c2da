/**
 * The settlement rule, in one place: calls admitted on a quota lease
 * (quota-leases.ts) settled, any number of them, in ONE statement, so a busy
 * access's period row is locked for one statement, not a transaction per call.
 * Each call comes with its bound and `take`, the units it moves from the
 * lease's hold to consumed. Only the calls whose invocation the same statement
 * recorded are settled (CTE `recorded`): a call is charged once, however often
 * its record is written (a retry, a spool replayed, a call the sweeper already
 * charged for its dead process).
 * - A lease still HELD shrinks by `take` and records the units as its consumed;
 *   the period: reserved -= take, consumed += units.
 * - A lease no longer HELD (the sweeper expired it, and returned what it held)
 *   takes nothing: the period's consumed += units.
 * - A charged call appends exactly one USAGE event (at most its bound) and an
 *   ADJUSTMENT event for anything consumed beyond it; its events name the lease
 *   and the invocation.
 * Leases, then periods, are locked in id order (lockedInIdOrder).
 * - A period whose consumed units reach one of its thresholds raises quota.threshold_crossed, in the same
 *   statement (src/domain/events/outbox-sql.ts): no round trip is added to any call.
 * The CTEs leave every call they settled in `settled`; the gateway's record
 * statement (src/gateway/call-repo.ts) adds its invocations and final select.
 */

import { thresholdEventCtes } from '../events/outbox-sql.js';
import { ROLLED_CALL_COLUMNS, ROLLED_EVENT_COLUMNS, rollUpCtes } from '../invocations/rollup-sql.js';
import { priceOfCall } from '../prices/price-sql.js';

/**
 * The rows of `table` whose ids `ids` (a subquery) names, locked in id order: every statement that locks
 * several leases (the record statement, a process's heartbeat, the reclaim) or several periods takes them in
 * that order, so two of them that touch the same rows wait for each other instead of deadlocking. Used as
 * `where id in ${lockedInIdOrder(...)}` in an UPDATE that would otherwise lock rows in its plan's order.
 */
export const lockedInIdOrder = (table: 'quota_leases' | 'quota_periods', ids: string) =>
  `(select id from ${table} where id in (${ids}) order by id for update)`;

/** A call admitted on a quota lease, as the statement reads it (`units` is 0 when it is not charged). */
// eslint-disable-next-line @typescript-eslint/no-unused-vars -- the shape of the JSON the statement reads (CallRows.leaseCall), for the reader
interface LeaseCallSettlement {
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
  /** Of the input, written to the provider's cache; of the output, reasoning (absent: not reported). */
  cache_write_tokens: bigint | null;
  reasoning_tokens: bigint | null;
  model: string | null;
  /** The pricing applied: the matched model rule's pattern (null: the strategy's own multipliers), the multipliers. */
  model_rule: string | null;
  input_ppm: bigint;
  cached_ppm: bigint;
  output_ppm: bigint;
  at: Date;
}

const USAGE_COLUMNS = `id, workspace_id, workspace_access_id, quota_period_id, lease_id, invocation_id, kind,
  units, input_tokens, cached_input_tokens, output_tokens, model, reason, created_at,
  model_rule, input_multiplier_ppm, cached_input_multiplier_ppm, output_multiplier_ppm, cost_micros, price_id,
  cache_write_tokens, reasoning_tokens`;

/**
 * Calls admitted on quota leases, from the JSON array at this placeholder, those of them whose invocation
 * the CTE `recorded` (its `id`s, `started_at`, `provider_connection_id` and `requested_model`) holds. A USAGE event carries the
 * call's cost under the price in force when it started (price-sql.ts); an ADJUSTMENT event carries units only.
 */
export const leaseCallSettlementCtes = (leaseCalls: string, recorded: string) => `
lc as (
  select x.*, r.started_at as call_started_at, r.provider_connection_id as call_connection_id, r.requested_model as call_requested_model
    from json_to_recordset(cast(${leaseCalls} as json)) as x(
    lease_id uuid, bound bigint, take bigint, units bigint, charged boolean, usage_id uuid, adjustment_id uuid,
    invocation_id uuid, input_tokens bigint, cached_tokens bigint, output_tokens bigint, model text, at timestamptz,
    model_rule text, input_ppm bigint, cached_ppm bigint, output_ppm bigint, cache_write_tokens bigint, reasoning_tokens bigint)
  join ${recorded} r on r.id = x.invocation_id
), l as (
  update quota_leases q
     set reserved_units = q.reserved_units - t.take, consumed_units = coalesce(q.consumed_units, 0) + t.units
    from (select lease_id, sum(take) as take, sum(units) as units from lc group by lease_id) t
   where q.id = t.lease_id and q.status = 'HELD'
     and q.id in ${lockedInIdOrder('quota_leases', 'select lease_id from lc')}
  returning q.id
), settled as (
  select q.id, q.workspace_id, q.workspace_access_id, q.quota_period_id, lc.bound, lc.units, lc.charged,
         case when l.id is null then 0 else lc.take end as take,
         lc.usage_id, lc.adjustment_id, lc.invocation_id, lc.input_tokens, lc.cached_tokens, lc.output_tokens, lc.model, lc.at,
         lc.model_rule, lc.input_ppm, lc.cached_ppm, lc.output_ppm, lc.call_started_at, lc.call_connection_id,
         lc.call_requested_model, lc.cache_write_tokens, lc.reasoning_tokens
    from lc join quota_leases q on q.id = lc.lease_id left join l on l.id = lc.lease_id
), p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - t.take, consumed_units = qp.consumed_units + t.units
    from (select quota_period_id, sum(take) as take, sum(units) as units from settled group by quota_period_id) t
   where qp.id = t.quota_period_id
     and qp.id in ${lockedInIdOrder('quota_periods', 'select quota_period_id from settled')}
  returning qp.id, qp.workspace_id, qp.workspace_access_id, qp.plan_id, qp.quota_strategy_id, qp.granted_units,
            qp.consumed_units, qp.period_end, t.units
), u as (
  insert into usage_events (${USAGE_COLUMNS})
  select s.usage_id, s.workspace_id, s.workspace_access_id, s.quota_period_id, s.id, s.invocation_id, 'USAGE',
         least(s.units, s.bound), s.input_tokens, s.cached_tokens, s.output_tokens, s.model, null, s.at,
         s.model_rule, s.input_ppm, s.cached_ppm, s.output_ppm, mp.cost_micros, mp.id, s.cache_write_tokens, s.reasoning_tokens
    from settled s ${priceOfCall('s')}
   where s.charged
  returning ${ROLLED_EVENT_COLUMNS}
), a as (
  insert into usage_events (${USAGE_COLUMNS})
  select adjustment_id, workspace_id, workspace_access_id, quota_period_id, id, invocation_id, 'ADJUSTMENT',
         units - bound, 0, 0, 0, model, 'consumed_beyond_reservation', at,
         model_rule, input_ppm, cached_ppm, output_ppm, null, null, null, null
    from settled where charged and units > bound
  returning ${ROLLED_EVENT_COLUMNS}
), new_events as (
  select * from u union all select * from a
), ${thresholdEventCtes('p')}`;

/**
 * The leases of dead processes (HELD, past their expiry, or with :all every HELD one) become EXPIRED,
 * and the calls their last heartbeat wrote (lease_calls) are settled by the same rule: each recorded
 * as its heartbeat left it (FAILED `gateway_lost`) and charged its units, unless its invocation is
 * recorded already (its process lived to write it), and added to the usage rollup. What the leases held returns to
 * their periods, and what the calls consumed is added, in the same statement (periods locked in id order), which
 * raises quota.threshold_crossed as the settlement does. One row per period: its id and carried units (the
 * caller gives back the carry of a period a plan change split: quotaRepo.giveBackCarry).
 */
export const RECLAIM_EXPIRED_SQL = `
with expired as (
  update quota_leases
     set status = 'EXPIRED', settled_at = :now, consumed_units = coalesce(consumed_units, 0)
   where id in (select id from quota_leases where status = 'HELD' and (expires_at <= :now or :all)
                order by id for update skip locked)
     and status = 'HELD'
  returning id, workspace_id, workspace_access_id, quota_period_id, reserved_units
), calls as (
  delete from lease_calls c using expired e where c.lease_id = e.id
  returning c.invocation_id, c.lease_id, c.bound, c.units, c.input_tokens, c.cached_tokens, c.output_tokens, c.model, c.invocation,
            c.usage_id, c.adjustment_id, c.updated_at, e.workspace_id, e.workspace_access_id, e.quota_period_id,
            c.model_rule, c.input_multiplier_ppm, c.cached_input_multiplier_ppm, c.output_multiplier_ppm, c.cache_write_tokens,
            c.reasoning_tokens
), recorded as (
  insert into invocations select (json_populate_record(cast(null as invocations), c.invocation)).* from calls c
  on conflict (id) do nothing
  returning ${ROLLED_CALL_COLUMNS}
), charged as (
  select c.*, r.started_at as call_started_at, r.provider_connection_id as call_connection_id, r.requested_model as call_requested_model
    from calls c join recorded r on r.id = c.invocation_id where c.units > 0
), u as (
  insert into usage_events (${USAGE_COLUMNS})
  select c.usage_id, c.workspace_id, c.workspace_access_id, c.quota_period_id, c.lease_id, c.invocation_id, 'USAGE',
         least(c.units, c.bound), c.input_tokens, c.cached_tokens, c.output_tokens, c.model, null, c.updated_at,
         c.model_rule, c.input_multiplier_ppm, c.cached_input_multiplier_ppm, c.output_multiplier_ppm, mp.cost_micros, mp.id,
         c.cache_write_tokens, c.reasoning_tokens
    from charged c ${priceOfCall('c')}
  returning ${ROLLED_EVENT_COLUMNS}
), a as (
  insert into usage_events (${USAGE_COLUMNS})
  select adjustment_id, workspace_id, workspace_access_id, quota_period_id, lease_id, invocation_id, 'ADJUSTMENT',
         units - bound, 0, 0, 0, model, 'consumed_beyond_reservation', updated_at,
         model_rule, input_multiplier_ppm, cached_input_multiplier_ppm, output_multiplier_ppm, null, null, null, null
    from charged where units > bound
  returning ${ROLLED_EVENT_COLUMNS}
), new_events as (
  select * from u union all select * from a
), ${rollUpCtes('recorded', 'new_events')}, held as (
  select quota_period_id, sum(reserved_units) as reserved from expired group by quota_period_id
), used as (
  select quota_period_id, sum(units) as consumed from charged group by quota_period_id
), p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - h.reserved, consumed_units = qp.consumed_units + coalesce(us.consumed, 0)
    from held h left join used us on us.quota_period_id = h.quota_period_id
   where qp.id = h.quota_period_id
     and qp.id in ${lockedInIdOrder('quota_periods', 'select quota_period_id from held')}
  returning qp.id, qp.workspace_id, qp.workspace_access_id, qp.plan_id, qp.quota_strategy_id, qp.granted_units,
            qp.consumed_units, qp.period_end, coalesce(us.consumed, 0) as units, qp.carried_units
), ${thresholdEventCtes('p')}
select p.id as quota_period_id, p.carried_units, (select count(*) from expired) as leases, (select count(*) from charged) as calls
  from p
 order by p.id`;

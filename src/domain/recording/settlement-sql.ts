/**
 * The settlement rule, in one place: calls admitted on a quota lease (src/domain/quota/quota-leases.ts) settled, any
 * number of them, in ONE statement (record-sql.ts), so a busy access's period row is locked for one statement,
 * not a transaction per call. Each call comes with its bound and `take`, the units it moves from the lease's hold to
 * consumed. Only the calls whose invocation the same statement recorded are settled (CTE `recorded`): a call is
 * charged once, however often its record is written (a retry, a spool replayed, a call the sweeper already charged
 * for its dead process).
 * - A lease still HELD shrinks by `take` and records the units as its consumed; the period: reserved -= take,
 *   consumed += units.
 * - A lease no longer HELD (the sweeper expired it, and returned what it held) takes nothing: the period's
 *   consumed += units.
 * - The sweeper's reclaim settles the calls a dead process's last heartbeat wrote (lease_calls) by the same rule:
 *   their leases become EXPIRED and what they held returns to their periods.
 * Leases, then periods, are locked in id order (lockedInIdOrder).
 */

import { KIND_COLUMNS, kindColumnsOf } from './kind-sql.js';

/**
 * The rows of `table` whose ids `ids` (a subquery) names, locked in id order: every statement that locks
 * several leases (the record statement, a process's heartbeat, the reclaim) or several periods takes them in
 * that order, so two of them that touch the same rows wait for each other instead of deadlocking. Used as
 * `where id in ${lockedInIdOrder(...)}` in an UPDATE that would otherwise lock rows in its plan's order.
 */
export const lockedInIdOrder = (table: 'quota_leases' | 'quota_periods', ids: string) =>
  `(select id from ${table} where id in (${ids}) order by id for update)`;

/**
 * A call admitted on a quota lease, as the record statement reads it (`units` is 0 when it is not charged): the
 * attributes of the composite type `nexus_lease_call_input` (migration 20261217010000_record_input_types), in its
 * order; a call's settlement is an element of an array of it (src/db/row-record.ts, CallRows.leaseCall).
 * - bound: the call's upper bound, admitted against the lease: what its USAGE event may hold at most;
 * - take: the units the lease's hold gives up: the units, or less when they exceeded what the lease still held;
 * - adjustment_id: the ADJUSTMENT event's id, when the units exceed the bound;
 * - cache_write_tokens, reasoning_tokens: of the input, written to the provider's cache; of the output, reasoning
 *   (null: not reported); the kinds beyond text tokens (kind-sql.ts), each null where not reported;
 * - model_rule, input_ppm, cached_ppm, output_ppm: the pricing applied, the matched model rule's pattern (null: the
 *   strategy's own multipliers) and the multipliers;
 * - per_call_only: a passed-through call's: its USAGE event is written only when its price sets a per-call price
 *   (price-sql.ts).
 */
export const LEASE_CALL_COLUMNS = [
  'lease_id',
  'bound',
  'take',
  'units',
  'charged',
  'usage_id',
  'adjustment_id',
  'invocation_id',
  'input_tokens',
  'cached_tokens',
  'output_tokens',
  'model',
  'at',
  'model_rule',
  'input_ppm',
  'cached_ppm',
  'output_ppm',
  'cache_write_tokens',
  'reasoning_tokens',
  ...KIND_COLUMNS,
  'per_call_only',
] as const;

/**
 * The calls settled on their leases: those of the array (of nexus_lease_call_input) at placeholder `leaseCalls` whose invocation the CTE
 * `recorded` (its `id`s, `started_at`, `provider_connection_id` and `requested_model`) holds (`lc`); their leases
 * still HELD give up their `take` (`l`); `settled`, each call with its lease's period and what it took, the shape
 * the usage events read (usage-event-sql.ts).
 */
export const settledLeaseCtes = (leaseCalls: string, recorded: string) => `
lc as (
  select x.*, r.started_at as call_started_at, r.provider_connection_id as call_connection_id, r.requested_model as call_requested_model
    from unnest(cast(${leaseCalls} as nexus_lease_call_input[])) x
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
         lc.call_requested_model, lc.cache_write_tokens, lc.reasoning_tokens, ${kindColumnsOf('lc')}, lc.per_call_only
    from lc join quota_leases q on q.id = lc.lease_id left join l on l.id = lc.lease_id
)`;

/**
 * The periods charged (`p`): of the calls `settled`, reserved -= take and consumed += units on each of their
 * periods, locked in id order. Returns what the thresholds read (threshold-sql.ts).
 */
export const chargedPeriodCtes = (settled: string) => `p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - t.take, consumed_units = qp.consumed_units + t.units
    from (select quota_period_id, sum(take) as take, sum(units) as units from ${settled} group by quota_period_id) t
   where qp.id = t.quota_period_id
     and qp.id in ${lockedInIdOrder('quota_periods', `select quota_period_id from ${settled}`)}
  returning qp.id, qp.workspace_id, qp.workspace_access_id, qp.plan_id, qp.quota_strategy_id, qp.granted_units,
            qp.consumed_units, qp.period_end, t.units
)`;

/**
 * The leases of dead processes (HELD, past their expiry at placeholder `now`, or with placeholder `all` every HELD
 * one) become EXPIRED (`expired`; skip locked: processes sweeping at once take each lease once), and the calls their
 * last heartbeat wrote go (`calls`, from lease_calls).
 */
export const expiredLeaseCtes = (now: string, all: string) => `
expired as (
  update quota_leases
     set status = 'EXPIRED', settled_at = ${now}, consumed_units = coalesce(consumed_units, 0)
   where id in (select id from quota_leases where status = 'HELD' and (expires_at <= ${now} or ${all})
                order by id for update skip locked)
     and status = 'HELD'
  returning id, workspace_id, workspace_access_id, quota_period_id, reserved_units
), calls as (
  delete from lease_calls c using expired e where c.lease_id = e.id
  returning c.invocation_id, c.lease_id, c.bound, c.units, c.input_tokens, c.cached_tokens, c.output_tokens, c.model, c.invocation,
            c.usage_id, c.adjustment_id, c.updated_at, e.workspace_id, e.workspace_access_id, e.quota_period_id,
            c.model_rule, c.input_multiplier_ppm, c.cached_input_multiplier_ppm, c.output_multiplier_ppm, c.cache_write_tokens,
            c.reasoning_tokens, ${kindColumnsOf('c')}
)`;

/**
 * The calls of an expired lease that are charged (`charged`): those the CTE `recorded` recorded now (a call its
 * process lived to record is not charged again) that consumed units, each as its heartbeat left it, in the shape
 * of `settled` (settledLeaseCtes) that the usage events read.
 */
export const chargedHeartbeatCtes = (recorded: string) => `charged as (
  select c.lease_id as id, c.workspace_id, c.workspace_access_id, c.quota_period_id, c.bound, c.units, true as charged,
         c.usage_id, c.adjustment_id, c.invocation_id, c.input_tokens, c.cached_tokens, c.output_tokens, c.model, c.updated_at as at,
         c.model_rule, c.input_multiplier_ppm as input_ppm, c.cached_input_multiplier_ppm as cached_ppm,
         c.output_multiplier_ppm as output_ppm, r.started_at as call_started_at, r.provider_connection_id as call_connection_id,
         r.requested_model as call_requested_model, c.cache_write_tokens, c.reasoning_tokens, ${kindColumnsOf('c')},
         null::boolean as per_call_only
    from calls c join ${recorded} r on r.id = c.invocation_id where c.units > 0
)`;

/**
 * The periods of the expired leases (`p`): what the leases held returns (reserved -= held) and what the calls
 * `charged` consumed is added, periods locked in id order. Returns what the thresholds read, and the units a plan
 * change carried (quotaRepo.giveBackCarry).
 */
export const reclaimedPeriodCtes = (charged: string) => `held as (
  select quota_period_id, sum(reserved_units) as reserved from expired group by quota_period_id
), used as (
  select quota_period_id, sum(units) as consumed from ${charged} group by quota_period_id
), p as (
  update quota_periods qp
     set reserved_units = qp.reserved_units - h.reserved, consumed_units = qp.consumed_units + coalesce(us.consumed, 0)
    from held h left join used us on us.quota_period_id = h.quota_period_id
   where qp.id = h.quota_period_id
     and qp.id in ${lockedInIdOrder('quota_periods', 'select quota_period_id from held')}
  returning qp.id, qp.workspace_id, qp.workspace_access_id, qp.plan_id, qp.quota_strategy_id, qp.granted_units,
            qp.consumed_units, qp.period_end, coalesce(us.consumed, 0) as units, qp.carried_units
)`;

/**
 * The outbox's statements, shared by the one emit() (outbox.ts) and the statements that raise events
 * themselves (the gateway's settlement, src/domain/quota/settlement-sql.ts): an event row, and one
 * webhook message per endpoint of its workspace that wants its type, written by the same statement, so
 * an event and its deliveries exist exactly when the change that caused them committed.
 */

/**
 * A CTE named `name` that queues the events of CTE `events` (its rows: id, workspace_id, type, created_at)
 * for every ACTIVE endpoint of their workspace subscribed to their type, or, with `endpoint`, for that one
 * endpoint alone (a test event).
 */
export const fanOutCte = (name: string, events: string, endpoint?: string) => `${name} as (
  insert into webhook_messages (event_id, endpoint_id, workspace_id, status, next_attempt_at, created_at)
  select e.id, ep.id, e.workspace_id, 'PENDING', e.created_at, e.created_at
    from ${events} e join webhook_endpoints ep on ep.workspace_id = e.workspace_id
   where ep.status = 'ACTIVE' and ep.deleted_at is null
     and ${endpoint ? `ep.id = ${endpoint}` : '(ep.event_types is null or ep.event_types @> jsonb_build_array(e.type))'}
)`;

/** Percentages of the granted units that raise quota.threshold_crossed when neither strategy nor plan sets any. */
const DEFAULT_THRESHOLDS = [80, 100];

/**
 * quota.threshold_crossed, raised inside the settlement statement. `periods` is a CTE of the periods it just
 * updated (id, workspace_id, workspace_access_id, plan_id, quota_strategy_id, granted_units, consumed_units
 * after, period_end, units: what this statement added). A threshold is crossed when the consumed units reach
 * it in this statement; quota_threshold_marks keeps it once per period and threshold, whatever happens after.
 */
export const thresholdEventCtes = (periods: string) => `
crossed as (
  select p.id as quota_period_id, p.workspace_id, p.workspace_access_id, p.granted_units, p.consumed_units, p.period_end,
         cast(th.value as int) as percent
    from ${periods} p
    join quota_strategies qs on qs.id = p.quota_strategy_id
    join plans pl on pl.id = p.plan_id
    cross join lateral jsonb_array_elements_text(
      coalesce(nullif(qs.event_thresholds, cast('null' as jsonb)), nullif(pl.event_thresholds, cast('null' as jsonb)),
               cast('${JSON.stringify(DEFAULT_THRESHOLDS)}' as jsonb))) th
   where p.granted_units > 0
     and p.consumed_units * 100 >= p.granted_units * cast(th.value as bigint)
     and (p.consumed_units - p.units) * 100 < p.granted_units * cast(th.value as bigint)
), marks as (
  insert into quota_threshold_marks (quota_period_id, percent, event_id, created_at)
  select quota_period_id, percent, nexus_uuid_v7(), now() from crossed
  on conflict do nothing
  returning quota_period_id, percent, event_id, created_at
), threshold_events as (
  insert into events (id, workspace_id, type, data, created_at)
  select m.event_id, c.workspace_id, 'quota.threshold_crossed',
         jsonb_build_object('workspaceAccessId', c.workspace_access_id, 'quotaPeriodId', c.quota_period_id,
           'thresholdPercent', c.percent, 'grantedUnits', cast(c.granted_units as text),
           'consumedUnits', cast(c.consumed_units as text),
           'periodEnd', to_char(c.period_end at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
         m.created_at
    from marks m join crossed c on c.quota_period_id = m.quota_period_id and c.percent = m.percent
  returning id, workspace_id, type, created_at
), ${fanOutCte('threshold_messages', 'threshold_events')}`;

/**
 * The thresholds part of the record statement (record-sql.ts): a period whose consumed units reach one of its
 * thresholds raises quota.threshold_crossed, queued for the webhook endpoints that want it (the outbox's fan-out,
 * src/domain/events/outbox-sql.ts), in the statement that charged it: no round trip is added to any call.
 */
import { fanOutCte } from '../events/outbox-sql.js';

/** Percentages of the granted units that raise quota.threshold_crossed when neither strategy nor plan sets any. */
const DEFAULT_THRESHOLDS = [80, 100];

/**
 * quota.threshold_crossed, raised inside the statement that charges the periods (the record, the reclaim).
 * `periods` is a CTE of the periods it just updated (id, workspace_id, workspace_access_id, plan_id,
 * quota_strategy_id, granted_units, consumed_units after, period_end, units: what this statement added). A threshold is crossed when the consumed units reach
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

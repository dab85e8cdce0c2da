/**
 * usage_rollups, the sums getUsageSummary reads: per UTC hour, access, inference key, model, connection and plan,
 * the units, tokens, cost and events of the usage events, and the calls (invocations) counted by status; and
 * usage_key_rollups, the same sums per hour, access and key only, which the summaries by access and by key read
 * (a month of hours by key reads a row per bucket there, not one per bucket and model, connection and plan); and
 * usage_day_rollups, usage_rollups' sums per day of the workspace's time zone, which the summaries by day read for
 * their whole days.
 *
 * Every statement that writes invocations and their usage events adds what it wrote to the three, in the same statement:
 * the gateway's record and the sweeper's reclaim (record-sql.ts); a spooled call and a refusal are written by
 * the record. One upsert per rollup key per statement and table, the rows
 * in key order, usage_rollups, then usage_key_rollups, then usage_day_rollups, so two statements adding to
 * the same hours lock them in the same order and wait rather than deadlock.
 *
 * A call counts in the hour of its USAGE event (when it completed), under its event's model; a call charged nothing
 * under the model the provider said answered, else the one requested. `failed_calls`: FAILED or UPSTREAM_ERROR;
 * `refused_calls`: REJECTED.
 */

import type { Queryable } from '../../db/database.js';
import { KIND_COUNTS } from './kind-sql.js';

/** The rollups, in the order the statements add to them. */
export const ROLLUP_TABLES = ['usage_rollups', 'usage_key_rollups', 'usage_day_rollups'] as const;

const EPOCH = `timestamptz '2000-01-01T00:00:00Z'`;

const KEY = 'workspace_id, hour, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id';

/** The rollup's sums, kept per key: the kinds beyond text tokens last (kind-sql.ts). */
export const ROLLUP_SUMS = [
  'units',
  'input_tokens',
  'cached_input_tokens',
  'output_tokens',
  'events',
  'cost_micros',
  'unpriced_events',
  'calls',
  'failed_calls',
  'refused_calls',
  ...KIND_COUNTS,
];

/** The columns of an invocation the rollup reads (a `returning` list). */
export const ROLLED_CALL_COLUMNS =
  'id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, plan_id, status, requested_model, attempt_upstream_model, started_at, completed_at, session';

/** The columns of a usage event the rollup reads (a `returning` list). */
export const ROLLED_EVENT_COLUMNS =
  'id, workspace_id, workspace_access_id, invocation_id, kind, created_at, model, units, input_tokens, cached_input_tokens, output_tokens, cost_micros, price_id, ' +
  KIND_COUNTS.join(', ');

/**
 * The rollup's rows of the invocations `calls` and the usage events `events` (relations with the columns above), one
 * per call and per event, before they are summed.
 */
const contributions = (calls: string, events: string, attribution = calls) => `
  select e.workspace_id, date_bin('1 hour', e.created_at, ${EPOCH}) as hour, e.workspace_access_id,
         coalesce(e.model, '') as model, coalesce(c.provider_connection_id::text, '') as provider_connection_id,
         coalesce(c.inference_key_id::text, '') as inference_key_id, coalesce(c.plan_id::text, '') as plan_id,
         e.units, e.input_tokens, e.cached_input_tokens, e.output_tokens, 1 as events, coalesce(e.cost_micros, 0) as cost_micros,
         case when e.kind = 'USAGE' and e.price_id is null then 1 else 0 end as unpriced_events,
         0 as calls, 0 as failed_calls, 0 as refused_calls, ${KIND_COUNTS.map((k) => `coalesce(e.${k}, 0) as ${k}`).join(', ')}
    from ${events} e left join ${attribution} c on c.id = e.invocation_id
  union all
  select c.workspace_id, date_bin('1 hour', coalesce(e.created_at, c.completed_at, c.started_at), ${EPOCH}), c.workspace_access_id,
         case when e.id is null then coalesce(nullif(c.attempt_upstream_model, ''), c.requested_model) else coalesce(e.model, '') end,
         c.provider_connection_id::text, c.inference_key_id::text, coalesce(c.plan_id::text, ''),
         0, 0, 0, 0, 0, 0, 0, 1,
         case when c.status in ('FAILED', 'UPSTREAM_ERROR') then 1 else 0 end,
         case when c.status = 'REJECTED' then 1 else 0 end, ${KIND_COUNTS.map(() => '0').join(', ')}
    from ${calls} c left join ${events} e on e.invocation_id = c.id and e.kind = 'USAGE'
   where c.session is null`;

const summed = (calls: string, events: string, attribution?: string) => `
  select ${KEY}, ${ROLLUP_SUMS.map((s) => `sum(${s}) as ${s}`).join(', ')}
    from (${contributions(calls, events, attribution)}) x
   group by ${KEY}`;

/** The key of usage_key_rollups: usage_rollups' without model, connection and plan. */
const SERIES_KEY = 'workspace_id, hour, workspace_access_id, inference_key_id';

/** usage_key_rollups' rows of `rows` (a relation of usage_rollups' key and sums), summed per hour, access and key. */
const bySeries = (rows: string) => `
  select ${SERIES_KEY}, ${ROLLUP_SUMS.map((s) => `sum(${s})`).join(', ')}
    from ${rows}
   group by ${SERIES_KEY}`;

/** An upsert's conflict clause: the sums added to those of the row `table` already holds under `key`. */
const addTo = (table: string, key: string) => `
  on conflict (${key}) do update
     set ${ROLLUP_SUMS.map((s) => `${s} = ${table}.${s} + excluded.${s}`).join(', ')}`;

/** The key of usage_day_rollups: usage_rollups' with the day of the workspace's zone, and the zone, for the hour. */
const DAY_KEY = 'workspace_id, day, time_zone, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id';

/**
 * usage_day_rollups' rows of `rows` (a relation of usage_rollups' key and sums), summed per day of the workspace's
 * time zone (read from its row: one lookup by primary key per statement) and usage_rollups' other keys. A day is
 * the local day its hours' starts fall in, as the summaries by day cut hours (usage-summary-repo.ts).
 */
const byDay = (rows: string) => `
  select r.workspace_id, date_trunc('day', r.hour, w.time_zone) as day, w.time_zone, r.workspace_access_id,
         r.inference_key_id, r.model, r.provider_connection_id, r.plan_id, ${ROLLUP_SUMS.map((s) => `sum(r.${s})`).join(', ')}
    from ${rows} r join workspaces w on w.id = r.workspace_id
   group by r.workspace_id, 2, w.time_zone, r.workspace_access_id, r.inference_key_id, r.model, r.provider_connection_id, r.plan_id`;

/**
 * The CTEs that add the invocations `calls` and the usage events `events` (relations with the columns
 * ROLLED_CALL_COLUMNS and ROLLED_EVENT_COLUMNS) to usage_rollups, usage_key_rollups and usage_day_rollups, summed once
 * (`rolled_rows`); for the statement that writes them (or a `with` of its own). `attribution`: the invocations the
 * events are counted under when they are not among `calls` (a batch's requests, settled before its invocation is
 * recorded: batch-settlement-sql.ts); none: `calls`.
 */
export const rollUpCtes = (calls: string, events: string, attribution?: string) => `rolled_rows as (${summed(calls, events, attribution)}
), rolled as (
  insert into usage_rollups as r (${KEY}, ${ROLLUP_SUMS.join(', ')})
  select * from rolled_rows order by ${KEY}${addTo('r', KEY)}
), rolled_series as (
  insert into usage_key_rollups as s (${SERIES_KEY}, ${ROLLUP_SUMS.join(', ')})
  ${bySeries('rolled_rows')}
   order by ${SERIES_KEY}${addTo('s', SERIES_KEY)}
), rolled_days as (
  insert into usage_day_rollups as d (${DAY_KEY}, ${ROLLUP_SUMS.join(', ')})
  ${byDay('rolled_rows')}
   order by ${DAY_KEY}${addTo('d', DAY_KEY)}
)`;

/**
 * The rollup rows of one workspace (its id at placeholder `workspace`) computed afresh from its invocations and usage
 * events, once its rows of the three tables are deleted: for rows written by hand (a benchmark's seed, a test's events at
 * chosen times).
 */
export const rebuildWorkspaceRollupsSql = (workspace: string) => `
with ${rollUpCtes(`(select * from invocations where workspace_id = ${workspace})`, `(select * from usage_events where workspace_id = ${workspace})`)}
select count(*) from rolled_rows`;

/**
 * usage_day_rollups' rows of one workspace (its id at placeholder `workspace`) made afresh from its hourly rows in its
 * zone (`zone`, an SQL literal of a known name), once the workspace's day rows are deleted: when its zone changes,
 * in the transaction that changes it (a statement recording at once may still add a day of the old zone: the
 * summaries read hours wherever they find one, usage-summary-repo.ts).
 */
export const rebuildWorkspaceDaysSql = (workspace: string, zone: string) => `
insert into usage_day_rollups as d (${DAY_KEY}, ${ROLLUP_SUMS.join(', ')})
select workspace_id, date_trunc('day', hour, ${zone}), ${zone}, workspace_access_id, inference_key_id, model,
       provider_connection_id, plan_id, ${ROLLUP_SUMS.map((s) => `sum_int8(${s})`).join(', ')}
  from usage_rollups where workspace_id = ${workspace}
 group by workspace_id, 2, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id
 order by ${DAY_KEY.replace('day, time_zone', '2, 3')}${addTo('d', DAY_KEY)}`;

/** The workspace's day rollups made again in the zone `zone` (a known IANA name): rebuildWorkspaceDaysSql's rows. */
export async function rebuildWorkspaceDays(tx: Queryable, workspaceId: string, zone: string): Promise<void> {
  await tx('usage_day_rollups').where({ workspace_id: workspaceId }).delete();
  await tx.raw(rebuildWorkspaceDaysSql('?', `'${zone.replaceAll("'", "''")}'`), [workspaceId]);
}

/**
 * usage_rollups, the sums getUsageSummary reads: per UTC hour, access, inference key, model, connection and plan,
 * the units, tokens, cost and events of the usage events, and the calls (invocations) counted by status; and
 * usage_key_rollups, the same sums per hour, access and key only, which the summaries by access and by key read
 * (a month of hours by key reads a row per bucket there, not one per bucket and model, connection and plan); and
 * the day rollups, the same sums per day of the workspace's time zone, which the summaries by day read for their
 * whole days: usage_day_rollups per day, model, connection and plan, usage_day_key_rollups per day, access and key.
 *
 * Every statement that writes invocations and their usage events adds what it wrote to all of them, in the same statement:
 * the gateway's record and the sweeper's reclaim (record-sql.ts); a spooled call and a refusal are written by
 * the record. One upsert per rollup key per statement and table, the rows
 * in key order, usage_rollups, then usage_key_rollups, then the day rollups, so two statements adding to the same
 * hours lock them in the same order and wait rather than deadlock.
 *
 * A call counts in the hour of its USAGE event (when it completed), under its event's model; a call charged nothing
 * under the model the provider said answered, else the one requested. `failed_calls`: FAILED or UPSTREAM_ERROR;
 * `refused_calls`: REJECTED.
 */

import type { Queryable } from '../../db/database.js';
import { KIND_COUNTS } from './kind-sql.js';

/** The rollups, in the order the statements add to them. */
export const ROLLUP_TABLES = ['usage_rollups', 'usage_key_rollups', 'usage_day_rollups', 'usage_day_key_rollups'] as const;

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
 * per call and per event, before they are summed. A Realtime session's own invocation (`session` set) counts no call:
 * its filter is written `coalesce(c.session is null, true)`, the same rows as `c.session is null`, because the planner
 * estimates `is null` on a CTE (no statistics) at half a percent of its rows, took the calls for one row and joined
 * them to the events by a nested loop, every call against every event of the batch; it estimates the coalesce at
 * half, and hashes the events.
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
   where coalesce(c.session is null, true)`;

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

/** The series of the day rollups: usage_day_rollups' (by model, connection, plan), usage_day_key_rollups' (by access, key). */
const DAY_SERIES = ['model, provider_connection_id, plan_id', 'workspace_access_id, inference_key_id'] as const;
const DAY_TABLES = ['usage_day_rollups', 'usage_day_key_rollups'] as const;
const dayKey = (series: string) => `workspace_id, day, time_zone, ${series}`;

/**
 * The rows of `rows` (a relation of usage_rollups' key and sums) with the day of the workspace's time zone (read
 * from its row: one lookup by primary key per statement) the hour is in: the local day its start falls in, as the
 * summaries by day cut hours (usage-summary-repo.ts).
 */
const withDays = (rows: string) => `
  select r.*, date_trunc('day', r.hour, w.time_zone) as day, w.time_zone
    from ${rows} r join workspaces w on w.id = r.workspace_id`;

/** A day rollup's upsert of `rows` (withDays'), summed per its key, in key order. */
const addDays = (i: 0 | 1, rows: string) => `
  insert into ${DAY_TABLES[i]} as d (${dayKey(DAY_SERIES[i])}, ${ROLLUP_SUMS.join(', ')})
  select ${dayKey(DAY_SERIES[i])}, ${ROLLUP_SUMS.map((s) => `sum(${s})`).join(', ')}
    from ${rows}
   group by ${dayKey(DAY_SERIES[i])}
   order by ${dayKey(DAY_SERIES[i])}${addTo('d', dayKey(DAY_SERIES[i]))}`;

/** The CTEs that add `rolled_rows` to the day rollups. */
const dayCtes = `, rolled_day_rows as (${withDays('rolled_rows')}
), rolled_days as (${addDays(0, 'rolled_day_rows')}
), rolled_day_series as (${addDays(1, 'rolled_day_rows')}
)`;

/**
 * The CTE that raises the usage revision (usage_revisions) of each workspace of `rows` that has a row of an hour
 * that ended more than an hour before the statement began: the summaries' finished days
 * (src/domain/invocations/usage-days.ts) are read again. Last, after the rollups: two statements adding to the same
 * hours lock their rows in one order, then the revision.
 */
const lateCte = (rows: string) => `, rolled_late as (
  insert into usage_revisions as v (workspace_id, revision)
  select distinct workspace_id, 1 from ${rows} where hour < date_trunc('hour', now()) - interval '1 hour'
  on conflict (workspace_id) do update set revision = v.revision + 1
)`;

/** The statement that raises the usage revision of one workspace, its id the one binding (lateCte's, for one). */
export const RAISE_REVISION_SQL = `insert into usage_revisions as v (workspace_id, revision) values (?, 1)
  on conflict (workspace_id) do update set revision = v.revision + 1`;

/**
 * The CTEs that add the invocations `calls` and the usage events `events` (relations with the columns
 * ROLLED_CALL_COLUMNS and ROLLED_EVENT_COLUMNS) to the rollups (ROLLUP_TABLES), summed once
 * (`rolled_rows`), and raise the revision of a workspace whose rows are late (lateCte); for the statement that writes
 * them (or a `with` of its own). `attribution`: the invocations the
 * events are counted under when they are not among `calls` (a batch's requests, settled before its invocation is
 * recorded: batch-settlement-sql.ts); none: `calls`. `days`: false leaves the day rollups out (scripts/bench-pg-parts.ts measures what they cost).
 */
export const rollUpCtes = (
  calls: string,
  events: string,
  attribution?: string,
  days = true,
) => `rolled_rows as (${summed(calls, events, attribution)}
), rolled as (
  insert into usage_rollups as r (${KEY}, ${ROLLUP_SUMS.join(', ')})
  select * from rolled_rows order by ${KEY}${addTo('r', KEY)}
), rolled_series as (
  insert into usage_key_rollups as s (${SERIES_KEY}, ${ROLLUP_SUMS.join(', ')})
  ${bySeries('rolled_rows')}
   order by ${SERIES_KEY}${addTo('s', SERIES_KEY)}
)${days ? dayCtes : ''}${lateCte('rolled_rows')}`;

/**
 * The rollup rows of one workspace (its id at placeholder `workspace`) computed afresh from its invocations and usage
 * events, once its rows of the rollups (ROLLUP_TABLES) are deleted: for rows written by hand (a benchmark's seed, a test's events at
 * chosen times).
 */
export const rebuildWorkspaceRollupsSql = (workspace: string) => `
with ${rollUpCtes(`(select * from invocations where workspace_id = ${workspace})`, `(select * from usage_events where workspace_id = ${workspace})`)}
select count(*) from rolled_rows`;

/**
 * The day rollups' rows of one workspace (its id at placeholder `workspace`) made afresh from its hourly rows in its
 * zone (`zone`, an SQL literal of a known name), once its day rows are deleted: when its zone changes, in the
 * transaction that changes it (a statement recording at once may still add a day of the old zone: the summaries
 * read hours wherever they find one, usage-summary-repo.ts).
 */
const rebuildWorkspaceDaysSql = (workspace: string, zone: string) => `
with day_rows as (
  select r.*, date_trunc('day', r.hour, ${zone}) as day, ${zone} as time_zone from usage_rollups r where r.workspace_id = ${workspace}
), days as (${addDays(0, 'day_rows')}
) ${addDays(1, 'day_rows')}`;

/** The workspace's day rollups made again in the zone `zone` (a known IANA name): rebuildWorkspaceDaysSql's rows. */
export async function rebuildWorkspaceDays(tx: Queryable, workspaceId: string, zone: string): Promise<void> {
  for (const table of DAY_TABLES) await tx(table).where({ workspace_id: workspaceId }).delete();
  await tx.raw(rebuildWorkspaceDaysSql('?', `'${zone.replaceAll("'", "''")}'`), [workspaceId]);
  await tx.raw(RAISE_REVISION_SQL, [workspaceId]);
}

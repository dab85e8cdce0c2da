/**
 * usage_rollups, the sums getUsageSummary reads: per UTC hour, access, inference key, model, connection and plan,
 * the units, tokens, cost and events of the usage events, and the calls (invocations) counted by status.
 *
 * Every statement that writes invocations and their usage events adds what it wrote, in the same statement: the
 * gateway's record (src/gateway/call-repo.ts) and the sweeper's reclaim (src/domain/quota/settlement-sql.ts); a
 * spooled call and a refusal are written by the record. One upsert per rollup key per statement, the rows in key
 * order, so two statements adding to the same hours lock them in the same order and wait rather than deadlock.
 *
 * A call counts in the hour of its USAGE event (when it completed), under its event's model; a call charged nothing
 * under the model the provider said answered, else the one requested. `failed_calls`: FAILED or UPSTREAM_ERROR;
 * `refused_calls`: REJECTED.
 */

const EPOCH = `timestamptz '2000-01-01T00:00:00Z'`;

const KEY = 'workspace_id, hour, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id';

/** The rollup's sums, kept per key. */
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
];

/** The columns of an invocation the rollup reads (a `returning` list). */
export const ROLLED_CALL_COLUMNS =
  'id, workspace_id, workspace_access_id, provider_connection_id, inference_key_id, plan_id, status, requested_model, attempt_upstream_model, started_at, completed_at';

/** The columns of a usage event the rollup reads (a `returning` list). */
export const ROLLED_EVENT_COLUMNS =
  'id, workspace_id, workspace_access_id, invocation_id, kind, created_at, model, units, input_tokens, cached_input_tokens, output_tokens, cost_micros, price_id';

/**
 * The rollup's rows of the invocations `calls` and the usage events `events` (relations with the columns above), one
 * per call and per event, before they are summed.
 */
const contributions = (calls: string, events: string) => `
  select e.workspace_id, date_bin('1 hour', e.created_at, ${EPOCH}) as hour, e.workspace_access_id,
         coalesce(e.model, '') as model, coalesce(c.provider_connection_id::text, '') as provider_connection_id,
         coalesce(c.inference_key_id::text, '') as inference_key_id, coalesce(c.plan_id::text, '') as plan_id,
         e.units, e.input_tokens, e.cached_input_tokens, e.output_tokens, 1 as events, coalesce(e.cost_micros, 0) as cost_micros,
         case when e.kind = 'USAGE' and e.price_id is null then 1 else 0 end as unpriced_events,
         0 as calls, 0 as failed_calls, 0 as refused_calls
    from ${events} e left join ${calls} c on c.id = e.invocation_id
  union all
  select c.workspace_id, date_bin('1 hour', coalesce(e.created_at, c.completed_at, c.started_at), ${EPOCH}), c.workspace_access_id,
         case when e.id is null then coalesce(nullif(c.attempt_upstream_model, ''), c.requested_model) else coalesce(e.model, '') end,
         c.provider_connection_id::text, c.inference_key_id::text, coalesce(c.plan_id::text, ''),
         0, 0, 0, 0, 0, 0, 0, 1,
         case when c.status in ('FAILED', 'UPSTREAM_ERROR') then 1 else 0 end,
         case when c.status = 'REJECTED' then 1 else 0 end
    from ${calls} c left join ${events} e on e.invocation_id = c.id and e.kind = 'USAGE'`;

const summed = (calls: string, events: string) => `
  select ${KEY}, ${ROLLUP_SUMS.map((s) => `sum(${s})`).join(', ')}
    from (${contributions(calls, events)}) x
   group by ${KEY}`;

/**
 * Adds the invocations `calls` and the usage events `events` (relations with the columns ROLLED_CALL_COLUMNS and
 * ROLLED_EVENT_COLUMNS) to usage_rollups.
 */
export const rollUpInsert = (calls: string, events: string) => `
  insert into usage_rollups as r (${KEY}, ${ROLLUP_SUMS.join(', ')})
  ${summed(calls, events)}
   order by ${KEY}
  on conflict (${KEY}) do update
     set ${ROLLUP_SUMS.map((s) => `${s} = r.${s} + excluded.${s}`).join(', ')}`;

/** The same as a CTE (`rolled`) of the statement that writes the CTEs `calls` and `events`. */
export const rollUpCte = (calls: string, events: string) => `rolled as (${rollUpInsert(calls, events)}
)`;

/**
 * The rollup rows of one workspace (its id at placeholder `workspace`) computed afresh from its invocations and usage
 * events, once its rows are deleted: for rows written by hand (a benchmark's seed, a test's events at chosen times).
 */
export const rebuildWorkspaceRollupsSql = (workspace: string) => `
insert into usage_rollups (${KEY}, ${ROLLUP_SUMS.join(', ')})
${summed(`(select * from invocations where workspace_id = ${workspace})`, `(select * from usage_events where workspace_id = ${workspace})`)}`;

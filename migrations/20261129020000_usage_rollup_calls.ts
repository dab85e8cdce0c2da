import type { Knex } from 'knex';

/**
 * The usage summary counts calls, and sums by inference key and by plan.
 *
 * - `invocations.plan_id`: the plan of the call's access when the call was made (the one its key's lookup read).
 * - `usage_rollups` gains the call's key and plan in its key, and `calls`, `failed_calls` (FAILED or UPSTREAM_ERROR)
 *   and `refused_calls` (REJECTED), counted from invocations: a refused call has no usage event.
 * - The rollup is no longer kept by a trigger on usage_events: the statements that write invocations and their
 *   events (the gateway's record, the sweeper's reclaim) add to it themselves, one upsert per rollup key per
 *   statement (src/domain/invocations/rollup-sql.ts). Measured cheaper in PostgreSQL CPU per call than the trigger
 *   (docs/performance.md).
 *
 * - `usage_events` and `lease_calls` gain `cache_write_tokens` (of the input, written to the provider's prompt cache)
 *   and `reasoning_tokens` (of the output), where the protocol's usage reports them (null: it did not); a price's
 *   cache-write and reasoning prices charge them (src/domain/prices/price-sql.ts).
 *
 * The rollup is rebuilt from the rows: what the trigger kept, and the calls it did not count. Invocations written
 * before this migration have no plan: their access's current plan is taken.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table invocations add column plan_id uuid');
  for (const table of ['usage_events', 'lease_calls']) {
    await knex.raw(`alter table ${table} add column cache_write_tokens bigint, add column reasoning_tokens bigint`);
  }
  await knex.raw('update invocations i set plan_id = a.plan_id from workspace_accesses a where a.id = i.workspace_access_id');
  await knex.raw('drop trigger usage_events_roll_up on usage_events');
  await knex.raw('drop function nexus_roll_up_usage()');
  await knex.raw('drop table usage_rollups');
  await knex.raw(`
    create table usage_rollups (
      workspace_id uuid not null,
      hour timestamptz not null,
      workspace_access_id uuid not null,
      model text not null,
      provider_connection_id text not null,
      inference_key_id text not null,
      plan_id text not null,
      units bigint not null,
      input_tokens bigint not null,
      cached_input_tokens bigint not null,
      output_tokens bigint not null,
      events bigint not null,
      cost_micros bigint not null,
      unpriced_events bigint not null,
      calls bigint not null,
      failed_calls bigint not null,
      refused_calls bigint not null,
      primary key (workspace_id, hour, workspace_access_id, model, provider_connection_id, inference_key_id, plan_id)
    )`);
  await knex.raw(`
    insert into usage_rollups
    select workspace_id, hour, workspace_access_id, model, provider_connection_id, inference_key_id, plan_id,
           sum(units), sum(input_tokens), sum(cached_input_tokens), sum(output_tokens), sum(events), sum(cost_micros),
           sum(unpriced_events), sum(calls), sum(failed_calls), sum(refused_calls)
      from (
        select e.workspace_id, date_bin('1 hour', e.created_at, timestamptz '2000-01-01T00:00:00Z') as hour, e.workspace_access_id,
               coalesce(e.model, '') as model, coalesce(c.provider_connection_id::text, '') as provider_connection_id,
               coalesce(c.inference_key_id::text, '') as inference_key_id, coalesce(c.plan_id::text, '') as plan_id,
               e.units, e.input_tokens, e.cached_input_tokens, e.output_tokens, 1 as events, coalesce(e.cost_micros, 0) as cost_micros,
               case when e.kind = 'USAGE' and e.price_id is null then 1 else 0 end as unpriced_events,
               0 as calls, 0 as failed_calls, 0 as refused_calls
          from usage_events e left join invocations c on c.id = e.invocation_id
        union all
        select c.workspace_id, date_bin('1 hour', coalesce(e.created_at, c.completed_at, c.started_at), timestamptz '2000-01-01T00:00:00Z'),
               c.workspace_access_id,
               case when e.id is null then coalesce(nullif(c.attempt_upstream_model, ''), c.requested_model) else coalesce(e.model, '') end,
               c.provider_connection_id::text, c.inference_key_id::text, coalesce(c.plan_id::text, ''),
               0, 0, 0, 0, 0, 0, 0, 1,
               case when c.status in ('FAILED', 'UPSTREAM_ERROR') then 1 else 0 end,
               case when c.status = 'REJECTED' then 1 else 0 end
          from invocations c left join usage_events e on e.invocation_id = c.id and e.kind = 'USAGE'
      ) x
     group by 1, 2, 3, 4, 5, 6, 7`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop table usage_rollups');
  await knex.raw(`
    create table usage_rollups (
      workspace_id uuid not null,
      hour timestamptz not null,
      workspace_access_id uuid not null,
      model text not null,
      provider_connection_id text not null,
      units bigint not null,
      input_tokens bigint not null,
      cached_input_tokens bigint not null,
      output_tokens bigint not null,
      events bigint not null,
      cost_micros bigint not null default 0,
      unpriced_events bigint not null default 0,
      primary key (workspace_id, hour, workspace_access_id, model, provider_connection_id)
    )`);
  await knex.raw(`
    create function nexus_roll_up_usage() returns trigger language plpgsql as $$
    begin
      insert into usage_rollups as r
      select n.workspace_id, date_bin('1 hour', n.created_at, timestamptz '2000-01-01T00:00:00Z'), n.workspace_access_id, coalesce(n.model, ''),
             coalesce(i.provider_connection_id::text, ''), sum(n.units), sum(n.input_tokens), sum(n.cached_input_tokens),
             sum(n.output_tokens), count(*), coalesce(sum(n.cost_micros), 0),
             count(*) filter (where n.kind = 'USAGE' and n.price_id is null)
        from new_events n left join invocations i on i.id = n.invocation_id
       group by 1, 2, 3, 4, 5
       order by 1, 2, 3, 4, 5
      on conflict (workspace_id, hour, workspace_access_id, model, provider_connection_id) do update
         set units = r.units + excluded.units, input_tokens = r.input_tokens + excluded.input_tokens,
             cached_input_tokens = r.cached_input_tokens + excluded.cached_input_tokens,
             output_tokens = r.output_tokens + excluded.output_tokens, events = r.events + excluded.events,
             cost_micros = r.cost_micros + excluded.cost_micros, unpriced_events = r.unpriced_events + excluded.unpriced_events;
      return null;
    end $$`);
  await knex.raw(`
    create trigger usage_events_roll_up after insert on usage_events
      referencing new table as new_events for each statement execute function nexus_roll_up_usage()`);
  await knex.raw(`
    insert into usage_rollups
    select n.workspace_id, date_bin('1 hour', n.created_at, timestamptz '2000-01-01T00:00:00Z'), n.workspace_access_id, coalesce(n.model, ''),
           coalesce(i.provider_connection_id::text, ''), sum(n.units), sum(n.input_tokens), sum(n.cached_input_tokens),
           sum(n.output_tokens), count(*), coalesce(sum(n.cost_micros), 0), count(*) filter (where n.kind = 'USAGE' and n.price_id is null)
      from usage_events n left join invocations i on i.id = n.invocation_id
     group by 1, 2, 3, 4, 5`);
  await knex.raw('alter table invocations drop column plan_id');
  for (const table of ['usage_events', 'lease_calls']) {
    await knex.raw(`alter table ${table} drop column cache_write_tokens, drop column reasoning_tokens`);
  }
}

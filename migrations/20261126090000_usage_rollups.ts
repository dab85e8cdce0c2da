import type { Knex } from 'knex';

/**
 * getUsageSummary (the console's charts) sums a workspace's usage over time. Summing the raw
 * events took seconds on a million of them; usage_rollups holds them summed per UTC hour, access,
 * model and connection, and the summary sums those rows instead (tens of rows an hour, whatever
 * the number of calls).
 *
 * A statement-level trigger on usage_events keeps it: every writer of events (the gateway's record
 * statement, the reclaim of a dead process's lease, the spool's replay) adds to it in the same
 * transaction, so the rollup is exact and never behind. The connection is the invocation's, written
 * by the same statement. Rows are upserted in key order, so two transactions adding to the same
 * hours lock them in the same order and wait for each other rather than deadlock. Events are
 * append-only (usage_events_append_only), so the rollup only ever grows.
 */
export async function up(knex: Knex): Promise<void> {
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
      primary key (workspace_id, hour, workspace_access_id, model, provider_connection_id)
    )`);
  await knex.raw(`
    create function nexus_roll_up_usage() returns trigger language plpgsql as $$
    begin
      insert into usage_rollups as r
      select n.workspace_id, date_bin('1 hour', n.created_at, timestamptz '2000-01-01T00:00:00Z'), n.workspace_access_id, coalesce(n.model, ''),
             coalesce(i.provider_connection_id::text, ''), sum(n.units), sum(n.input_tokens), sum(n.cached_input_tokens),
             sum(n.output_tokens), count(*)
        from new_events n left join invocations i on i.id = n.invocation_id
       group by 1, 2, 3, 4, 5
       order by 1, 2, 3, 4, 5
      on conflict (workspace_id, hour, workspace_access_id, model, provider_connection_id) do update
         set units = r.units + excluded.units, input_tokens = r.input_tokens + excluded.input_tokens,
             cached_input_tokens = r.cached_input_tokens + excluded.cached_input_tokens,
             output_tokens = r.output_tokens + excluded.output_tokens, events = r.events + excluded.events;
      return null;
    end $$`);
  await knex.raw(`
    create trigger usage_events_roll_up after insert on usage_events
      referencing new table as new_events for each statement execute function nexus_roll_up_usage()`);
  // The events written before this migration.
  await knex.raw(`
    insert into usage_rollups
    select n.workspace_id, date_bin('1 hour', n.created_at, timestamptz '2000-01-01T00:00:00Z'), n.workspace_access_id, coalesce(n.model, ''),
           coalesce(i.provider_connection_id::text, ''), sum(n.units), sum(n.input_tokens), sum(n.cached_input_tokens),
           sum(n.output_tokens), count(*)
      from usage_events n left join invocations i on i.id = n.invocation_id
     group by 1, 2, 3, 4, 5`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop trigger usage_events_roll_up on usage_events');
  await knex.raw('drop function nexus_roll_up_usage()');
  await knex.raw('drop table usage_rollups');
}

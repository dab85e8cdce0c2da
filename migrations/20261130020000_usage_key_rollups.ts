import type { Knex } from 'knex';

/**
 * usage_key_rollups: usage_rollups' sums per UTC hour, access and inference key only (without model, connection and
 * plan), kept by the same statements that add to usage_rollups (rollup-sql.ts). The summaries by access and by key
 * read it: a month of hours by key sums a third as many rows on a workspace whose keys each call three connections,
 * and none on one whose keys each call one (then its rows are the buckets themselves). Filled here from usage_rollups.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table usage_key_rollups (
      workspace_id uuid not null,
      hour timestamptz not null,
      workspace_access_id uuid not null,
      inference_key_id text not null,
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
      primary key (workspace_id, hour, workspace_access_id, inference_key_id)
    )`);
  await knex.raw(`
    insert into usage_key_rollups
    select workspace_id, hour, workspace_access_id, inference_key_id,
           sum_int8(units), sum_int8(input_tokens), sum_int8(cached_input_tokens), sum_int8(output_tokens), sum_int8(events),
           sum_int8(cost_micros), sum_int8(unpriced_events), sum_int8(calls), sum_int8(failed_calls), sum_int8(refused_calls)
      from usage_rollups
     group by workspace_id, hour, workspace_access_id, inference_key_id`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop table usage_key_rollups');
}

import type { Knex } from 'knex';

/**
 * usage_day_rollups: usage_rollups' sums per day of the workspace's time zone (the zone named in the row: the
 * workspace's when the row was added to), access, inference key, model, connection and plan, kept by the same
 * statements that add to usage_rollups (rollup-sql.ts). A summary by day in the workspace's zone reads its whole days
 * here, a row per day and series rather than 24, and the hours at the range's edges from usage_rollups
 * (usage-summary-repo.ts). A day is the local day its hours' starts fall in, as the summaries by day cut the hours.
 * Filled here from usage_rollups, in each workspace's zone.
 */
const KIND_COUNTS = [
  'audio_input_tokens',
  'audio_output_tokens',
  'image_input_tokens',
  'image_output_tokens',
  'images',
  'audio_ms',
  'characters',
];

const SUMS = [
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

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table usage_day_rollups (
      workspace_id uuid not null,
      day timestamptz not null,
      time_zone text not null,
      workspace_access_id uuid not null,
      inference_key_id text not null,
      model text not null,
      provider_connection_id text not null,
      plan_id text not null,
      ${SUMS.map((s) => `${s} bigint not null${KIND_COUNTS.includes(s) ? ' default 0' : ''}`).join(',\n      ')},
      primary key (workspace_id, day, time_zone, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id)
    )`);
  // A workspace's rows in another zone than its own (left by a change of zone, until rebuilt): the summaries look for
  // them before reading days, and find none in one probe of this index.
  await knex.raw('create index usage_day_rollups_zone on usage_day_rollups (workspace_id, time_zone, day)');
  await knex.raw(`
    insert into usage_day_rollups
    select r.workspace_id, date_trunc('day', r.hour, w.time_zone), w.time_zone, r.workspace_access_id, r.inference_key_id,
           r.model, r.provider_connection_id, r.plan_id, ${SUMS.map((s) => `sum_int8(r.${s})`).join(', ')}
      from usage_rollups r join workspaces w on w.id = r.workspace_id
     group by r.workspace_id, 2, w.time_zone, r.workspace_access_id, r.inference_key_id, r.model, r.provider_connection_id, r.plan_id`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop table usage_day_rollups');
}

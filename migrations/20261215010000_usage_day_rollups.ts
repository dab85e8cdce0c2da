import type { Knex } from 'knex';

/**
 * The day rollups: usage_rollups' sums per day of the workspace's time zone (the zone named in the row: the
 * workspace's when the row was added to), kept by the same statements that add to usage_rollups (rollup-sql.ts):
 * - usage_day_rollups, per day, model, connection and plan: what the summaries by model, connection and plan read;
 * - usage_day_key_rollups, per day, access and key: what the summaries by access and by key read.
 * A summary by day in the workspace's zone reads its whole days there, a row per day and series rather than one per
 * hour, access, key, model, connection and plan, and the hours at the range's edges from the hourly rollups
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

/** A day table's columns: the workspace, the day and its zone, the series' key, the sums. */
const dayTable = (name: string, key: string[]) => `
    create table ${name} (
      workspace_id uuid not null,
      day timestamptz not null,
      time_zone text not null,
      ${key.map((k) => `${k} ${k === 'workspace_access_id' ? 'uuid' : 'text'} not null`).join(',\n      ')},
      ${SUMS.map((s) => `${s} bigint not null`).join(',\n      ')},
      primary key (workspace_id, day, time_zone, ${key.join(', ')})
    )`;

/** The day rows of `key` from usage_rollups, in each workspace's zone. */
const fill = (name: string, key: string[]) => `
    insert into ${name}
    select r.workspace_id, date_trunc('day', r.hour, w.time_zone), w.time_zone, ${key.map((k) => `r.${k}`).join(', ')},
           ${SUMS.map((s) => `sum_int8(r.${s})`).join(', ')}
      from usage_rollups r join workspaces w on w.id = r.workspace_id
     group by r.workspace_id, 2, w.time_zone, ${key.map((k) => `r.${k}`).join(', ')}`;

const SERIES = ['model', 'provider_connection_id', 'plan_id'];
const KEYS = ['workspace_access_id', 'inference_key_id'];

export async function up(knex: Knex): Promise<void> {
  await knex.raw(dayTable('usage_day_rollups', SERIES));
  await knex.raw(dayTable('usage_day_key_rollups', KEYS));
  // A workspace's rows in another zone than its own (left by a change of zone, until rebuilt): the summaries look for
  // them before reading days, and find none in one probe of this index.
  await knex.raw('create index usage_day_rollups_zone on usage_day_rollups (workspace_id, time_zone, day)');
  await knex.raw('create index usage_day_key_rollups_zone on usage_day_key_rollups (workspace_id, time_zone, day)');
  await knex.raw(fill('usage_day_rollups', SERIES));
  await knex.raw(fill('usage_day_key_rollups', KEYS));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop table usage_day_key_rollups');
  await knex.raw('drop table usage_day_rollups');
}

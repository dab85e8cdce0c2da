import type { Knex } from 'knex';

/**
 * The largest usage summaries (every hour of a month, by access or by key) read the rollup in its primary key's
 * order and sum each series as its rows come, instead of hashing every bucket.
 *
 * - The primary key puts the inference key right after the access: a key belongs to one access, so the rows of one
 *   hour, access and key are adjacent, and hours by key are summed along the index as hours by access are. The
 *   statements that add to the rollup name the same columns, in the same order (rollup-sql.ts).
 * - `sum_int8(bigint)`: a sum that stays a bigint. The built-in sum of a bigint returns a numeric, whose conversion
 *   to text and to an integer took about a quarter of a month-by-hour summary's query; the sums of one range are far
 *   below the bigint's limit (an overflow is an error, never a wrong sum).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table usage_rollups drop constraint usage_rollups_pkey');
  await knex.raw(
    'alter table usage_rollups add primary key (workspace_id, hour, workspace_access_id, inference_key_id, model, provider_connection_id, plan_id)',
  );
  await knex.raw('create aggregate sum_int8(bigint) (sfunc = int8pl, stype = bigint, combinefunc = int8pl, parallel = safe)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop aggregate sum_int8(bigint)');
  await knex.raw('alter table usage_rollups drop constraint usage_rollups_pkey');
  await knex.raw(
    'alter table usage_rollups add primary key (workspace_id, hour, workspace_access_id, model, provider_connection_id, inference_key_id, plan_id)',
  );
}

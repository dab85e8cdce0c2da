import type { Knex } from 'knex';

/**
 * Rate limits per plan (docs/rate-limits.md): three optional limits on the plan, and
 * the state the gateway processes share.
 *
 * - rate_windows: one row per access: the current per-minute window (`window_start`),
 *   the requests and tokens granted in it to processes (as allowances: what a process
 *   holds and has not given back), and the concurrency slots processes hold now. A
 *   grant never takes a figure past its limit, so no number of processes admits more.
 * - rate_allowances: the concurrency slots each process holds per access, renewed by
 *   its heartbeat (expires_at); the sweeper frees a dead process's slots after it expires.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('plans', (t) => {
    t.integer('requests_per_minute');
    t.integer('tokens_per_minute');
    t.integer('concurrent_calls');
  });
  await knex.raw(`alter table plans add constraint plans_rate_limits_check check (
    (requests_per_minute is null or requests_per_minute > 0) and
    (tokens_per_minute is null or tokens_per_minute > 0) and
    (concurrent_calls is null or concurrent_calls > 0))`);
  await knex.schema.createTable('rate_windows', (t) => {
    t.uuid('workspace_access_id').primary();
    t.uuid('workspace_id').notNullable();
    t.timestamp('window_start', { useTz: true }).notNullable();
    t.bigInteger('requests').notNullable().defaultTo(0);
    t.bigInteger('tokens').notNullable().defaultTo(0);
    t.integer('concurrent').notNullable().defaultTo(0);
  });
  await knex.raw(
    'alter table rate_windows add constraint rate_windows_nonnegative check (requests >= 0 and tokens >= 0 and concurrent >= 0)',
  );
  await knex.schema.createTable('rate_allowances', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable();
    t.uuid('workspace_access_id').notNullable();
    t.integer('concurrent').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable().index();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('rate_allowances');
  await knex.schema.dropTable('rate_windows');
  await knex.raw('alter table plans drop constraint plans_rate_limits_check');
  await knex.schema.alterTable('plans', (t) => {
    t.dropColumn('requests_per_minute');
    t.dropColumn('tokens_per_minute');
    t.dropColumn('concurrent_calls');
  });
}

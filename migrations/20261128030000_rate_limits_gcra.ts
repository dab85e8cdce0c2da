import type { Knex } from 'knex';

/**
 * Rate limits by GCRA instead of fixed UTC-minute windows (docs/rate-limits.md). An access's
 * rate_windows row keeps, per windowed dimension, its theoretical arrival time (TAT): the
 * moment, in milliseconds since the epoch, at which everything granted so far would have
 * drained at the limit's pace. What the dimension has in use at `now` is
 * max(0, tat - now) / (60000 / limit); a grant never takes it past the limit. With each TAT,
 * the limit it was scheduled at: when a plan's limit changes, the units in use are kept and
 * rescheduled at the new pace. The per-window counters it replaces are dropped (a window's
 * counts mean nothing to the new schedule).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table rate_windows drop constraint rate_windows_nonnegative');
  await knex.schema.alterTable('rate_windows', (t) => {
    t.dropColumn('window_start');
    t.dropColumn('requests');
    t.dropColumn('tokens');
  });
  await knex.schema.alterTable('rate_windows', (t) => {
    t.double('requests_tat').notNullable().defaultTo(0);
    t.integer('requests_limit');
    t.double('tokens_tat').notNullable().defaultTo(0);
    t.integer('tokens_limit');
  });
  await knex.raw('alter table rate_windows add constraint rate_windows_nonnegative check (concurrent >= 0)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table rate_windows drop constraint rate_windows_nonnegative');
  await knex.schema.alterTable('rate_windows', (t) => {
    t.dropColumn('requests_tat');
    t.dropColumn('requests_limit');
    t.dropColumn('tokens_tat');
    t.dropColumn('tokens_limit');
  });
  await knex.schema.alterTable('rate_windows', (t) => {
    t.timestamp('window_start', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.bigInteger('requests').notNullable().defaultTo(0);
    t.bigInteger('tokens').notNullable().defaultTo(0);
  });
  await knex.raw(
    'alter table rate_windows add constraint rate_windows_nonnegative check (requests >= 0 and tokens >= 0 and concurrent >= 0)',
  );
}

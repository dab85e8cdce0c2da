import type { Knex } from 'knex';

/**
 * Every gateway call inserts a usage event, and each index of usage_events is
 * one more B-tree insert per call. The plain index on reservation_id serves no
 * read (events are read by workspace or by invocation), and the unique index
 * one-USAGE-per-reservation already covers a reservation's settlement lookups.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('usage_events', (t) => {
    t.dropIndex(['reservation_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('usage_events', (t) => {
    t.index(['reservation_id']);
  });
}

import type { Knex } from 'knex';

/**
 * Quota leases (src/gateway/quota-leases.ts): a gateway process holds a slice
 * of a period as one HELD reservation of kind LEASE and admits calls against it
 * in memory. Each call still gets its own reservation row (kind CALL, with the
 * lease it was carved from), written already closed by the statement that
 * settles it, so usage events keep one reservation per call. lease_id has no
 * foreign key, like the invocations' keys: every gateway call inserts such a
 * row, and a key-share lock on its (hot) lease row is contention the hot path
 * does not need; the statement that inserts it updates that lease row.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('quota_reservations', (t) => {
    t.text('kind').notNullable().defaultTo('CALL');
    t.uuid('lease_id');
  });
  await knex.raw(`alter table quota_reservations add constraint quota_reservations_kind_check check (kind in ('CALL','LEASE'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('quota_reservations', (t) => {
    t.dropColumn('lease_id');
    t.dropColumn('kind');
  });
}

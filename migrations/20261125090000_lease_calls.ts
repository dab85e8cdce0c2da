import type { Knex } from 'knex';

/**
 * The calls in flight on a quota lease, as its process's last heartbeat saw them
 * (src/gateway/metered-call.ts): what each would be charged, and its invocation as
 * it would be recorded, were its process to die now. Whoever reclaims the lease
 * of a dead process records and charges them (settlement-sql.ts, RECLAIM_EXPIRED_SQL);
 * a call's own record deletes its row. Ids are the call's (UUID v7, made by the
 * gateway), so a row written twice is one row, and a call recorded by both its
 * process and a reclaim is charged once.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('lease_calls', (t) => {
    t.uuid('invocation_id').primary();
    t.uuid('lease_id').notNullable().index();
    t.bigInteger('bound').notNullable();
    t.bigInteger('units').notNullable();
    t.bigInteger('input_tokens').notNullable();
    t.bigInteger('cached_tokens').notNullable();
    t.bigInteger('output_tokens').notNullable();
    t.text('model');
    t.uuid('usage_id').notNullable();
    t.uuid('adjustment_id').notNullable();
    t.json('invocation').notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
  });
  await knex.raw('alter table lease_calls add constraint lease_calls_units_check check (units >= 0 and bound >= 0)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('lease_calls');
}

import type { Knex } from 'knex';

/**
 * Webhook deliveries refused for their signature were one row each, written by an
 * unauthenticated request and never deleted: anyone who knew a receiver's URL could
 * grow the database without bound. They are now counted per connection, reason and
 * UTC day (the receiver counts in memory, the periodic pass adds the counts here).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('billing_webhook_rejection_counts', (t) => {
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.text('reason').notNullable();
    t.date('day').notNullable();
    t.bigInteger('count').notNullable();
    t.integer('last_body_bytes').notNullable();
    t.timestamp('last_received_at', { useTz: true }).notNullable();
    t.primary(['billing_connection_id', 'reason', 'day']);
  });
  await knex.raw(`
    insert into billing_webhook_rejection_counts
      (billing_connection_id, workspace_id, reason, day, count, last_body_bytes, last_received_at)
    select billing_connection_id, workspace_id, reason, (received_at at time zone 'UTC')::date, count(*),
           (array_agg(body_bytes order by received_at desc))[1], max(received_at)
      from billing_webhook_rejections
     group by billing_connection_id, workspace_id, reason, (received_at at time zone 'UTC')::date`);
  await knex.schema.dropTable('billing_webhook_rejections');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.createTable('billing_webhook_rejections', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.text('reason').notNullable();
    t.integer('body_bytes').notNullable();
    t.timestamp('received_at', { useTz: true }).notNullable();
  });
  await knex.schema.dropTable('billing_webhook_rejection_counts');
}

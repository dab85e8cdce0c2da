import type { Knex } from 'knex';

/**
 * A connection's health (getProviderConnectionHealth):
 * - the last verification's outcome and time, passed or failed (lastVerifiedAt keeps the last that passed), so a
 *   failed Verify shows;
 * - its attempts read by connection and start: the answering attempt is the invocation's own columns, found by
 *   (provider_connection_id, started_at) within the window, which bounds the scan to its hours (and, on a table
 *   partitioned by time, to their partitions). A route's earlier attempts are read by route (invocations_route_started).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('provider_connections', (t) => {
    t.text('last_verify_outcome');
    t.timestamp('last_verify_at', { useTz: true });
  });
  await knex.raw('create index invocations_connection_started on invocations (provider_connection_id, started_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists invocations_connection_started');
  await knex.schema.alterTable('provider_connections', (t) => {
    t.dropColumn('last_verify_outcome');
    t.dropColumn('last_verify_at');
  });
}

import type { Knex } from 'knex';

/**
 * Webhook messages say which of them a delivery worker is sending (docs/events.md "Delivery"):
 *
 * - claimed_until: set by the claim (with next_attempt_at, to the same time), cleared when the attempt is recorded or
 *   the claim given back. A success to an endpoint makes its other pending messages due at once, but never one that
 *   another worker is sending.
 * - webhook_messages_due: the claim takes due messages by due time, then in the order they were created (those made
 *   due together by a success go oldest first).
 * - webhook_messages_pending: an endpoint's pending messages by due time, for that success to find its others
 *   without reading the endpoint's delivered ones.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_messages', (t) => t.timestamp('claimed_until', { useTz: true }));
  await knex.raw('drop index webhook_messages_due');
  await knex.raw(`create index webhook_messages_due on webhook_messages (next_attempt_at, created_at, event_id) where status = 'PENDING'`);
  await knex.raw(`create index webhook_messages_pending on webhook_messages (endpoint_id, next_attempt_at) where status = 'PENDING'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index webhook_messages_pending');
  await knex.raw('drop index webhook_messages_due');
  await knex.raw(`create index webhook_messages_due on webhook_messages (next_attempt_at) where status = 'PENDING'`);
  await knex.schema.alterTable('webhook_messages', (t) => t.dropColumn('claimed_until'));
}

import type { Knex } from 'knex';

const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true });

/**
 * Outbound events (docs/events.md).
 *
 * - webhook_endpoints: a workspace's receivers: URL, the event types wanted (null: all), the signing secret
 *   sealed at rest, and the previous one while a rotation's overlap lasts; failing_since marks the first
 *   failure of an unbroken run (an endpoint failing past the window is DISABLED).
 * - events: the outbox, written in the transaction of the change that caused each event; its id is the
 *   `webhook-id` of every delivery of it.
 * - webhook_messages: one per event and endpoint subscribed when the event was written (same transaction);
 *   the delivery workers of every process claim due ones (SKIP LOCKED) by moving next_attempt_at ahead.
 * - webhook_attempts: each delivery attempt, kept for the deliveries list.
 * - quota_threshold_marks: a threshold crossed in a quota period, once (its event too).
 * - plans/quota_strategies.event_thresholds: the percentages of the granted units that raise
 *   quota.threshold_crossed (null: the plan's, else 80 and 100).
 * - inference_keys.expiring_notified_at, provider_connections.event_health: what was already told.
 */
export async function up(knex: Knex): Promise<void> {
  // A time-ordered UUID (v7) made in SQL, for events that statements raise (the gateway's settlement).
  await knex.raw(`
    create or replace function nexus_uuid_v7() returns uuid language sql volatile as $$
      select encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
               placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3)
               from 1 for 6), 52, 1), 53, 1), 'hex')::uuid
    $$`);

  await knex.schema.createTable('webhook_endpoints', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.text('url').notNullable();
    t.text('description').notNullable().defaultTo('');
    t.jsonb('event_types');
    t.text('status').notNullable();
    t.text('disabled_reason');
    t.text('secret_ciphertext').notNullable();
    t.text('secret_key_id').notNullable();
    t.text('previous_secret_ciphertext');
    t.text('previous_secret_key_id');
    ts(t, 'previous_secret_expires_at');
    ts(t, 'failing_since');
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    ts(t, 'deleted_at');
    t.index(['workspace_id', 'id']);
  });
  await knex.raw(`alter table webhook_endpoints add constraint webhook_endpoints_status_check
    check (status in ('ACTIVE','DISABLED'))`);

  await knex.schema.createTable('events', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable();
    t.text('type').notNullable();
    t.jsonb('data').notNullable();
    ts(t, 'created_at').notNullable();
    t.index(['workspace_id', 'id']);
  });

  await knex.schema.createTable('webhook_messages', (t) => {
    t.uuid('event_id').notNullable().references('events.id');
    t.uuid('endpoint_id').notNullable().references('webhook_endpoints.id');
    t.uuid('workspace_id').notNullable();
    t.text('status').notNullable().defaultTo('PENDING');
    t.integer('attempt_count').notNullable().defaultTo(0);
    ts(t, 'next_attempt_at');
    ts(t, 'last_attempt_at');
    ts(t, 'created_at').notNullable();
    t.primary(['event_id', 'endpoint_id']);
    t.index(['endpoint_id', 'event_id']);
  });
  await knex.raw(`alter table webhook_messages add constraint webhook_messages_status_check
    check (status in ('PENDING','DELIVERED','FAILED'))`);
  await knex.raw(`create index webhook_messages_due on webhook_messages (next_attempt_at) where status = 'PENDING'`);

  await knex.schema.createTable('webhook_attempts', (t) => {
    t.uuid('id').primary();
    t.uuid('event_id').notNullable();
    t.uuid('endpoint_id').notNullable();
    t.uuid('workspace_id').notNullable();
    t.text('outcome').notNullable();
    t.integer('response_status');
    t.text('response_body');
    t.integer('latency_ms').notNullable();
    t.text('error');
    ts(t, 'created_at').notNullable();
    t.index(['endpoint_id', 'event_id']);
  });

  await knex.schema.createTable('quota_threshold_marks', (t) => {
    t.uuid('quota_period_id').notNullable();
    t.integer('percent').notNullable();
    t.uuid('event_id').notNullable();
    ts(t, 'created_at').notNullable();
    t.primary(['quota_period_id', 'percent']);
  });

  await knex.schema.alterTable('plans', (t) => t.jsonb('event_thresholds'));
  await knex.schema.alterTable('quota_strategies', (t) => t.jsonb('event_thresholds'));
  await knex.schema.alterTable('inference_keys', (t) => ts(t, 'expiring_notified_at'));
  await knex.schema.alterTable('provider_connections', (t) => t.text('event_health'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('provider_connections', (t) => t.dropColumn('event_health'));
  await knex.schema.alterTable('inference_keys', (t) => t.dropColumn('expiring_notified_at'));
  await knex.schema.alterTable('quota_strategies', (t) => t.dropColumn('event_thresholds'));
  await knex.schema.alterTable('plans', (t) => t.dropColumn('event_thresholds'));
  await knex.schema.dropTable('quota_threshold_marks');
  await knex.schema.dropTable('webhook_attempts');
  await knex.schema.dropTable('webhook_messages');
  await knex.schema.dropTable('events');
  await knex.schema.dropTable('webhook_endpoints');
  await knex.raw('drop function if exists nexus_uuid_v7()');
}

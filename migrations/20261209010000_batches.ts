import type { Knex } from 'knex';

/**
 * Batches (docs/batches.md): what Nexus keeps of a batch's input file, of the batch, and of each request it settled.
 *
 * - `batch_files`: an input file Nexus read on its way to the provider (purpose `batch`): the provider's file id, the
 *   workspace and access that uploaded it, its count of requests, its total bound in units and the models it names
 *   with the plan's pricing of each (a JSON object by model). A batch may be made only of such a file.
 * - `batches`: a batch admitted on one quota lease (`lease_id`, on the period `quota_period_id`) at its file's bound,
 *   its provider's id, where its paths go upstream (`path_prefix`, `search`), its state (`OPEN` until settled, then
 *   `SETTLED`), the provider's last status, and when it is polled next (`next_poll_at`, also a claim's expiry: a
 *   process that claims it pushes it past the claim, so a process that dies leaves it to the next claim). Its
 *   invocation (`invocation_id`) is recorded once it is settled; its requests' usage events name it.
 * - `batch_requests`: each request settled, once per (batch, custom_id): the statement that charges a request inserts
 *   its row, so a settlement read again charges none twice. Its `id` is the request's own, which its usage event
 *   names as its invocation (one USAGE event per invocation); the event's lease is the batch's.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('batch_files', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable();
    t.uuid('workspace_access_id').notNullable();
    t.uuid('provider_connection_id').notNullable();
    t.text('upstream_file_id').notNullable();
    t.integer('requests').notNullable();
    t.bigInteger('bound_units').notNullable();
    t.bigInteger('bound_tokens').notNullable();
    t.jsonb('pricing').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.unique(['provider_connection_id', 'upstream_file_id']);
  });
  await knex.schema.createTable('batches', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable();
    t.uuid('workspace_access_id').notNullable();
    t.uuid('provider_connection_id').notNullable();
    t.uuid('inference_key_id').notNullable();
    t.uuid('plan_id');
    t.uuid('batch_file_id').notNullable().references('batch_files.id');
    t.text('upstream_batch_id').notNullable();
    t.text('path_prefix').notNullable();
    t.text('search').notNullable().defaultTo('');
    t.text('request_id').notNullable();
    t.text('endpoint').notNullable();
    t.text('model').notNullable().defaultTo('');
    t.uuid('invocation_id').notNullable();
    t.uuid('lease_id').notNullable();
    t.uuid('quota_period_id').notNullable();
    t.text('status').notNullable();
    t.text('upstream_status').notNullable();
    t.integer('requests').notNullable();
    t.bigInteger('bound_units').notNullable();
    t.integer('settled_requests').notNullable().defaultTo(0);
    t.bigInteger('settled_units').notNullable().defaultTo(0);
    t.bigInteger('cost_micros').notNullable().defaultTo(0);
    t.text('output_file_id');
    t.text('error_file_id');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('next_poll_at', { useTz: true }).notNullable();
    t.timestamp('settled_at', { useTz: true });
    t.unique(['provider_connection_id', 'upstream_batch_id']);
    t.index(['workspace_access_id', 'id']);
  });
  await knex.raw(`alter table batches add constraint batches_status_check check (status in ('OPEN','SETTLED'))`);
  await knex.raw(`create index batches_due on batches (next_poll_at) where status = 'OPEN'`);
  await knex.schema.createTable('batch_requests', (t) => {
    t.uuid('batch_id').notNullable();
    t.text('custom_id').notNullable();
    // The request's own id: its usage event's invocation_id (an invocation holds one USAGE event; the batch's has none).
    t.uuid('id').notNullable();
    t.uuid('usage_event_id').notNullable();
    t.bigInteger('units').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.primary(['batch_id', 'custom_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('batch_requests');
  await knex.schema.dropTable('batches');
  await knex.schema.dropTable('batch_files');
}

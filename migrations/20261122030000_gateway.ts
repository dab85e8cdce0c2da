import type { Knex } from 'knex';

/**
 * Gateway records: one invocation per gateway call that resolved an access and
 * a connection, and its provider attempt. Both are written once, when the call
 * ends, in the statement that settles the call's reservation (src/gateway/settlement.ts).
 * workspace_id is the distribution key here, deliberately without a foreign key:
 * every gateway call inserts these rows, and a key-share lock per row on the
 * tenant's one workspaces row is contention the hot path does not need.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('invocations', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable();
    t.uuid('workspace_access_id').notNullable();
    t.uuid('provider_connection_id').notNullable();
    t.uuid('inference_key_id').notNullable();
    t.text('request_id').notNullable();
    t.text('trace_id');
    t.text('method').notNullable();
    t.text('endpoint').notNullable();
    t.text('requested_model').notNullable().defaultTo('');
    t.text('status').notNullable();
    t.text('metering_status').notNullable();
    t.boolean('streamed').notNullable().defaultTo(false);
    t.uuid('reservation_id');
    t.bigInteger('quota_units').notNullable().defaultTo(0);
    t.text('error_code');
    t.timestamp('started_at', { useTz: true }).notNullable();
    t.timestamp('first_token_at', { useTz: true });
    t.timestamp('completed_at', { useTz: true });
    t.double('total_latency_ms');
    t.double('provider_latency_ms');
    t.double('nexus_latency_ms');
    t.double('total_ttft_ms');
    t.double('provider_ttft_ms');
    t.double('nexus_ttft_ms');
    t.index(['workspace_id', 'id']);
    t.index(['workspace_access_id', 'id']);
  });
  await knex.raw(`alter table invocations
    add constraint invocations_status_check check (status in ('SUCCEEDED','UPSTREAM_ERROR','FAILED','CLIENT_ABORTED','REJECTED')),
    add constraint invocations_metering_check check (metering_status in ('metered','unmetered')),
    add constraint invocations_units_check check (quota_units >= 0)`);

  await knex.schema.createTable('invocation_attempts', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable();
    t.uuid('invocation_id').notNullable().references('invocations.id');
    t.integer('sequence').notNullable();
    t.uuid('provider_connection_id').notNullable();
    t.text('upstream_model').notNullable().defaultTo('');
    t.text('status').notNullable();
    t.integer('http_status');
    t.text('error_code');
    t.timestamp('started_at', { useTz: true }).notNullable();
    t.timestamp('first_token_at', { useTz: true });
    t.timestamp('completed_at', { useTz: true });
    t.double('duration_ms');
    t.unique(['invocation_id', 'sequence']);
  });
  await knex.raw(`alter table invocation_attempts
    add constraint invocation_attempts_status_check check (status in ('SUCCEEDED','UPSTREAM_ERROR','FAILED','ABORTED'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('invocation_attempts');
  await knex.schema.dropTable('invocations');
}

import type { Knex } from 'knex';

/**
 * Provider connections: an upstream base URL, a protocol profile and the
 * upstream API key, sealed with AES-256-GCM (src/domain/security/secret-box.ts)
 * under associated data 'provider_connection:' + id. The plaintext never
 * reaches this table; the key id beside the ciphertext allows key rotation.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('provider_connections', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.text('name').notNullable();
    t.text('protocol_profile').notNullable();
    t.text('base_url').notNullable();
    t.text('status').notNullable().defaultTo('ACTIVE');
    t.text('api_key_ciphertext').notNullable();
    t.text('api_key_key_id').notNullable();
    t.text('secret_preview').notNullable();
    t.integer('upstream_timeout_ms');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.timestamp('last_verified_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.timestamp('archived_at', { useTz: true });
    t.index(['workspace_id', 'id']);
  });
  await knex.raw(`alter table provider_connections
    add constraint provider_connections_profile_check check (protocol_profile in ('openai','anthropic')),
    add constraint provider_connections_status_check check (status in ('ACTIVE','SUSPENDED','ARCHIVED')),
    add constraint provider_connections_timeout_check check (upstream_timeout_ms is null or upstream_timeout_ms > 0),
    add constraint provider_connections_archived_check check ((status = 'ARCHIVED') = (archived_at is not null))`);

  // The core migration forbids UPDATE and DELETE on audit_logs row by row;
  // TRUNCATE bypasses row triggers, so it is forbidden by a statement trigger.
  await knex.raw(`create trigger audit_logs_no_truncate before truncate on audit_logs
    for each statement execute function nexus_forbid_mutation()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop trigger if exists audit_logs_no_truncate on audit_logs');
  await knex.schema.dropTable('provider_connections');
}

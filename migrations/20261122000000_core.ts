import type { Knex } from 'knex';

/**
 * The spine: workspaces, management keys, the audit trail (append-only, enforced
 * by a trigger) and stored idempotent responses.
 */
export async function up(knex: Knex): Promise<void> {
  // Shared by every append-only table: UPDATE and DELETE fail.
  await knex.raw(`
    create or replace function nexus_forbid_mutation() returns trigger language plpgsql as $$
    begin
      raise exception 'table % is append-only', tg_table_name using errcode = '42501';
    end $$`);

  await knex.schema.createTable('workspaces', (t) => {
    t.uuid('id').primary();
    t.text('name').notNullable();
    t.text('status').notNullable().defaultTo('ACTIVE');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.boolean('allow_unmetered_passthrough').notNullable().defaultTo(false);
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.timestamp('archived_at', { useTz: true });
  });
  await knex.raw(`alter table workspaces add constraint workspaces_status_check check (status in ('ACTIVE','ARCHIVED'))`);

  await knex.schema.createTable('management_keys', (t) => {
    t.uuid('id').primary();
    t.text('name').notNullable();
    t.text('key_hash').notNullable().unique();
    t.text('prefix').notNullable();
    t.boolean('is_root').notNullable().defaultTo(false);
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('revoked_at', { useTz: true });
  });
  await knex.schema.createTable('management_key_workspaces', (t) => {
    t.uuid('management_key_id').notNullable().references('management_keys.id');
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.primary(['management_key_id', 'workspace_id']);
  });

  await knex.schema.createTable('audit_logs', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').references('workspaces.id');
    t.text('actor_key_id').notNullable();
    t.text('action').notNullable();
    t.text('resource_type').notNullable();
    t.text('resource_id').notNullable();
    t.text('request_id');
    t.text('client_address');
    t.jsonb('changes').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['workspace_id', 'id']);
  });
  await knex.raw(`create trigger audit_logs_append_only before update or delete on audit_logs
    for each row execute function nexus_forbid_mutation()`);

  await knex.schema.createTable('idempotency_keys', (t) => {
    t.text('principal_id').notNullable();
    t.text('idempotency_key').notNullable();
    t.text('method').notNullable();
    t.text('path').notNullable();
    t.text('request_hash').notNullable();
    t.integer('response_status');
    t.jsonb('response_body');
    t.jsonb('response_headers');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.primary(['principal_id', 'idempotency_key']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('idempotency_keys');
  await knex.schema.dropTable('audit_logs');
  await knex.schema.dropTable('management_key_workspaces');
  await knex.schema.dropTable('management_keys');
  await knex.schema.dropTable('workspaces');
  await knex.raw('drop function nexus_forbid_mutation()');
}

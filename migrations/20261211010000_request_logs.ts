import type { Knex } from 'knex';

/**
 * Request logs (docs/request-logs.md): a gateway call's request and answer bodies, kept only where a workspace, a
 * plan or a route asks for them (`request_log`, a policy as JSON: its mode, sample rate, cap and retention; null:
 * not set, the next scope's applies). Each log is sealed with the connection secrets' key (AES-256-GCM, its key id
 * beside it, bound to its invocation and workspace) and kept until `expires_at`, when the sweep removes it in
 * bounded batches. The table carries its `created_at` in its key, so that it can be range-partitioned by it.
 */
export async function up(knex: Knex): Promise<void> {
  for (const table of ['workspaces', 'plans', 'routes']) {
    await knex.schema.alterTable(table, (t) => {
      t.jsonb('request_log').nullable();
    });
    await knex.raw(
      `alter table ${table} add constraint ${table}_request_log_object check (request_log is null or jsonb_typeof(request_log) = 'object')`,
    );
  }
  await knex.schema.createTable('request_logs', (t) => {
    t.uuid('invocation_id').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.uuid('workspace_id').notNullable().references('id').inTable('workspaces');
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.text('key_id').notNullable();
    t.text('ciphertext').notNullable();
    t.primary(['invocation_id', 'created_at']);
    t.index(['expires_at'], 'request_logs_expires_at');
    t.index(['workspace_id', 'created_at'], 'request_logs_workspace_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('request_logs');
  for (const table of ['workspaces', 'plans', 'routes']) {
    await knex.schema.alterTable(table, (t) => {
      t.dropColumn('request_log');
    });
  }
}

import type { Knex } from 'knex';

/**
 * Invitations (docs/people.md): a link, sent to a person by email, that makes them a member of a workspace with a
 * role when they sign in with the email it names, before it expires. Found by its token's keyed hash; used once.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('invitations', (t) => {
    t.uuid('id').primary();
    t.text('token_hash').notNullable().unique();
    t.text('email').notNullable();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.text('role').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('accepted_at', { useTz: true });
    t.timestamp('revoked_at', { useTz: true });
    t.index(['workspace_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('invitations');
}

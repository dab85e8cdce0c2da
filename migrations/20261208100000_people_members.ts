import type { Knex } from 'knex';

/**
 * Members (docs/people.md, "Members and roles"): a person, named by the verified email their provider vouches for,
 * is a member of a workspace with one role, or of the installation as an owner (`workspace_id` null, role `owner`).
 * Keyed by email, a membership can be given before the person first signs in. One membership per email and
 * workspace (and one installation membership per email).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('members', (t) => {
    t.uuid('id').primary();
    t.text('email').notNullable();
    t.uuid('workspace_id').references('workspaces.id');
    t.text('role').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['workspace_id']);
  });
  await knex.raw(`
    alter table members add constraint members_role check (
      (workspace_id is null and role = 'owner')
      or (workspace_id is not null and role in ('admin', 'developer', 'billing', 'support', 'viewer')))`);
  await knex.raw(
    `create unique index members_email_workspace on members (email, coalesce(workspace_id, '00000000-0000-0000-0000-000000000000'::uuid))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('members');
}

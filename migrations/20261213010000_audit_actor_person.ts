import type { Knex } from 'knex';

/**
 * The audit names the person (docs/people.md, "The audit"): an entry made in a person's session records the
 * person (`persons.id`), their email as it was then, and the role they acted with; a Management Key's entry records
 * the key's role when it carries one. Entries made before stay as they were (the three null).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_logs', (t) => {
    t.uuid('actor_person_id');
    t.text('actor_email');
    t.text('actor_role');
  });
  // The console's filter by person: a workspace's entries of one email, newest first.
  await knex.raw(
    'create index audit_logs_workspace_actor_email on audit_logs (workspace_id, actor_email, id) where actor_email is not null',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists audit_logs_workspace_actor_email');
  await knex.schema.alterTable('audit_logs', (t) => {
    t.dropColumn('actor_role');
    t.dropColumn('actor_email');
    t.dropColumn('actor_person_id');
  });
}

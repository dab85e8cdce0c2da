import type { Knex } from 'knex';

/**
 * Roles on Management Keys (docs/people.md, "How keys and people coexist"): a key may carry a role, checked against
 * the role table on every operation as a person's is: `owner` on a root key; a workspace role (`admin`,
 * `developer`, `billing`, `support`, `viewer`) on a key scoped to workspaces, the same role in each. A key without
 * one (null: every key made before) may do what its scope allows, as before.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('management_keys', (t) => {
    t.text('role');
  });
  await knex.raw(`
    alter table management_keys add constraint management_keys_role check (
      role is null
      or (is_root and role = 'owner')
      or (not is_root and role in ('admin', 'developer', 'billing', 'support', 'viewer')))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('management_keys', (t) => {
    t.dropChecks(['management_keys_role']);
    t.dropColumn('role');
  });
}

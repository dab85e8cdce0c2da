import type { Knex } from 'knex';

/**
 * Passthrough by endpoint class (docs/decisions.md "Passthrough classes"): a workspace and a plan each let through the
 * classes of unmetered paths they list (`passthrough_classes`, a JSON array of class names, src/protocols/passthrough.ts);
 * a gateway call's class passes when either lists it, or when the workspace's `allow_unmetered_passthrough` (every
 * class, deprecated) is on. Empty, the default, is every row so far: nothing more is let through than before. The
 * names are checked by the domain, not here, so that a class added in a minor version needs no migration.
 */
export async function up(knex: Knex): Promise<void> {
  for (const table of ['workspaces', 'plans']) {
    await knex.schema.alterTable(table, (t) => {
      t.jsonb('passthrough_classes').notNullable().defaultTo(knex.raw(`'[]'::jsonb`));
    });
    await knex.raw(
      `alter table ${table} add constraint ${table}_passthrough_classes_array check (jsonb_typeof(passthrough_classes) = 'array')`,
    );
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['workspaces', 'plans']) {
    await knex.schema.alterTable(table, (t) => {
      t.dropColumn('passthrough_classes');
    });
  }
}

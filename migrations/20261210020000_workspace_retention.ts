import type { Knex } from 'knex';

/**
 * A workspace's retention policy (docs/operations.md, "Retention"): how many days its detail (invocations, usage
 * events, webhook attempts) is kept, 90 by default, and its usage rollups (the summaries' source), 2 years by default.
 * The history job (src/jobs.ts) applies it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('workspaces', (t) => {
    t.integer('detail_retention_days').notNullable().defaultTo(90);
    t.integer('rollup_retention_days').notNullable().defaultTo(730);
  });
  await knex.raw(`alter table workspaces add constraint workspaces_retention_check
    check (detail_retention_days between 1 and 3650 and rollup_retention_days between detail_retention_days and 3650)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table workspaces drop constraint workspaces_retention_check');
  await knex.schema.alterTable('workspaces', (t) => {
    t.dropColumn('detail_retention_days');
    t.dropColumn('rollup_retention_days');
  });
}

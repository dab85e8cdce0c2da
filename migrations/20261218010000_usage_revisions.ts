import type { Knex } from 'knex';

/**
 * A workspace's usage revision: a number the statements that add to its rollups raise when they add to an hour that
 * ended more than an hour before (a call recorded late: a spool replayed, a batch settled, a long stream), when its
 * day rollups are cut again in another zone, and when retention removes its rollup rows. The summaries keep the sums
 * of days that ended more than two hours before, per process, as long as the revision they were read at is the
 * workspace's (src/domain/invocations/usage-days.ts); a workspace without a row is at revision 0.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('usage_revisions', (t) => {
    t.uuid('workspace_id').primary().references('id').inTable('workspaces').onDelete('CASCADE');
    t.bigInteger('revision').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('usage_revisions');
}

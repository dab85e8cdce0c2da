import type { Knex } from 'knex';

/**
 * One-off grants of units (grantAccessUnits) add to a period's granted_units; topped_up_units keeps how much of
 * the grant they are, so a plan change that splits the period moves them to the new part whole instead of
 * prorating them (docs/decisions.md "Changing plan"), and the quota snapshot can say what the plan gave.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('quota_periods', (t) => {
    t.bigInteger('topped_up_units').notNullable().defaultTo(0);
    // The last top-up: a call refused for quota before it no longer says the user is blocked.
    t.timestamp('topped_up_at', { useTz: true });
  });
  await knex.raw('alter table quota_periods add constraint quota_periods_top_up_check check (topped_up_units >= 0)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table quota_periods drop constraint quota_periods_top_up_check');
  await knex.schema.alterTable('quota_periods', (t) => {
    t.dropColumn('topped_up_units');
    t.dropColumn('topped_up_at');
  });
}

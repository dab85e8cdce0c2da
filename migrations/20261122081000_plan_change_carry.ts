import type { Knex } from 'knex';

/**
 * A plan change that splits a period charges the new part for what the old part
 * used beyond its share (docs/decisions.md "Changing plan"). What was used then
 * includes holds that may come back (a quota lease's unused units, a call's bound
 * beyond what it consumed): the old part keeps its share (`share_units`) and how
 * much the following part was charged (`carried_units`), so units its holds return
 * go back to that part (quotaRepo.giveBackCarry). Null / 0 on a period no plan
 * change split.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('quota_periods', (t) => {
    t.bigInteger('share_units');
    t.bigInteger('carried_units').notNullable().defaultTo(0);
  });
  await knex.raw(`alter table quota_periods add constraint quota_periods_carry_check check (
    carried_units >= 0 and (carried_units = 0 or share_units is not null))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table quota_periods drop constraint quota_periods_carry_check');
  await knex.schema.alterTable('quota_periods', (t) => {
    t.dropColumn('carried_units');
    t.dropColumn('share_units');
  });
}

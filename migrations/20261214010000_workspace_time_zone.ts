import type { Knex } from 'knex';

/**
 * The workspace's time zone (an IANA name): its budget's days and months are that zone's, so "this month" is the
 * month its operators keep, not UTC's.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('workspaces', (t) => {
    t.text('time_zone').notNullable().defaultTo('UTC');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('workspaces', (t) => {
    t.dropColumn('time_zone');
  });
}

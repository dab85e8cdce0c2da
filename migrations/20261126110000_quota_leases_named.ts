import type { Knex } from 'knex';

/**
 * The table of quota holds is named for what it holds: since a call admitted on
 * a lease has no row of its own (migration 20261124090000), every row is a
 * gateway process's lease (src/domain/quota/quota-leases.ts). So:
 * - quota_reservations becomes quota_leases, its indexes and check with it;
 * - the rows of kind CALL go: closed rows of calls settled before then, which
 *   nothing reads (no foreign key names them since migration 20261123090000; a
 *   usage event keeps their id). With them go `kind`, whose one value left would
 *   say nothing, and `lease_id`, which only a CALL row had;
 * - reservation_id of usage_events and invocations becomes lease_id: the lease
 *   the call was admitted on.
 * A CALL row still HELD would be units held on a period by a process of a version
 * before leases: the sweeper of any later version expires it, so it is refused
 * here rather than dropped with its units.
 * The down migration restores the names and the columns, not the CALL rows.
 */
export async function up(knex: Knex): Promise<void> {
  await knex('quota_reservations').where({ kind: 'CALL' }).whereNot({ status: 'HELD' }).delete();
  const held = await knex('quota_reservations').where({ kind: 'CALL' }).count<{ n: string | number }[]>('* as n');
  if (Number(held[0]?.n ?? 0) > 0) {
    throw new Error(
      'quota_reservations holds HELD rows of kind CALL, from a version before quota leases: ' +
        'run the previous release until its lease sweeper has expired them, then migrate again.',
    );
  }
  await knex.raw('alter table quota_reservations drop constraint quota_reservations_kind_check');
  await knex.schema.alterTable('quota_reservations', (t) => {
    t.dropColumn('kind');
    t.dropColumn('lease_id');
  });
  await knex.raw('alter table quota_reservations rename to quota_leases');
  await knex.raw('alter index quota_reservations_pkey rename to quota_leases_pkey');
  await knex.raw('alter index quota_reservations_held_expiry rename to quota_leases_held_expiry');
  await knex.raw('alter index quota_reservations_quota_period_id_index rename to quota_leases_quota_period_id_index');
  await knex.raw('alter table quota_leases rename constraint quota_reservations_checks to quota_leases_checks');

  await knex.raw('alter table usage_events rename column reservation_id to lease_id');
  await knex.raw('alter index usage_events_one_usage_per_reservation rename to usage_events_one_usage_per_lease');
  await knex.raw('alter table invocations rename column reservation_id to lease_id');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table invocations rename column lease_id to reservation_id');
  await knex.raw('alter index usage_events_one_usage_per_lease rename to usage_events_one_usage_per_reservation');
  await knex.raw('alter table usage_events rename column lease_id to reservation_id');

  await knex.raw('alter table quota_leases rename constraint quota_leases_checks to quota_reservations_checks');
  await knex.raw('alter index quota_leases_quota_period_id_index rename to quota_reservations_quota_period_id_index');
  await knex.raw('alter index quota_leases_held_expiry rename to quota_reservations_held_expiry');
  await knex.raw('alter index quota_leases_pkey rename to quota_reservations_pkey');
  await knex.raw('alter table quota_leases rename to quota_reservations');
  // Every row left is a lease; new rows take the old default.
  await knex.schema.alterTable('quota_reservations', (t) => {
    t.text('kind').notNullable().defaultTo('LEASE');
    t.uuid('lease_id');
  });
  await knex.raw(`alter table quota_reservations alter column kind set default 'CALL'`);
  await knex.raw(`alter table quota_reservations add constraint quota_reservations_kind_check check (kind in ('CALL','LEASE'))`);
}

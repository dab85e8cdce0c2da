import type { Knex } from 'knex';

/**
 * Batches (docs/batches.md):
 * - a batch's row is written `PENDING` before the provider is asked to make it (its lease held, no provider id yet),
 *   and made `OPEN` with the provider's id once it answers: a process that dies in between leaves a row the
 *   settlement job finds (as it finds an OPEN batch due), which looks the batch up at the provider by the id Nexus
 *   gave it in its metadata, then settles it as any other, or releases its lease when the provider has none;
 * - an access's batches listed newest first (GET batches), read by (connection, access, created_at, id).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table batches alter column upstream_batch_id drop not null');
  await knex.raw('alter table batches drop constraint batches_status_check');
  await knex.raw(`alter table batches add constraint batches_status_check check (status in ('PENDING','OPEN','SETTLED'))`);
  await knex.raw('drop index batches_due');
  await knex.raw(`create index batches_due on batches (next_poll_at) where status in ('PENDING','OPEN')`);
  await knex.raw('create index batches_access_listed on batches (provider_connection_id, workspace_access_id, created_at, id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index batches_access_listed');
  await knex.raw('drop index batches_due');
  await knex.raw(`create index batches_due on batches (next_poll_at) where status = 'OPEN'`);
  await knex('batches').where({ status: 'PENDING' }).delete();
  await knex.raw('alter table batches drop constraint batches_status_check');
  await knex.raw(`alter table batches add constraint batches_status_check check (status in ('OPEN','SETTLED'))`);
  await knex.raw('alter table batches alter column upstream_batch_id set not null');
}

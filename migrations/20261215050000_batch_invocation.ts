import type { Knex } from 'knex';

/** A batch found by its invocation (getInvocation shows a batch's invocation with its batch: docs/batches.md). */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('create index if not exists batches_invocation on batches (invocation_id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists batches_invocation');
}

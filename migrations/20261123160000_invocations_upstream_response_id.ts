import type { Knex } from 'knex';

/**
 * A Responses API call may continue a stored response (`previous_response_id`): the provider adds
 * that conversation to its input, which the request body does not show. The gateway records each
 * response's id with its invocation, so a later call's bound can count the conversation it continues
 * (that response's input and output tokens). Found per workspace, for those calls only.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('invocations', (t) => {
    t.text('upstream_response_id');
  });
  await knex.raw(`create index invocations_upstream_response on invocations (workspace_id, upstream_response_id)
    where upstream_response_id is not null`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index invocations_upstream_response');
  await knex.schema.alterTable('invocations', (t) => {
    t.dropColumn('upstream_response_id');
  });
}

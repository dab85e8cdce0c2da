import type { Knex } from 'knex';

/**
 * An operator looks a call up by what a caller reports: a request id, an invocation id, an end user's
 * email or external id (listInvocations' `q`). The request id is read along (workspace_id, request_id);
 * an email names its user along (workspace_id, lower(email)), whose access's calls are then read along
 * (workspace_access_id, id); an external id has its unique index already. Each is a point lookup at any
 * number of invocations.
 *
 * The model filter matches a prefix (`gpt-4o` finds gpt-4o-mini too). Its index keeps the model in
 * text_pattern_ops, whose order makes a LIKE 'prefix%' a range scan in any database collation: a rare
 * prefix reads only its rows, a common one walks the newest ids and stops at a page. It replaces the
 * (workspace_id, requested_model, id) index, which served only the exact match.
 *
 * `error_message`: what the caller was told when the call did not succeed: the gateway's refusal, or the
 * upstream's own error message (an upstream 500's body says more than its status).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('invocations', (t) => {
    t.text('error_message');
    t.index(['workspace_id', 'request_id'], 'invocations_workspace_request_id_index');
  });
  await knex.raw('create index workspace_users_email_index on workspace_users (workspace_id, lower(email))');
  await knex.raw('drop index if exists invocations_workspace_id_requested_model_id_index');
  await knex.raw('create index invocations_model_prefix_index on invocations (workspace_id, requested_model text_pattern_ops, id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index invocations_model_prefix_index');
  await knex.raw('create index invocations_workspace_id_requested_model_id_index on invocations (workspace_id, requested_model, id)');
  await knex.raw('drop index workspace_users_email_index');
  await knex.schema.alterTable('invocations', (t) => {
    t.dropIndex(['workspace_id', 'request_id'], 'invocations_workspace_request_id_index');
    t.dropColumn('error_message');
  });
}

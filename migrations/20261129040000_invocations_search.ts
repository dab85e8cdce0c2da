import type { Knex } from 'knex';

/**
 * An operator looks a call up by what a caller reports: a request id, an invocation id, an end user's
 * email or external id (listInvocations' `q`). The request id is read along (workspace_id, request_id);
 * an email names its user along (workspace_id, lower(email)), whose access's calls are then read along
 * (workspace_access_id, id); an external id has its unique index already. Each is a point lookup at any
 * number of invocations.
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
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index workspace_users_email_index');
  await knex.schema.alterTable('invocations', (t) => {
    t.dropIndex(['workspace_id', 'request_id'], 'invocations_workspace_request_id_index');
    t.dropColumn('error_message');
  });
}

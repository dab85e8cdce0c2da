import type { Knex } from 'knex';

/**
 * Fewer index entries per recorded call (docs/performance.md, "Index entries"): every index of `invocations` takes an
 * entry of each call the record statement writes, in the current month's partition. Each index now keeps only the
 * rows its readers look for:
 * - `invocations_session_id` (session_id, where not null) is dropped: no statement reads it (a Realtime turn shows
 *   its session; none is looked up by it);
 * - `invocations_workspace_id_status_id_index` (workspace_id, status, id) holds only the calls that did not succeed:
 *   the invocations list by status reads it for those (the few); by SUCCEEDED (most rows) it reads
 *   (workspace_id, id) and filters;
 * - `invocations_connection_started` (provider_connection_id, started_at) holds only the calls that reached a
 *   provider: a connection's health reads those (`attempt_id is not null`).
 * A call that succeeds writes one entry fewer (6, not 7); a call refused before any provider (quota, rate, plan) one
 * fewer (no attempt); a call that failed upstream as many as before. Each narrower index is built anew on every
 * partition, the table locked for writes meanwhile (docs/operations.md, "The narrower invocation indexes", gives the
 * time at 20 M rows).
 */
export async function up(knex: Knex): Promise<void> {
  // Each dropped before its narrower one is made under its name (in the migration's transaction, so no reader sees
  // neither): each partition's copy is then named after its columns, as before.
  await knex.raw('drop index if exists invocations_session_id');
  await knex.raw('drop index invocations_workspace_id_status_id_index');
  await knex.raw(
    `create index invocations_workspace_id_status_id_index on invocations (workspace_id, status, id) where status <> 'SUCCEEDED'`,
  );
  await knex.raw('drop index invocations_connection_started');
  await knex.raw(
    'create index invocations_connection_started on invocations (provider_connection_id, started_at) where attempt_id is not null',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index invocations_connection_started');
  await knex.raw('create index invocations_connection_started on invocations (provider_connection_id, started_at)');
  await knex.raw('drop index invocations_workspace_id_status_id_index');
  await knex.raw('create index invocations_workspace_id_status_id_index on invocations (workspace_id, status, id)');
  await knex.raw('create index invocations_session_id on invocations (session_id) where session_id is not null');
}

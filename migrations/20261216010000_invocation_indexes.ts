import type { Knex } from 'knex';

/**
 * Fewer index entries per recorded call (docs/performance.md, "PostgreSQL per call"): every index of `invocations`
 * takes an entry of each call the record statement writes, into the current month's partition, whose B-trees
 * deepen as the month fills. Each index keeps only the rows its readers look for:
 *
 * | index                                      | before                                   | now                                           | its reader                                                                                  |
 * | ------------------------------------------ | ---------------------------------------- | --------------------------------------------- | ------------------------------------------------------------------------------------------- |
 * | `invocations_session_id`                   | (session_id) where session_id is not null | dropped                                       | none: a Realtime turn's session is shown on the turn, never looked up                       |
 * | `invocations_workspace_id_status_id_index` | (workspace_id, status, id)               | the same, where status <> 'SUCCEEDED'         | the invocations list by status: a status other than SUCCEEDED (the few) reads it; SUCCEEDED (most rows) reads (workspace_id, id), filtered |
 * | `invocations_connection_started`           | (provider_connection_id, started_at)     | the same, where attempt_id is not null        | a connection's health, which reads the calls that reached a provider (`attempt_id is not null`) |
 *
 * A call that succeeds writes one entry fewer; a call refused before any provider (quota, rate, plan) two fewer.
 * An index made partial is built anew, on every partition (its table is locked for writes meanwhile: the rows
 * are read once, and the partial index holds the few rows of its predicate; docs/operations.md gives the time at
 * 20 M rows).
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

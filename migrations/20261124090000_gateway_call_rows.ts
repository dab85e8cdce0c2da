import type { Knex } from 'knex';

/**
 * A gateway call wrote four rows: its invocation, its one attempt, a quota
 * reservation of its own (inserted already closed, beside the lease it was
 * admitted on) and its usage event; with their indexes, about fifteen B-tree
 * inserts. PostgreSQL, on the same two cores as the gateway, spent more on them
 * than the gateway on the call. Now it writes two:
 * - the attempt is columns of the invocation (`attempt_*`): a call has one
 *   attempt, and the contract's InvocationDto carries one `attempt` object;
 * - a call admitted on a quota lease has no reservation row: its invocation's
 *   and usage event's `reservation_id` is the lease's, the hold it was carved
 *   from. Its bound is written nowhere (the lease's own row holds the sum).
 * One usage event per call is kept by the database, per invocation now
 * (unique (invocation_id, kind), which also serves getInvocation's lookup); a
 * reservation settled on its own (no invocation) keeps the old rule.
 */
const ATTEMPT_COLUMNS = `attempt_id, attempt_upstream_model, attempt_status, attempt_http_status, attempt_error_code,
  attempt_started_at, attempt_first_token_at, attempt_completed_at, attempt_duration_ms`;

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('invocations', (t) => {
    t.uuid('attempt_id');
    t.text('attempt_upstream_model');
    t.text('attempt_status');
    t.integer('attempt_http_status');
    t.text('attempt_error_code');
    t.timestamp('attempt_started_at', { useTz: true });
    t.timestamp('attempt_first_token_at', { useTz: true });
    t.timestamp('attempt_completed_at', { useTz: true });
    t.double('attempt_duration_ms');
  });
  await knex.raw(`update invocations i
     set (${ATTEMPT_COLUMNS}) = (a.id, a.upstream_model, a.status, a.http_status, a.error_code, a.started_at, a.first_token_at,
                                 a.completed_at, a.duration_ms)
    from invocation_attempts a
   where a.invocation_id = i.id and a.sequence = 1`);
  await knex.raw(`alter table invocations
    add constraint invocations_attempt_status_check check (attempt_status in ('SUCCEEDED','UPSTREAM_ERROR','FAILED','ABORTED'))`);
  await knex.schema.dropTable('invocation_attempts');

  await knex.raw(`create unique index usage_events_one_per_invocation on usage_events (invocation_id, kind)`);
  await knex.raw('drop index usage_events_invocation_id_index');
  await knex.raw('drop index usage_events_one_usage_per_reservation');
  await knex.raw(`create unique index usage_events_one_usage_per_reservation on usage_events (reservation_id)
    where kind = 'USAGE' and reservation_id is not null and invocation_id is null`);
}

export async function down(knex: Knex): Promise<void> {
  // The old one-USAGE-per-reservation rule stays as narrowed: the events of the calls on one lease share its id.
  await knex.raw('create index usage_events_invocation_id_index on usage_events (invocation_id)');
  await knex.raw('drop index usage_events_one_per_invocation');

  await knex.schema.createTable('invocation_attempts', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable();
    t.uuid('invocation_id').notNullable().references('invocations.id');
    t.integer('sequence').notNullable();
    t.uuid('provider_connection_id').notNullable();
    t.text('upstream_model').notNullable().defaultTo('');
    t.text('status').notNullable();
    t.integer('http_status');
    t.text('error_code');
    t.timestamp('started_at', { useTz: true }).notNullable();
    t.timestamp('first_token_at', { useTz: true });
    t.timestamp('completed_at', { useTz: true });
    t.double('duration_ms');
    t.unique(['invocation_id', 'sequence']);
  });
  await knex.raw(`alter table invocation_attempts
    add constraint invocation_attempts_status_check check (status in ('SUCCEEDED','UPSTREAM_ERROR','FAILED','ABORTED'))`);
  await knex.raw(`insert into invocation_attempts (id, workspace_id, invocation_id, sequence, provider_connection_id, upstream_model, status,
                                                   http_status, error_code, started_at, first_token_at, completed_at, duration_ms)
    select attempt_id, workspace_id, id, 1, provider_connection_id, coalesce(attempt_upstream_model, ''), attempt_status,
           attempt_http_status, attempt_error_code, attempt_started_at, attempt_first_token_at, attempt_completed_at, attempt_duration_ms
      from invocations where attempt_id is not null`);
  await knex.raw('alter table invocations drop constraint invocations_attempt_status_check');
  await knex.schema.alterTable('invocations', (t) => {
    for (const c of ATTEMPT_COLUMNS.split(',')) t.dropColumn(c.trim());
  });
}

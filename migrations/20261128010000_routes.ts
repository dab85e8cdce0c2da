import type { Knex } from 'knex';

/**
 * Routes (docs/routes.md): one gateway URL over several provider connections of a workspace.
 *
 * - routes: the route and its settings. Its targets are a JSON array (connection, weight, model map,
 *   attempts, timeouts) read whole with the route; the retry and breaker settings likewise.
 * - route_breakers: each target's circuit breaker, the state every gateway process reads (polled, so a
 *   change is seen within a second). One row per (route, connection), written only on a transition.
 * - invocations.route_id and invocations.attempts: a call through a route names it, and keeps the attempts
 *   that failed before the one that answered (whose columns stay `attempt_*`).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('routes', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.text('name').notNullable();
    t.text('strategy').notNullable();
    t.text('status').notNullable();
    t.jsonb('targets').notNullable();
    t.jsonb('retry_on').notNullable();
    t.jsonb('retry').notNullable();
    t.jsonb('breaker').notNullable();
    t.boolean('try_when_all_open').notNullable().defaultTo(true);
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.timestamp('archived_at', { useTz: true });
    t.index(['workspace_id', 'id']);
  });
  await knex.raw("alter table routes add constraint routes_strategy_check check (strategy in ('fallback','loadbalance','least-busy'))");
  await knex.raw("alter table routes add constraint routes_status_check check (status in ('ACTIVE','ARCHIVED'))");
  await knex.schema.createTable('route_breakers', (t) => {
    t.uuid('route_id').notNullable();
    t.uuid('provider_connection_id').notNullable();
    t.uuid('workspace_id').notNullable();
    t.text('state').notNullable();
    /** When an open breaker lets its next probe through. */
    t.timestamp('retry_at', { useTz: true });
    /** A half-open probe under way, by any process, until then. */
    t.timestamp('probe_until', { useTz: true });
    t.timestamp('opened_at', { useTz: true });
    t.timestamp('last_failure_at', { useTz: true });
    t.text('last_error');
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.primary(['route_id', 'provider_connection_id']);
  });
  await knex.raw("alter table route_breakers add constraint route_breakers_state_check check (state in ('closed','open','half_open'))");
  await knex.schema.alterTable('invocations', (t) => {
    t.uuid('route_id');
    t.jsonb('attempts');
  });
  await knex.raw('create index invocations_route_started on invocations (route_id, started_at) where route_id is not null');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists invocations_route_started');
  await knex.schema.alterTable('invocations', (t) => {
    t.dropColumn('attempts');
    t.dropColumn('route_id');
  });
  await knex.schema.dropTable('route_breakers');
  await knex.schema.dropTable('routes');
}

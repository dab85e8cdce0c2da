import type { Knex } from 'knex';

/**
 * Plans, versioned quota strategies and their bindings; workspace users and
 * accesses; inference keys; quota periods, reservations and the append-only
 * usage events. Names are the ones agreed in the shared data model: the gateway
 * and billing areas query these tables directly.
 */
export async function up(knex: Knex): Promise<void> {
  const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true });

  await knex.schema.createTable('plans', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.text('key').notNullable();
    t.text('name').notNullable();
    t.text('billing_interval').notNullable();
    t.text('status').notNullable().defaultTo('DRAFT');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    ts(t, 'published_at');
    t.unique(['workspace_id', 'key'], { indexName: 'plans_workspace_key_unique' });
    t.index(['workspace_id', 'id']);
  });
  await knex.raw(`alter table plans add constraint plans_status_check check (status in ('DRAFT','ACTIVE','ARCHIVED'))`);
  await knex.raw(`alter table plans add constraint plans_interval_check check (billing_interval in ('MONTH','YEAR'))`);

  await knex.schema.createTable('quota_strategies', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.text('key').notNullable();
    t.integer('version').notNullable();
    t.text('type').notNullable().defaultTo('QUOTA');
    t.text('reset_interval').notNullable();
    t.bigInteger('quota_units').notNullable();
    t.bigInteger('input_multiplier_ppm').notNullable();
    t.bigInteger('output_multiplier_ppm').notNullable();
    t.bigInteger('cached_input_multiplier_ppm').notNullable();
    t.integer('max_output_tokens').notNullable();
    t.text('status').notNullable().defaultTo('DRAFT');
    ts(t, 'created_at').notNullable();
    ts(t, 'published_at');
    t.unique(['workspace_id', 'key', 'version'], { indexName: 'quota_strategies_key_version_unique' });
    t.index(['workspace_id', 'id']);
  });
  await knex.raw(`alter table quota_strategies add constraint quota_strategies_checks check (
    type = 'QUOTA' and status in ('DRAFT','PUBLISHED') and reset_interval in ('MONTH','YEAR')
    and version >= 1 and quota_units >= 0 and input_multiplier_ppm >= 0 and output_multiplier_ppm >= 0
    and cached_input_multiplier_ppm >= 0 and max_output_tokens > 0)`);
  // A published version is immutable, whoever writes: the database refuses.
  await knex.raw(`
    create or replace function nexus_forbid_published_strategy_change() returns trigger language plpgsql as $$
    begin
      if old.status = 'PUBLISHED' then
        raise exception 'quota strategy % is published and immutable', old.id using errcode = '42501';
      end if;
      return new;
    end $$`);
  await knex.raw(`create trigger quota_strategies_immutable before update or delete on quota_strategies
    for each row execute function nexus_forbid_published_strategy_change()`);

  await knex.schema.createTable('plan_strategy_bindings', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('plan_id').notNullable().references('plans.id');
    t.uuid('strategy_id').notNullable().references('quota_strategies.id');
    t.text('strategy_type').notNullable().defaultTo('QUOTA');
    ts(t, 'effective_from').notNullable();
    ts(t, 'effective_to');
    ts(t, 'created_at').notNullable();
    t.index(['plan_id', 'effective_from']);
  });
  await knex.raw(`alter table plan_strategy_bindings add constraint plan_strategy_bindings_checks check (
    strategy_type = 'QUOTA' and (effective_to is null or effective_to >= effective_from))`);

  await knex.schema.createTable('workspace_users', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.text('external_user_id').notNullable();
    t.text('email').notNullable();
    t.text('name');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    ts(t, 'created_at').notNullable();
    t.unique(['workspace_id', 'external_user_id'], { indexName: 'workspace_users_external_unique' });
  });

  await knex.schema.createTable('workspace_accesses', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('user_id').notNullable().references('workspace_users.id');
    t.uuid('plan_id').notNullable().references('plans.id');
    t.text('status').notNullable();
    ts(t, 'access_starts_at').notNullable();
    ts(t, 'access_ends_at');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.text('status_reason');
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    t.unique(['workspace_id', 'user_id'], { indexName: 'workspace_accesses_user_unique' });
    t.index(['workspace_id', 'id']);
  });
  await knex.raw(`alter table workspace_accesses add constraint workspace_accesses_status_check
    check (status in ('PENDING','ACTIVE','SUSPENDED','EXPIRED','REVOKED'))`);

  await knex.schema.createTable('inference_keys', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('workspace_access_id').notNullable().references('workspace_accesses.id');
    t.text('name').notNullable();
    t.text('prefix').notNullable();
    t.text('key_hash').notNullable().unique();
    ts(t, 'expires_at').notNullable();
    ts(t, 'revoked_at');
    ts(t, 'last_request_at');
    ts(t, 'created_at').notNullable();
    t.index(['workspace_access_id', 'id']);
  });

  await knex.schema.createTable('quota_periods', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('workspace_access_id').notNullable().references('workspace_accesses.id');
    t.uuid('plan_id').notNullable().references('plans.id');
    t.uuid('quota_strategy_id').notNullable().references('quota_strategies.id');
    ts(t, 'period_start').notNullable();
    ts(t, 'period_end').notNullable();
    t.bigInteger('granted_units').notNullable();
    t.bigInteger('reserved_units').notNullable().defaultTo(0);
    t.bigInteger('consumed_units').notNullable().defaultTo(0);
    t.text('source').notNullable();
    t.text('external_period_key');
    // The start of the cycle a plan change split this period from (else period_start): proration base.
    ts(t, 'cycle_start').notNullable();
    ts(t, 'created_at').notNullable();
    t.unique(['workspace_access_id', 'period_start'], { indexName: 'quota_periods_access_start_unique' });
    t.index(['workspace_access_id', 'period_end']);
  });
  await knex.raw(`alter table quota_periods add constraint quota_periods_checks check (
    reserved_units >= 0 and consumed_units >= 0 and granted_units >= 0 and period_end > period_start
    and source in ('renewal','provision','billing','plan_change'))`);
  await knex.raw(`create unique index quota_periods_external_key_unique on quota_periods (workspace_access_id, external_period_key)
    where external_period_key is not null`);

  await knex.schema.createTable('quota_reservations', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('workspace_access_id').notNullable().references('workspace_accesses.id');
    t.uuid('quota_period_id').notNullable().references('quota_periods.id');
    t.bigInteger('reserved_units').notNullable();
    t.bigInteger('consumed_units');
    t.text('status').notNullable().defaultTo('HELD');
    t.text('request_id').notNullable();
    ts(t, 'created_at').notNullable();
    ts(t, 'expires_at').notNullable();
    ts(t, 'settled_at');
    t.index(['quota_period_id']);
  });
  await knex.raw(`alter table quota_reservations add constraint quota_reservations_checks check (
    reserved_units >= 0 and status in ('HELD','SETTLED','RELEASED','EXPIRED'))`);
  await knex.raw(`create index quota_reservations_held_expiry on quota_reservations (expires_at) where status = 'HELD'`);

  await knex.schema.createTable('usage_events', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('workspace_access_id').notNullable().references('workspace_accesses.id');
    t.uuid('quota_period_id').notNullable().references('quota_periods.id');
    t.uuid('reservation_id').references('quota_reservations.id');
    t.uuid('invocation_id');
    t.text('kind').notNullable();
    t.bigInteger('units').notNullable();
    t.bigInteger('input_tokens').notNullable().defaultTo(0);
    t.bigInteger('cached_input_tokens').notNullable().defaultTo(0);
    t.bigInteger('output_tokens').notNullable().defaultTo(0);
    t.text('model');
    t.text('reason');
    ts(t, 'created_at').notNullable();
    t.index(['workspace_id', 'id']);
    t.index(['reservation_id']);
    t.index(['invocation_id']);
  });
  await knex.raw(`alter table usage_events add constraint usage_events_kind_check check (kind in ('USAGE','ADJUSTMENT'))`);
  // One USAGE event per reservation, whatever retries the settlement sees.
  await knex.raw(`create unique index usage_events_one_usage_per_reservation on usage_events (reservation_id)
    where kind = 'USAGE' and reservation_id is not null`);
  await knex.raw(`create trigger usage_events_append_only before update or delete on usage_events
    for each row execute function nexus_forbid_mutation()`);
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'usage_events',
    'quota_reservations',
    'quota_periods',
    'inference_keys',
    'workspace_accesses',
    'workspace_users',
    'plan_strategy_bindings',
    'quota_strategies',
    'plans',
  ]) {
    await knex.schema.dropTable(table);
  }
  await knex.raw('drop function nexus_forbid_published_strategy_change()');
}

import type { Knex } from 'knex';

/**
 * External billing: connections (encrypted credential and webhook secrets), product
 * mappings, checkouts, the webhook inbox (and a minimal record of rejected deliveries),
 * external subscription projections, billing-period grants (the row written before a
 * period's quota is granted, so it is granted once), app-reported periods and
 * reconciliation runs.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('billing_connections', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.text('name').notNullable();
    t.text('provider').notNullable();
    t.text('kind').notNullable();
    t.text('mode').notNullable();
    t.text('status').notNullable().defaultTo('ACTIVE');
    t.text('credential_ciphertext');
    t.text('credential_key_id');
    t.text('credential_preview');
    t.text('credential_verification_status').notNullable().defaultTo('NOT_CONFIGURED');
    t.text('last_verification_error');
    t.timestamp('last_verified_at', { useTz: true });
    t.text('external_account_id');
    t.text('webhook_secret_ciphertext');
    t.text('webhook_secret_key_id');
    t.text('previous_webhook_secret_ciphertext');
    t.text('previous_webhook_secret_key_id');
    t.timestamp('previous_webhook_secret_expires_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.timestamp('disabled_at', { useTz: true });
    t.index(['workspace_id', 'id']);
  });
  await knex.raw(`alter table billing_connections
    add constraint billing_connections_provider_check check (provider in ('STRIPE','PADDLE')),
    add constraint billing_connections_kind_check check (kind in ('HOSTED','APP_SYNC')),
    add constraint billing_connections_mode_check check (mode in ('TEST','LIVE')),
    add constraint billing_connections_status_check check (status in ('ACTIVE','DISABLED')),
    add constraint billing_connections_verification_check
      check (credential_verification_status in ('NOT_CONFIGURED','UNVERIFIED','VERIFIED','FAILED'))`);

  await knex.schema.createTable('billing_product_mappings', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.text('external_product_id').notNullable();
    t.text('external_price_id');
    t.uuid('plan_id').notNullable().references('plans.id');
    t.boolean('checkout_enabled').notNullable().defaultTo(false);
    t.text('status').notNullable().defaultTo('ACTIVE');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('disabled_at', { useTz: true });
    t.index(['billing_connection_id', 'id']);
  });
  await knex.raw(`alter table billing_product_mappings
    add constraint billing_product_mappings_status_check check (status in ('ACTIVE','DISABLED'))`);
  await knex.raw(`create unique index billing_product_mappings_active_unique
    on billing_product_mappings (billing_connection_id, external_product_id, coalesce(external_price_id, ''))
    where status = 'ACTIVE'`);

  await knex.schema.createTable('billing_checkouts', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.uuid('workspace_access_id').notNullable().references('workspace_accesses.id');
    t.uuid('product_mapping_id').notNullable().references('billing_product_mappings.id');
    t.text('provider_checkout_id').notNullable();
    t.text('url').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['workspace_access_id', 'id']);
  });

  await knex.schema.createTable('billing_webhook_events', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.text('provider_event_id').notNullable();
    t.text('event_type').notNullable();
    t.timestamp('provider_created_at', { useTz: true });
    t.text('raw_body').notNullable();
    t.jsonb('headers').notNullable().defaultTo('{}');
    t.text('verified_with').notNullable();
    t.text('status').notNullable().defaultTo('RECEIVED');
    t.integer('attempts').notNullable().defaultTo(0);
    t.text('last_error');
    t.timestamp('received_at', { useTz: true }).notNullable();
    t.timestamp('processing_started_at', { useTz: true });
    t.timestamp('processed_at', { useTz: true });
    t.unique(['billing_connection_id', 'provider_event_id']);
    t.index(['billing_connection_id', 'id']);
  });
  await knex.raw(`alter table billing_webhook_events
    add constraint billing_webhook_events_status_check
      check (status in ('RECEIVED','PROCESSING','PROCESSED','IGNORED','FAILED')),
    add constraint billing_webhook_events_verified_check check (verified_with in ('CURRENT_SECRET','PREVIOUS_SECRET'))`);
  await knex.raw(`create index billing_webhook_events_pending on billing_webhook_events (received_at)
    where status in ('RECEIVED','PROCESSING')`);

  // Deliveries refused for their signature: no body, no header values.
  await knex.schema.createTable('billing_webhook_rejections', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.text('reason').notNullable();
    t.integer('body_bytes').notNullable();
    t.timestamp('received_at', { useTz: true }).notNullable();
  });

  await knex.schema.createTable('external_subscriptions', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.uuid('workspace_access_id').notNullable().references('workspace_accesses.id');
    t.text('provider').notNullable();
    t.text('external_subscription_id').notNullable();
    t.text('external_customer_id');
    t.text('status').notNullable();
    t.uuid('plan_id').references('plans.id');
    t.text('external_product_id');
    t.text('external_price_id');
    t.timestamp('current_period_start', { useTz: true });
    t.timestamp('current_period_end', { useTz: true });
    t.boolean('cancel_at_period_end').notNullable().defaultTo(false);
    t.timestamp('canceled_at', { useTz: true });
    t.timestamp('ended_at', { useTz: true });
    t.timestamp('past_due_since', { useTz: true });
    t.timestamp('source_updated_at', { useTz: true }).notNullable();
    /** Breaks ties between states with the same source time (deterministic whatever the order). */
    t.text('source_tiebreak').notNullable().defaultTo('');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.unique(['billing_connection_id', 'external_subscription_id']);
    t.index(['workspace_access_id', 'id']);
  });

  // Written (unique) in the same transaction as the quota grant: a period is granted once.
  await knex.schema.createTable('billing_period_grants', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('workspace_access_id').notNullable().references('workspace_accesses.id');
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.text('period_key').notNullable();
    t.uuid('plan_id').references('plans.id');
    t.timestamp('period_start', { useTz: true }).notNullable();
    t.timestamp('period_end', { useTz: true }).notNullable();
    t.uuid('quota_period_id');
    t.text('outcome').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.unique(['workspace_access_id', 'period_key']);
  });

  await knex.schema.createTable('billing_period_syncs', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('workspace_access_id').notNullable().references('workspace_accesses.id');
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.text('external_period_id').notNullable();
    t.uuid('plan_id').notNullable().references('plans.id');
    t.timestamp('period_start', { useTz: true }).notNullable();
    t.timestamp('period_end', { useTz: true }).notNullable();
    t.text('status').notNullable();
    t.boolean('cancel_at_period_end').notNullable().defaultTo(false);
    t.timestamp('source_updated_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.unique(['workspace_access_id', 'billing_connection_id', 'external_period_id']);
  });

  await knex.schema.createTable('reconciliation_runs', (t) => {
    t.uuid('id').primary();
    t.uuid('workspace_id').notNullable().references('workspaces.id');
    t.uuid('billing_connection_id').notNullable().references('billing_connections.id');
    t.text('status').notNullable();
    t.integer('examined').notNullable().defaultTo(0);
    t.integer('changed').notNullable().defaultTo(0);
    t.jsonb('changes').notNullable().defaultTo('[]');
    t.text('error');
    t.timestamp('started_at', { useTz: true }).notNullable();
    t.timestamp('finished_at', { useTz: true });
    t.index(['billing_connection_id', 'id']);
  });
  await knex.raw(`alter table reconciliation_runs
    add constraint reconciliation_runs_status_check check (status in ('RUNNING','SUCCEEDED','FAILED'))`);
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'reconciliation_runs',
    'billing_period_syncs',
    'billing_period_grants',
    'external_subscriptions',
    'billing_webhook_rejections',
    'billing_webhook_events',
    'billing_checkouts',
    'billing_product_mappings',
    'billing_connections',
  ]) {
    await knex.schema.dropTable(table);
  }
}

import type { Knex } from 'knex';

/**
 * A provider connection may retry its calls (docs/routes.md "Retries on a plain connection"): `retry` holds the
 * policy (attempts, statuses, backoff, Retry-After cap, budget) as JSON; null, the default, is one attempt, as
 * before. The gateway reads it with the connection's other columns.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('provider_connections', (t) => {
    t.jsonb('retry');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('provider_connections', (t) => {
    t.dropColumn('retry');
  });
}

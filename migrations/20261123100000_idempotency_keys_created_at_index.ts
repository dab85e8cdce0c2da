import type { Knex } from 'knex';

/**
 * Idempotency rows past their 24 h replay window are purged periodically (their
 * stored answers can hold a key's plaintext): the purge finds them by age.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('idempotency_keys', (t) => {
    t.index(['created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('idempotency_keys', (t) => {
    t.dropIndex(['created_at']);
  });
}

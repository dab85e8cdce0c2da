import type { Knex } from 'knex';

/**
 * A webhook endpoint keeps every secret rotated out within its overlap (docs/events.md): `previous_secrets`, newest
 * first, each `{ ciphertext, keyId, expiresAt }` sealed as the one previous secret was (bound to the endpoint). It
 * replaces the one previous secret's three columns, whose secret, if its overlap still runs, is its first entry.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`alter table webhook_endpoints add column previous_secrets jsonb not null default '[]'::jsonb`);
  await knex.raw(`
    update webhook_endpoints
       set previous_secrets = jsonb_build_array(jsonb_build_object(
             'ciphertext', previous_secret_ciphertext,
             'keyId', previous_secret_key_id,
             'expiresAt', to_char(previous_secret_expires_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
     where previous_secret_ciphertext is not null and previous_secret_key_id is not null
       and previous_secret_expires_at > now()`);
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.dropColumn('previous_secret_ciphertext');
    t.dropColumn('previous_secret_key_id');
    t.dropColumn('previous_secret_expires_at');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.text('previous_secret_ciphertext');
    t.text('previous_secret_key_id');
    t.timestamp('previous_secret_expires_at', { useTz: true });
  });
  await knex.raw(`
    update webhook_endpoints
       set previous_secret_ciphertext = previous_secrets -> 0 ->> 'ciphertext',
           previous_secret_key_id = previous_secrets -> 0 ->> 'keyId',
           previous_secret_expires_at = cast(previous_secrets -> 0 ->> 'expiresAt' as timestamptz)
     where jsonb_array_length(previous_secrets) > 0`);
  await knex.schema.alterTable('webhook_endpoints', (t) => t.dropColumn('previous_secrets'));
}

import type { Knex } from 'knex';

/**
 * People sign in (docs/people.md): a person is whom an OpenID Connect provider vouched for (its issuer and subject),
 * or the installation's owner signed in by a link of `nexus login-link` (issuer `nexus:login-link`). A session is
 * kept here, found by the keyed hash of its cookie's token (never the token); it ends when unused for the idle
 * time (`last_seen_at`), at `expires_at` whatever its use, or when revoked. The ID token the provider gave is kept
 * sealed (AES-GCM, bound to the session) for the provider's sign-out (`id_token_hint`).
 *
 * A sign-in under way is a `sign_in_attempts` row found by the keyed hash of the browser's short-lived cookie: its
 * provider, state, nonce and sealed PKCE verifier, used once. A login link is found by its token's keyed hash, used once.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('persons', (t) => {
    t.uuid('id').primary();
    t.text('issuer').notNullable();
    t.text('subject').notNullable();
    t.text('email');
    t.text('name');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('last_sign_in_at', { useTz: true }).notNullable();
    t.unique(['issuer', 'subject']);
  });
  await knex.schema.createTable('sessions', (t) => {
    t.uuid('id').primary();
    t.text('token_hash').notNullable().unique();
    t.uuid('person_id').notNullable().references('persons.id');
    /** The provider's id in the configuration; null for a login link. */
    t.text('provider');
    t.boolean('is_owner').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('last_seen_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('revoked_at', { useTz: true });
    t.text('id_token_ciphertext');
    t.text('id_token_key_id');
    t.index(['person_id']);
  });
  await knex.schema.createTable('sign_in_attempts', (t) => {
    t.text('id').primary();
    t.text('provider').notNullable();
    t.text('state').notNullable();
    t.text('nonce').notNullable();
    t.text('code_verifier_ciphertext').notNullable();
    t.text('code_verifier_key_id').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.index(['expires_at']);
  });
  await knex.schema.createTable('login_links', (t) => {
    t.uuid('id').primary();
    t.text('token_hash').notNullable().unique();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('login_links');
  await knex.schema.dropTable('sign_in_attempts');
  await knex.schema.dropTable('sessions');
  await knex.schema.dropTable('persons');
}

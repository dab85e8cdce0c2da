import type { Knex } from 'knex';

/**
 * A provider connection may speak `azure-openai`, `gemini` and `bedrock` (src/gateway/protocols/). A Bedrock
 * connection's AWS region and credentials are sealed as its secret (api_key_ciphertext): no new column. The down
 * migration fails while a connection speaks one of them, rather than dropping connections.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table provider_connections drop constraint provider_connections_profile_check');
  await knex.raw(
    "alter table provider_connections add constraint provider_connections_profile_check check (protocol_profile in ('openai','anthropic','azure-openai','gemini','bedrock'))",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table provider_connections drop constraint provider_connections_profile_check');
  await knex.raw(
    "alter table provider_connections add constraint provider_connections_profile_check check (protocol_profile in ('openai','anthropic'))",
  );
}

import type { Knex } from 'knex';

/**
 * A provider connection may speak `bedrock` (Amazon Bedrock Runtime: src/gateway/protocols/bedrock.ts), beside
 * the four profiles of 20261127000000_protocol_profiles.ts. Its AWS region and credentials are sealed as the
 * connection's secret (api_key_ciphertext): no new column. The down migration restores the four profiles, and
 * fails while a bedrock connection exists, rather than dropping it.
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
    "alter table provider_connections add constraint provider_connections_profile_check check (protocol_profile in ('openai','anthropic','azure-openai','gemini'))",
  );
}

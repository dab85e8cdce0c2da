import type { Knex } from 'knex';

/**
 * A provider connection may speak `azure-openai` and `gemini` (src/gateway/protocols/). The down
 * migration fails while a connection speaks one of them, rather than dropping connections.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table provider_connections drop constraint provider_connections_profile_check');
  await knex.raw(
    "alter table provider_connections add constraint provider_connections_profile_check check (protocol_profile in ('openai','anthropic','azure-openai','gemini'))",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table provider_connections drop constraint provider_connections_profile_check');
  await knex.raw(
    "alter table provider_connections add constraint provider_connections_profile_check check (protocol_profile in ('openai','anthropic'))",
  );
}

import type { Knex } from 'knex';

/**
 * A provider connection may speak `azure-openai` (src/gateway/protocols/azure-openai.ts). The down
 * migration refuses while a connection speaks it, rather than dropping connections.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table provider_connections drop constraint provider_connections_profile_check');
  await knex.raw(
    "alter table provider_connections add constraint provider_connections_profile_check check (protocol_profile in ('openai','anthropic','azure-openai'))",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table provider_connections drop constraint provider_connections_profile_check');
  await knex.raw(
    "alter table provider_connections add constraint provider_connections_profile_check check (protocol_profile in ('openai','anthropic'))",
  );
}

import type { Knex } from 'knex';

/**
 * A provider connection may say its upstream does not enforce the output cap it is sent (a self-hosted server
 * that ignores `max_tokens`, a proxy that drops it): `enforces_output_cap` false has the gateway admit its
 * metered calls at the most output their plan lets a call ask for (docs/reliability.md "Connections that do not
 * enforce the cap"). True, the default, is every connection so far: calls admitted at their own cap.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('provider_connections', (t) => {
    t.boolean('enforces_output_cap').notNullable().defaultTo(true);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('provider_connections', (t) => {
    t.dropColumn('enforces_output_cap');
  });
}

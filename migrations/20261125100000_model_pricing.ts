import type { Knex } from 'knex';

/**
 * Per-model pricing on quota strategies (docs/pricing.md): `model_rules` (a JSON array of
 * `{ pattern, inputMultiplierPpm, cachedInputMultiplierPpm, outputMultiplierPpm }`, multipliers as
 * decimal strings, tried in order), `allowed_models` (a JSON array of patterns; null: every model) and
 * `output_cap_policy` (`clamp` | `refuse`).
 *
 * Strategies that exist keep what they were published with: no rules, every model, and `refuse` (a
 * request above maxOutputTokens was refused when they were made). The column is added with that
 * default, so no row is updated (a published row refuses every update); new rows default to `clamp`.
 *
 * Usage events, and the calls in flight a heartbeat writes (lease_calls, charged by a reclaim), keep the
 * pricing that was applied: the matched rule's pattern (null: the strategy's own multipliers) and the
 * three multipliers, so a bill can be recomputed from the events alone. Null on events recorded before.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('quota_strategies', (t) => {
    t.jsonb('model_rules').notNullable().defaultTo(knex.raw(`'[]'::jsonb`));
    t.jsonb('allowed_models');
    t.text('output_cap_policy').notNullable().defaultTo('refuse');
  });
  await knex.raw(`alter table quota_strategies alter column output_cap_policy set default 'clamp'`);
  await knex.raw(`alter table quota_strategies add constraint quota_strategies_model_pricing_checks check (
    output_cap_policy in ('clamp', 'refuse') and jsonb_typeof(model_rules) = 'array'
    and (allowed_models is null or jsonb_typeof(allowed_models) = 'array'))`);
  for (const table of ['usage_events', 'lease_calls']) {
    await knex.schema.alterTable(table, (t) => {
      t.text('model_rule');
      t.bigInteger('input_multiplier_ppm');
      t.bigInteger('cached_input_multiplier_ppm');
      t.bigInteger('output_multiplier_ppm');
    });
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['usage_events', 'lease_calls']) {
    await knex.schema.alterTable(table, (t) => {
      t.dropColumn('model_rule');
      t.dropColumn('input_multiplier_ppm');
      t.dropColumn('cached_input_multiplier_ppm');
      t.dropColumn('output_multiplier_ppm');
    });
  }
  await knex.raw('alter table quota_strategies drop constraint quota_strategies_model_pricing_checks');
  await knex.schema.alterTable('quota_strategies', (t) => {
    t.dropColumn('model_rules');
    t.dropColumn('allowed_models');
    t.dropColumn('output_cap_policy');
  });
}

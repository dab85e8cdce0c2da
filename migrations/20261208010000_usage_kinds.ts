import type { Knex } from 'knex';

/**
 * The kinds beyond text tokens (docs/pricing.md, "Kinds"): audio and image tokens, images (by tier), seconds of audio
 * and characters, counted, charged and priced.
 *
 * - `quota_strategies.kind_multipliers`: a strategy's multipliers of the kinds, a JSON object of decimal strings
 *   (`audioInputMultiplierPpm`, ..., `imageTierMultipliersPpm: {"hd/1024x1792": "..."}`); null or a kind absent: the
 *   documented default (src/domain/quota/quota-math.ts). A model rule carries the same fields in `model_rules`.
 * - `model_prices`: a price of each kind (per million audio or image tokens, per image and per image tier, per second,
 *   per million characters) and a price per call; null: the kind falls back as docs/pricing.md says.
 * - `usage_events` and `lease_calls`: the kinds a call counted (null: not reported), beside its tokens; the audio and
 *   image tokens are parts of the input and output tokens.
 * - `usage_rollups` and `usage_key_rollups`: the sums of each kind (the tier is on the events only).
 */
const KIND_COUNTS = [
  'audio_input_tokens',
  'audio_output_tokens',
  'image_input_tokens',
  'image_output_tokens',
  'images',
  'audio_ms',
  'characters',
];

const PRICES = [
  'audio_input_per_million',
  'audio_output_per_million',
  'image_input_per_million',
  'image_output_per_million',
  'per_image',
  'per_second',
  'characters_per_million',
  'per_call',
];

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table quota_strategies add column kind_multipliers jsonb');
  await knex.raw(
    `alter table quota_strategies add constraint quota_strategies_kind_multipliers_object
       check (kind_multipliers is null or jsonb_typeof(kind_multipliers) = 'object')`,
  );
  await knex.raw(
    `alter table model_prices ${PRICES.map((p) => `add column ${p} numeric check (${p} >= 0)`).join(', ')},
       add column per_image_tier jsonb check (per_image_tier is null or jsonb_typeof(per_image_tier) = 'object')`,
  );
  for (const table of ['usage_events', 'lease_calls']) {
    await knex.raw(`alter table ${table} ${KIND_COUNTS.map((c) => `add column ${c} bigint`).join(', ')}, add column image_tier text`);
  }
  for (const table of ['usage_rollups', 'usage_key_rollups']) {
    await knex.raw(`alter table ${table} ${KIND_COUNTS.map((c) => `add column ${c} bigint not null default 0`).join(', ')}`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['usage_rollups', 'usage_key_rollups']) {
    await knex.raw(`alter table ${table} ${KIND_COUNTS.map((c) => `drop column ${c}`).join(', ')}`);
  }
  for (const table of ['usage_events', 'lease_calls']) {
    await knex.raw(`alter table ${table} ${KIND_COUNTS.map((c) => `drop column ${c}`).join(', ')}, drop column image_tier`);
  }
  await knex.raw(`alter table model_prices ${[...PRICES, 'per_image_tier'].map((p) => `drop column ${p}`).join(', ')}`);
  await knex.raw('alter table quota_strategies drop column kind_multipliers');
}

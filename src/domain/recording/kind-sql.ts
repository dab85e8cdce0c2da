/**
 * The kinds beyond text tokens a call counted (docs/pricing.md, "Kinds"), as the record statement carries them: the
 * same columns in lease_calls, usage_events and the JSON of a call's settlement, each null where not reported (a call
 * of text tokens only leaves them all out of its JSON). The rollups sum the counts (not the tier).
 */

/** The kinds counted, as sums of the usage rollups. */
export const KIND_COUNTS = [
  'audio_input_tokens',
  'audio_output_tokens',
  'image_input_tokens',
  'image_output_tokens',
  'images',
  'audio_ms',
  'characters',
] as const;

/** The kinds' columns, the counts and the images' tier. */
export const KIND_COLUMNS = [...KIND_COUNTS, 'image_tier'] as const;

/** The kinds' columns of a json_to_recordset column list. */
export const KIND_COLUMN_TYPES = [...KIND_COUNTS.map((c) => `${c} bigint`), 'image_tier text'].join(', ');

/** The kinds' columns of `row`, comma-separated (`row.audio_input_tokens, ...`). */
export const kindColumnsOf = (row: string) => KIND_COLUMNS.map((c) => `${row}.${c}`).join(', ');

/** As many nulls as kinds (an ADJUSTMENT event's: it carries units only). */
export const NO_KINDS = KIND_COLUMNS.map(() => 'null').join(', ');

/**
 * What a call used, as its protocol reads it from the answer: the kinds a meter counts (docs/pricing.md, "Kinds").
 *
 * Tokens of every modality are counted in `inputTokens` and `outputTokens`, as the providers count them; the audio
 * and image tokens are also given apart, as parts of those totals, so that a strategy or a price may give them
 * their own rate. Images, seconds of audio and characters are not tokens: they are counted apart and priced apart.
 * A kind absent (undefined or null) was not reported, or the call has none of it.
 */
export interface Usage {
  /** All input tokens: text, audio and image; cached ones and those written to the cache included. */
  inputTokens: bigint;
  cachedInputTokens: bigint;
  /** All output tokens: text, audio and image; reasoning ones included. */
  outputTokens: bigint;
  /** Of the input, the tokens written to the provider's prompt cache; null or absent: the answer did not say. */
  cacheWriteTokens?: bigint | null;
  /** Of the output, the reasoning (thinking) tokens; null or absent: the answer did not say. */
  reasoningTokens?: bigint | null;
  /** Of the input, the audio tokens. */
  audioInputTokens?: bigint | null;
  /** Of the output, the audio tokens. */
  audioOutputTokens?: bigint | null;
  /** Of the input, the image tokens. */
  imageInputTokens?: bigint | null;
  /** Of the output, the image tokens. */
  imageOutputTokens?: bigint | null;
  /** Images made, each of the tier (quality and size) `imageTier` names. */
  images?: bigint | null;
  /** The images' tier: `{quality}/{size}` as the request asked (`hd/1024x1792`, `standard/1024x1024`); null: none given. */
  imageTier?: string | null;
  /** Audio, in milliseconds (a transcription's input, priced per second). */
  audioMs?: bigint | null;
  /** Characters of text (a speech call's input, priced per character). */
  characters?: bigint | null;
}

/**
 * A token count an upstream reported; an absurd one is clamped so its records still fit the database's int8
 * columns (0 for anything that is not a count).
 */
export function big(value: unknown): bigint {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return 0n;
  return BigInt(Math.trunc(Math.min(value, Number.MAX_SAFE_INTEGER)));
}

/** A token count the answer may leave out: undefined when it does. */
export function bigOrAbsent(value: unknown): bigint | undefined {
  return typeof value === 'number' ? big(value) : undefined;
}

/** The kinds beyond text tokens that a usage may count (docs/pricing.md, "Kinds"): what a record carries of them. */
export type UsageKinds = Pick<
  Usage,
  'audioInputTokens' | 'audioOutputTokens' | 'imageInputTokens' | 'imageOutputTokens' | 'images' | 'imageTier' | 'audioMs' | 'characters'
>;

/** The kinds of a usage, each null where it was not reported. */
export function kindsOf(usage: Usage): Required<UsageKinds> {
  return {
    audioInputTokens: usage.audioInputTokens ?? null,
    audioOutputTokens: usage.audioOutputTokens ?? null,
    imageInputTokens: usage.imageInputTokens ?? null,
    imageOutputTokens: usage.imageOutputTokens ?? null,
    images: usage.images ?? null,
    imageTier: usage.imageTier ?? null,
    audioMs: usage.audioMs ?? null,
    characters: usage.characters ?? null,
  };
}

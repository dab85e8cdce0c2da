/**
 * The kinds beyond text tokens a call or a bucket counts (docs/pricing.md, "Kinds"): audio and image tokens, images,
 * seconds of audio and characters, as the invocation page and the usage page show them. A kind absent is none.
 */
import { formatNumber } from './format.js';

/** The kinds' counts, as the API writes them on an invocation, a usage event and a summary bucket. */
export interface KindCounts {
  audioInputTokens?: string;
  audioOutputTokens?: string;
  imageInputTokens?: string;
  imageOutputTokens?: string;
  images?: string;
  audioMs?: string;
  characters?: string;
}

const KIND_FIELDS = [
  'audioInputTokens',
  'audioOutputTokens',
  'imageInputTokens',
  'imageOutputTokens',
  'images',
  'audioMs',
  'characters',
] as const satisfies readonly (keyof KindCounts)[];

/** Seconds from milliseconds, to a tenth. */
const seconds = (ms: bigint) => `${new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 }).format(Number(ms) / 1000)} s of audio`;

/** The kinds a call or a bucket has, in words (`40 audio input tokens · 2 images (hd/1024x1792)`); '' when none. */
export function kindsText(k: KindCounts & { imageTier?: string }): string {
  const parts: string[] = [];
  const count = (field: keyof KindCounts, label: string) => {
    const value = k[field];
    if (value && value !== '0') parts.push(`${formatNumber(value)} ${label}`);
  };
  count('audioInputTokens', 'audio input tokens');
  count('audioOutputTokens', 'audio output tokens');
  count('imageInputTokens', 'image input tokens');
  count('imageOutputTokens', 'image output tokens');
  if (k.images && k.images !== '0') parts.push(`${formatNumber(k.images)} images${k.imageTier ? ` (${k.imageTier})` : ''}`);
  if (k.audioMs && k.audioMs !== '0') parts.push(seconds(BigInt(k.audioMs)));
  count('characters', 'characters');
  return parts.join(' · ');
}

/** Kinds summed (a total of buckets), as decimal strings. */
export function addKinds(a: KindCounts, b: KindCounts): KindCounts {
  const sum: KindCounts = {};
  for (const field of KIND_FIELDS) {
    const total = BigInt(a[field] ?? '0') + BigInt(b[field] ?? '0');
    if (total !== 0n) sum[field] = `${total}`;
  }
  return sum;
}

/**
 * LiteLLM's `model_prices_and_context_window.json`: model id -> { input_cost_per_token, output_cost_per_token, ... }
 * in USD per token (per image, per second, per character, per pixel for the kinds beyond text). Read into the price
 * book's prices (per million tokens or characters, per image, per second), exactly: a JSON number's shortest decimal
 * form (what JSON.parse read, as JavaScript prints it back) as an integer and a scale, no floating-point arithmetic.
 *
 * The kinds beyond text tokens (docs/pricing.md, "Kinds"):
 * - audio and image tokens: `input_cost_per_audio_token`, `output_cost_per_audio_token`, `input_cost_per_image_token`,
 *   `output_cost_per_image_token`;
 * - characters: `input_cost_per_character`; seconds: `input_cost_per_second` plus `output_cost_per_second` (both are
 *   billed for the same seconds of audio);
 * - images: `output_cost_per_image`; and the entries LiteLLM keys by tier, `{quality}/{W}-x-{H}/{model}` (or
 *   `{W}-x-{H}/{model}`, of the standard quality), priced per pixel: each becomes the image price of the tier
 *   `{quality}/{W}x{H}` of the model's price, and the model's price per image is its dearest tier's (an image of a
 *   tier not listed is never priced below what a listed one costs).
 * An entry priced in none of these is skipped.
 */
import { AppError } from '../../errors.js';
import type { KindPrices } from './price-repo.js';

export interface ImportedPrice extends KindPrices {
  modelPattern: string;
  inputPerMillion: string;
  cachedInputPerMillion: string | null;
  cacheWritePerMillion: string | null;
  outputPerMillion: string;
  reasoningPerMillion: string | null;
}

/** LiteLLM's field -> ours, per million (of tokens, or of characters). */
const PER_MILLION = {
  input_cost_per_token: 'inputPerMillion',
  cache_read_input_token_cost: 'cachedInputPerMillion',
  cache_creation_input_token_cost: 'cacheWritePerMillion',
  output_cost_per_token: 'outputPerMillion',
  output_cost_per_reasoning_token: 'reasoningPerMillion',
  input_cost_per_audio_token: 'audioInputPerMillion',
  output_cost_per_audio_token: 'audioOutputPerMillion',
  input_cost_per_image_token: 'imageInputPerMillion',
  output_cost_per_image_token: 'imageOutputPerMillion',
  input_cost_per_character: 'charactersPerMillion',
} as const;

/** LiteLLM's field -> ours, per unit (an image, a second: summed when both are given). */
const PER_UNIT = {
  output_cost_per_image: 'perImage',
  input_cost_per_second: 'perSecond',
  output_cost_per_second: 'perSecond',
} as const;

/** The fields of an entry keyed by tier, per pixel of its images. */
const PER_PIXEL = ['input_cost_per_pixel', 'output_cost_per_pixel'] as const;

type Ours = (typeof PER_MILLION)[keyof typeof PER_MILLION] | (typeof PER_UNIT)[keyof typeof PER_UNIT];

/** An entry keyed by image tier: its provider prefix (`azure/`), quality (absent: standard), width, height and model. */
const TIER_KEY = /^((?:[^/]+\/)*?)(?:(standard|hd|low|medium|high|auto)\/)?(\d{1,5})-x-(\d{1,5})\/([^/]+)$/;

/** The documentation entry LiteLLM's file starts with. */
const SAMPLE_KEY = 'sample_spec';
const MAX_FRACTION = 12;

/** An exact decimal: `units` / 10^`scale`. */
interface Decimal {
  units: bigint;
  scale: number;
}

/** A non-negative JSON number as an exact decimal; undefined when it is not one. */
function decimalOf(value: number): Decimal | undefined {
  if (!Number.isFinite(value) || value < 0) return undefined;
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(value));
  if (!m) return undefined;
  const fraction = m[2] ?? '';
  const exponent = Number(m[3] ?? 0);
  const scale = fraction.length - exponent;
  const units = BigInt(m[1]! + fraction);
  return scale >= 0 ? { units, scale } : { units: units * 10n ** BigInt(-scale), scale: 0 };
}

const add = (a: Decimal, b: Decimal): Decimal => {
  const scale = Math.max(a.scale, b.scale);
  return { units: a.units * 10n ** BigInt(scale - a.scale) + b.units * 10n ** BigInt(scale - b.scale), scale };
};

/**
 * A decimal times 10^`shift`, as a price's decimal string (at most MAX_FRACTION digits after the point); `roundUp`:
 * digits beyond them round up (a price computed, never below what it costs), else a decimal with more is refused (undefined).
 */
function priceText(d: Decimal, shift: number, roundUp = false): string | undefined {
  let { units } = d;
  let scale = d.scale - shift;
  if (scale < 0) {
    units *= 10n ** BigInt(-scale);
    scale = 0;
  }
  if (scale > MAX_FRACTION) {
    if (!roundUp) {
      const cut = 10n ** BigInt(scale - MAX_FRACTION);
      if (units % cut !== 0n) return undefined;
      units /= cut;
    } else {
      const cut = 10n ** BigInt(scale - MAX_FRACTION);
      units = (units + cut - 1n) / cut;
    }
    scale = MAX_FRACTION;
  }
  const digits = units.toString().padStart(scale + 1, '0');
  const whole = digits.slice(0, digits.length - scale);
  const fraction = digits.slice(digits.length - scale).replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}

/** A non-negative JSON number of USD per token as a decimal string per million tokens; undefined when it is not one. */
export function perMillion(value: number): string | undefined {
  const d = decimalOf(value);
  return d && priceText(d, 6);
}

export interface LiteLlmImport {
  prices: ImportedPrice[];
  /** Entries priced in none of the kinds read, and the sample. */
  skipped: string[];
}

/** A field's value as a decimal, else 400 naming it. */
function fieldDecimal(value: unknown, param: string, what: string): Decimal {
  const d = typeof value === 'number' ? decimalOf(value) : undefined;
  if (d === undefined) throw new AppError('invalid_parameter', `${param} must be a non-negative number of USD ${what}`, { param });
  return d;
}

/** What an entry prices, by our field names; `pixel`: its cost per pixel (of an entry keyed by tier). */
function readEntry(fields: Record<string, unknown>, param: string): { read: Partial<Record<Ours, string>>; pixel?: Decimal } {
  const read: Partial<Record<Ours, string>> = {};
  for (const [field, ours] of Object.entries(PER_MILLION)) {
    const value = fields[field];
    if (value === undefined || value === null) continue;
    const text = priceText(fieldDecimal(value, `${param}.${field}`, 'per token'), 6);
    if (text === undefined) {
      throw new AppError('invalid_parameter', `${param}.${field} must be a non-negative number of USD per token`, {
        param: `${param}.${field}`,
      });
    }
    read[ours] = text;
  }
  const units: Partial<Record<Ours, Decimal>> = {};
  for (const [field, ours] of Object.entries(PER_UNIT)) {
    const value = fields[field];
    if (value === undefined || value === null) continue;
    const d = fieldDecimal(value, `${param}.${field}`, 'per unit');
    units[ours] = units[ours] ? add(units[ours], d) : d;
  }
  for (const [ours, d] of Object.entries(units) as [Ours, Decimal][]) read[ours] = priceText(d, 0, true)!;
  let pixel: Decimal | undefined;
  for (const field of PER_PIXEL) {
    const value = fields[field];
    if (value === undefined || value === null) continue;
    const d = fieldDecimal(value, `${param}.${field}`, 'per pixel');
    pixel = pixel ? add(pixel, d) : d;
  }
  return pixel ? { read, pixel } : { read };
}

/** The price of a model pattern, made once and filled by its entries (the model's own, and its tiers'). */
function priceOf(byPattern: Map<string, ImportedPrice>, pattern: string): ImportedPrice {
  let price = byPattern.get(pattern);
  if (!price) {
    price = {
      modelPattern: pattern,
      inputPerMillion: '0',
      cachedInputPerMillion: null,
      cacheWritePerMillion: null,
      outputPerMillion: '0',
      reasoningPerMillion: null,
    };
    byPattern.set(pattern, price);
  }
  return price;
}

/** An entry keyed by tier: its image price, as the tier's of its model's price. Returns false when the key names no tier. */
function readTier(byPattern: Map<string, ImportedPrice>, key: string, pixel: Decimal): boolean {
  const m = TIER_KEY.exec(key);
  if (!m) return false;
  const [, prefix, quality, width, height, model] = m;
  const perImage = priceText({ units: pixel.units * BigInt(width!) * BigInt(height!), scale: pixel.scale }, 0, true)!;
  const price = priceOf(byPattern, `${prefix}${model}`);
  (price.perImageTier ??= {})[`${quality ?? 'standard'}/${width}x${height}`] = perImage;
  return true;
}

/** A price's amount in 10^-MAX_FRACTION units, to compare two exactly. */
const unitsOf = (text: string): bigint => {
  const [whole, fraction = ''] = text.split('.');
  return BigInt(whole! + fraction.padEnd(MAX_FRACTION, '0'));
};

/** A price with tiers and no price per image of its own: its dearest tier's. */
function dearestTier(price: ImportedPrice): void {
  if (!price.perImageTier || price.perImage !== undefined) return;
  for (const tier of Object.values(price.perImageTier)) {
    if (price.perImage === undefined || unitsOf(tier) > unitsOf(price.perImage)) price.perImage = tier;
  }
}

/** Our fields of the kinds beyond text tokens: an entry that prices one of them is imported without token prices. */
const KINDS: ReadonlySet<string> = new Set<Ours>([
  'audioInputPerMillion',
  'audioOutputPerMillion',
  'imageInputPerMillion',
  'imageOutputPerMillion',
  'charactersPerMillion',
  'perImage',
  'perSecond',
]);

/** Reads the file's object; the first entry or field not in the format refuses it all (400, `param` naming its key). */
export function readLiteLlmPrices(file: Record<string, unknown>): LiteLlmImport {
  const byPattern = new Map<string, ImportedPrice>();
  const skipped: string[] = [];
  for (const [key, entry] of Object.entries(file)) {
    const param = `prices.${key}`;
    if (key === SAMPLE_KEY) {
      skipped.push(key);
      continue;
    }
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) {
      throw new AppError('invalid_parameter', `${param} must be an object of a model's prices`, { param });
    }
    const { read, pixel } = readEntry(entry as Record<string, unknown>, param);
    if (pixel && readTier(byPattern, key, pixel)) continue;
    const tokens = read.inputPerMillion !== undefined && read.outputPerMillion !== undefined;
    if (!tokens && !Object.keys(read).some((field) => KINDS.has(field))) {
      skipped.push(key);
      continue;
    }
    Object.assign(priceOf(byPattern, key), read);
  }
  const prices = [...byPattern.values()];
  prices.forEach(dearestTier);
  return { prices, skipped };
}

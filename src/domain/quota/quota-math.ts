/**
 * Pure quota arithmetic (docs/pricing.md): units of a call (its bound before
 * it, its charge after it), period lengths and the plan-change proration.
 * bigint throughout; no I/O.
 */
import type { Usage } from '../../protocols/usage.js';

const PPM = 1_000_000n;
export const INT64_MAX = 9_223_372_036_854_775_807n;
/**
 * The most units one call may be bounded by or charged: no period holds more, a lease asks for a
 * multiple of a call's bound, which must stay an int8, and a charge beyond it would not fit its records.
 */
export const MAX_CALL_UNITS = 2n ** 58n;

/** A strategy's (or a model rule's) multipliers: parts per million of a unit per token, image, second or character. */
export interface Multipliers {
  inputMultiplierPpm: bigint;
  cachedInputMultiplierPpm: bigint;
  outputMultiplierPpm: bigint;
  // The kinds beyond text (docs/pricing.md, "Kinds"); absent or null, the default of each (KIND_DEFAULTS).
  audioInputMultiplierPpm?: bigint | null;
  audioOutputMultiplierPpm?: bigint | null;
  imageInputMultiplierPpm?: bigint | null;
  imageOutputMultiplierPpm?: bigint | null;
  /** Per image made; an image of a tier listed in imageTierMultipliersPpm (`hd/1024x1792`) takes that tier's. */
  imageMultiplierPpm?: bigint | null;
  imageTierMultipliersPpm?: Readonly<Record<string, bigint>> | null;
  /** Per second of audio. */
  secondMultiplierPpm?: bigint | null;
  /** Per character of text. */
  characterMultiplierPpm?: bigint | null;
}

/**
 * What a kind without a multiplier of its own counts as, so that no kind is ever free for want of one, and none is
 * ever refused: audio and image tokens as input or output tokens (so a strategy written before the kinds charges
 * text exactly what it did); an image as IMAGE_OUTPUT_TOKENS output tokens (what gpt-image-1 makes of a
 * high-quality 1024x1024 image); a second of audio as SECOND_INPUT_TOKENS input tokens (OpenAI's audio models read
 * about 10-17 a second); a character as one input token.
 */
const KIND_DEFAULTS = { IMAGE_OUTPUT_TOKENS: 4_160n, SECOND_INPUT_TOKENS: 20n, CHARACTER_INPUT_TOKENS: 1n } as const;

/** The multiplier of each kind, its default applied. */
function kindRates(m: Multipliers, tier: string | null | undefined) {
  const image = (tier ? m.imageTierMultipliersPpm?.[tier] : undefined) ?? m.imageMultiplierPpm;
  return {
    audioIn: m.audioInputMultiplierPpm ?? m.inputMultiplierPpm,
    audioOut: m.audioOutputMultiplierPpm ?? m.outputMultiplierPpm,
    imageIn: m.imageInputMultiplierPpm ?? m.inputMultiplierPpm,
    imageOut: m.imageOutputMultiplierPpm ?? m.outputMultiplierPpm,
    image: image ?? KIND_DEFAULTS.IMAGE_OUTPUT_TOKENS * m.outputMultiplierPpm,
    second: m.secondMultiplierPpm ?? KIND_DEFAULTS.SECOND_INPUT_TOKENS * m.inputMultiplierPpm,
    character: m.characterMultiplierPpm ?? KIND_DEFAULTS.CHARACTER_INPUT_TOKENS * m.inputMultiplierPpm,
  };
}

const part = (value: bigint | null | undefined): bigint => {
  if (value === null || value === undefined) return 0n;
  if (value < 0n) throw new RangeError('counts must be non-negative');
  return value;
};
const less = (total: bigint, ...parts: bigint[]): bigint => {
  const rest = parts.reduce((left, p) => left - p, total);
  return rest > 0n ? rest : 0n;
};

/**
 * Units of what was counted: ceil(sum of each kind times its multiplier / 1e6), the seconds from milliseconds. Text
 * input is the input less its cached, audio and image parts; text output the output less its audio and image parts.
 * Without the kinds beyond text, ceil((input*in + cached*cached + output*out) / 1e6), as ever.
 */
export function computeUnits(counted: Usage, strategy: Multipliers): bigint {
  const { inputTokens, cachedInputTokens, outputTokens } = counted;
  if (inputTokens < 0n || cachedInputTokens < 0n || outputTokens < 0n) throw new RangeError('token counts must be non-negative');
  const audioIn = part(counted.audioInputTokens);
  const audioOut = part(counted.audioOutputTokens);
  const imageIn = part(counted.imageInputTokens);
  const imageOut = part(counted.imageOutputTokens);
  const rates = kindRates(strategy, counted.imageTier);
  const perMillion =
    less(inputTokens, audioIn, imageIn) * strategy.inputMultiplierPpm +
    cachedInputTokens * strategy.cachedInputMultiplierPpm +
    less(outputTokens, audioOut, imageOut) * strategy.outputMultiplierPpm +
    audioIn * rates.audioIn +
    audioOut * rates.audioOut +
    imageIn * rates.imageIn +
    imageOut * rates.imageOut +
    part(counted.images) * rates.image +
    part(counted.characters) * rates.character;
  const ms = part(counted.audioMs);
  if (ms === 0n) return (perMillion + PPM - 1n) / PPM;
  const perBillion = perMillion * 1000n + ms * rates.second;
  return (perBillion + PPM * 1000n - 1n) / (PPM * 1000n);
}

/**
 * A call's bound, before it is made: every input token it may send at the dearer of the input and
 * cached-input prices (the provider decides what it finds cached), and every output token it may get.
 * `kinds`: the bound of the kinds beyond text its endpoint may use (images, seconds, characters, audio and image
 * tokens as parts of the token bounds).
 */
export function boundUnits(
  inputTokens: bigint,
  outputTokens: bigint,
  strategy: Multipliers,
  kinds?: Omit<Usage, 'inputTokens' | 'cachedInputTokens' | 'outputTokens'>,
): bigint {
  const { inputMultiplierPpm: input, cachedInputMultiplierPpm: cached } = strategy;
  // A token the bound counts as text may come as audio or image (a chat asking for spoken output, say): it is
  // bounded at the dearest rate a token of its side may be charged, so the charge never passes the bound for that.
  const dearer = max(input > cached ? input : cached, strategy.audioInputMultiplierPpm ?? 0n, strategy.imageInputMultiplierPpm ?? 0n);
  const dearestOutput = max(strategy.outputMultiplierPpm, strategy.audioOutputMultiplierPpm ?? 0n, strategy.imageOutputMultiplierPpm ?? 0n);
  return computeUnits(
    { ...kinds, inputTokens, cachedInputTokens: 0n, outputTokens },
    {
      ...strategy,
      inputMultiplierPpm: dearer,
      outputMultiplierPpm: dearestOutput,
      cachedInputMultiplierPpm: 0n,
      // Audio and image input may be found cached too: the dearer rate of their own and the cached one.
      audioInputMultiplierPpm: max(strategy.audioInputMultiplierPpm ?? input, cached),
      imageInputMultiplierPpm: max(strategy.imageInputMultiplierPpm ?? input, cached),
    },
  );
}

const max = (a: bigint, ...rest: bigint[]) => rest.reduce((m, b) => (b > m ? b : m), a);

/**
 * A call's charge for what it used (`inputTokens` counts the cached ones too; an upstream reporting
 * more cached tokens than input tokens in all is taken at its cached figure), at most MAX_CALL_UNITS.
 */
export function chargeUnits(used: Usage, strategy: Multipliers): bigint {
  const uncached = used.inputTokens > used.cachedInputTokens ? used.inputTokens - used.cachedInputTokens : 0n;
  const units = computeUnits({ ...used, inputTokens: uncached }, strategy);
  return units > MAX_CALL_UNITS ? MAX_CALL_UNITS : units;
}

export type ResetInterval = 'MONTH' | 'YEAR';

/**
 * Calendar months in UTC; a day that the target month lacks is clamped to its
 * last day (Jan 31 + 1 month = Feb 28/29), as billing providers do.
 */
export function addInterval(from: Date, interval: ResetInterval, count = 1): Date {
  const months = interval === 'MONTH' ? count : 12 * count;
  const y = from.getUTCFullYear();
  const m = from.getUTCMonth() + months;
  const targetYear = y + Math.floor(m / 12);
  const targetMonth = ((m % 12) + 12) % 12;
  const lastDay = new Date(Date.UTC(targetYear, targetMonth + 1, 0)).getUTCDate();
  const day = Math.min(from.getUTCDate(), lastDay);
  return new Date(
    Date.UTC(targetYear, targetMonth, day, from.getUTCHours(), from.getUTCMinutes(), from.getUTCSeconds(), from.getUTCMilliseconds()),
  );
}

/** floor(units * part / whole) for millisecond spans; part is clamped to [0, whole]. */
export function prorate(units: bigint, partMs: number, wholeMs: number): bigint {
  if (wholeMs <= 0) return 0n;
  const part = BigInt(Math.min(Math.max(partMs, 0), wholeMs));
  return (units * part) / BigInt(wholeMs);
}

export interface PlanChangeInput {
  /**
   * Start of the cycle the period belongs to: its own start, or for a period
   * that an earlier plan change split off, the start of the period it came from.
   */
  cycleStart: Date;
  periodStart: Date;
  periodEnd: Date;
  effectiveAt: Date;
  /** The current period's grant (old plan, or what billing granted). */
  oldGranted: bigint;
  /** consumed + reserved in the current period at the moment of the change. */
  oldUsed: bigint;
  /** quotaUnits of the new plan's strategy in force at effectiveAt. */
  newQuotaUnits: bigint;
  /**
   * Units granted once (top-ups) that `oldGranted` excludes: not prorated, they move to the new part whole, and
   * use beyond the old share is charged against them as against the new share.
   */
  topUpUnits?: bigint;
}

export interface PlanChangeSplit {
  /** The old period's grant once it ends at effectiveAt. */
  oldGranted: bigint;
  /** The grant of the new period [effectiveAt, periodEnd). */
  newGranted: bigint;
  /** The old plan's prorated share of the old period. */
  oldShare: bigint;
  /** What the new period's grant was reduced by for the use beyond oldShare (newShare - newGranted). */
  carried: bigint;
}

/**
 * Time proration, Stripe-style, in units (docs/decisions.md "Changing plan"):
 * the old plan is owed for the elapsed share of the period, the new plan for the
 * remaining share; what was used beyond the old share is carried into the new
 * period, unused old allowance is not.
 */
export function splitPeriodForPlanChange(input: PlanChangeInput): PlanChangeSplit {
  const end = input.periodEnd.getTime();
  const at = input.effectiveAt.getTime();
  // The old grant covered this period's own span; the new plan's quota is for a whole cycle.
  const oldShare = prorate(input.oldGranted, at - input.periodStart.getTime(), end - input.periodStart.getTime());
  const newShare = prorate(input.newQuotaUnits, end - at, end - input.cycleStart.getTime()) + (input.topUpUnits ?? 0n);
  const carried = input.oldUsed > oldShare ? input.oldUsed - oldShare : 0n;
  return {
    oldGranted: input.oldUsed > oldShare ? input.oldUsed : oldShare,
    newGranted: newShare > carried ? newShare - carried : 0n,
    oldShare,
    carried: newShare > carried ? carried : newShare,
  };
}

/**
 * Pure quota arithmetic (docs/pricing.md): units of a call (its bound before
 * it, its charge after it), period lengths and the plan-change proration.
 * bigint throughout; no I/O.
 */
const PPM = 1_000_000n;
export const INT64_MAX = 9_223_372_036_854_775_807n;
/**
 * The most units one call may be bounded by or charged: no period holds more, a lease asks for a
 * multiple of a call's bound, which must stay an int8, and a charge beyond it would not fit its records.
 */
export const MAX_CALL_UNITS = 2n ** 58n;

export interface TokenCounts {
  /** Uncached input tokens. */
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
}

export interface Multipliers {
  inputMultiplierPpm: bigint;
  cachedInputMultiplierPpm: bigint;
  outputMultiplierPpm: bigint;
}

/** ceil((input*in + cached*cached + output*out) / 1e6). */
export function computeUnits(tokens: TokenCounts, strategy: Multipliers): bigint {
  const { inputTokens, cachedInputTokens, outputTokens } = tokens;
  if (inputTokens < 0n || cachedInputTokens < 0n || outputTokens < 0n) throw new RangeError('token counts must be non-negative');
  const scaled =
    inputTokens * strategy.inputMultiplierPpm +
    cachedInputTokens * strategy.cachedInputMultiplierPpm +
    outputTokens * strategy.outputMultiplierPpm;
  return (scaled + PPM - 1n) / PPM;
}

/**
 * A call's bound, before it is made: every input token it may send at the dearer of the input and
 * cached-input prices (the provider decides what it finds cached), and every output token it may get.
 */
export function boundUnits(inputTokens: bigint, outputTokens: bigint, strategy: Multipliers): bigint {
  const { inputMultiplierPpm: input, cachedInputMultiplierPpm: cached } = strategy;
  return computeUnits(
    { inputTokens, cachedInputTokens: 0n, outputTokens },
    {
      inputMultiplierPpm: input > cached ? input : cached,
      cachedInputMultiplierPpm: 0n,
      outputMultiplierPpm: strategy.outputMultiplierPpm,
    },
  );
}

/**
 * A call's charge for what it used (`inputTokens` counts the cached ones too; an upstream reporting
 * more cached tokens than input tokens in all is taken at its cached figure), at most MAX_CALL_UNITS.
 */
export function chargeUnits(used: { inputTokens: bigint; cachedInputTokens: bigint; outputTokens: bigint }, strategy: Multipliers): bigint {
  const uncached = used.inputTokens > used.cachedInputTokens ? used.inputTokens - used.cachedInputTokens : 0n;
  const units = computeUnits(
    { inputTokens: uncached, cachedInputTokens: used.cachedInputTokens, outputTokens: used.outputTokens },
    strategy,
  );
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
  const newShare = prorate(input.newQuotaUnits, end - at, end - input.cycleStart.getTime());
  const carried = input.oldUsed > oldShare ? input.oldUsed - oldShare : 0n;
  return {
    oldGranted: input.oldUsed > oldShare ? input.oldUsed : oldShare,
    newGranted: newShare > carried ? newShare - carried : 0n,
    oldShare,
    carried: newShare > carried ? carried : newShare,
  };
}

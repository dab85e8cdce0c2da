import { describe, expect, it } from 'vitest';
import { canTransition, isExpiryDue } from '../../src/domain/accesses/access-state.js';
import {
  addInterval,
  boundUnits,
  chargeUnits,
  computeUnits,
  INT64_MAX,
  MAX_CALL_UNITS,
  prorate,
  splitPeriodForPlanChange,
} from '../../src/domain/quota/quota-math.js';

const m = (input: bigint, cached: bigint, output: bigint) => ({
  inputMultiplierPpm: input,
  cachedInputMultiplierPpm: cached,
  outputMultiplierPpm: output,
});

describe('computeUnits', () => {
  it.each([
    [{ inputTokens: 1000n, cachedInputTokens: 0n, outputTokens: 0n }, m(1_000_000n, 0n, 0n), 1000n],
    [{ inputTokens: 1n, cachedInputTokens: 0n, outputTokens: 0n }, m(1n, 0n, 0n), 1n], // ceil
    [{ inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n }, m(5n, 5n, 5n), 0n],
    [{ inputTokens: 100n, cachedInputTokens: 400n, outputTokens: 50n }, m(1_000_000n, 250_000n, 4_000_000n), 400n],
    [{ inputTokens: 3n, cachedInputTokens: 0n, outputTokens: 0n }, m(333_333n, 0n, 0n), 1n],
    [{ inputTokens: 3n, cachedInputTokens: 0n, outputTokens: 0n }, m(333_334n, 0n, 0n), 2n],
  ])('%o with %o = %s', (tokens, strategy, expected) => {
    expect(computeUnits(tokens, strategy)).toBe(expected);
  });

  it('does not lose precision near 2^63', () => {
    expect(computeUnits({ inputTokens: INT64_MAX, cachedInputTokens: 0n, outputTokens: 0n }, m(1_000_000n, 0n, 0n))).toBe(INT64_MAX);
  });

  it('refuses negative token counts', () => {
    expect(() => computeUnits({ inputTokens: -1n, cachedInputTokens: 0n, outputTokens: 0n }, m(1n, 1n, 1n))).toThrow(RangeError);
  });
});

describe("a call's bound and charge", () => {
  it('bounds every input token at the dearer of the input and cached prices', () => {
    // 100 input, 10 output: input at 2 (cached dearer than input, 1), output at 3.
    expect(boundUnits(100n, 10n, m(1_000_000n, 2_000_000n, 3_000_000n))).toBe(230n);
    expect(boundUnits(100n, 10n, m(2_000_000n, 1_000_000n, 3_000_000n))).toBe(230n);
    expect(boundUnits(0n, 0n, m(1n, 1n, 1n))).toBe(0n);
  });

  it('charges the uncached input, the cached input and the output at their own prices', () => {
    const used = { inputTokens: 1000n, cachedInputTokens: 400n, outputTokens: 50n };
    // 600 uncached x 1 + 400 cached x 0.25 + 50 x 4.
    expect(chargeUnits(used, m(1_000_000n, 250_000n, 4_000_000n))).toBe(900n);
  });

  it('takes more cached than input tokens at the cached figure, and never charges beyond MAX_CALL_UNITS', () => {
    expect(chargeUnits({ inputTokens: 10n, cachedInputTokens: 40n, outputTokens: 0n }, m(1_000_000n, 500_000n, 0n))).toBe(20n);
    expect(chargeUnits({ inputTokens: INT64_MAX, cachedInputTokens: 0n, outputTokens: INT64_MAX }, m(1_000_000n, 0n, 1_000_000n))).toBe(
      MAX_CALL_UNITS,
    );
  });
});

describe('the kinds beyond text', () => {
  const plain = m(1_000_000n, 250_000n, 4_000_000n);

  it('charges audio and image tokens as input and output tokens when the strategy gives them no multiplier', () => {
    const used = { inputTokens: 1000n, cachedInputTokens: 0n, outputTokens: 500n, audioInputTokens: 800n, imageOutputTokens: 500n };
    expect(chargeUnits(used, plain)).toBe(chargeUnits({ inputTokens: 1000n, cachedInputTokens: 0n, outputTokens: 500n }, plain));
  });

  it('charges each kind at its own multiplier where the strategy gives one', () => {
    const strategy = {
      ...plain,
      audioInputMultiplierPpm: 10_000_000n,
      audioOutputMultiplierPpm: 20_000_000n,
      imageInputMultiplierPpm: 5_000_000n,
      imageOutputMultiplierPpm: 40_000_000n,
    };
    // text in 100 x 1 + audio in 800 x 10 + image in 100 x 5 + text out 50 x 4 + audio out 10 x 20 + image out 40 x 40.
    const used = {
      inputTokens: 1000n,
      cachedInputTokens: 0n,
      outputTokens: 100n,
      audioInputTokens: 800n,
      imageInputTokens: 100n,
      audioOutputTokens: 10n,
      imageOutputTokens: 40n,
    };
    expect(chargeUnits(used, strategy)).toBe(100n + 8000n + 500n + 200n + 200n + 1600n);
  });

  it('charges images per image, by tier where the tier has its own multiplier, else at the default of 4,160 output tokens', () => {
    const tiers = { ...plain, imageMultiplierPpm: 40_000_000n, imageTierMultipliersPpm: { 'hd/1024x1792': 120_000_000n } };
    const images = (count: bigint, imageTier: string) => ({
      inputTokens: 0n,
      cachedInputTokens: 0n,
      outputTokens: 0n,
      images: count,
      imageTier,
    });
    expect(chargeUnits(images(3n, 'standard/1024x1024'), tiers)).toBe(120n);
    expect(chargeUnits(images(3n, 'hd/1024x1792'), tiers)).toBe(360n);
    expect(chargeUnits(images(1n, 'standard/1024x1024'), plain)).toBe(4_160n * 4n);
  });

  it('charges seconds from milliseconds, rounded up once, and characters, each at a default where none is given', () => {
    const audio = (audioMs: bigint) => ({ inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n, audioMs });
    expect(chargeUnits(audio(3_200n), { ...plain, secondMultiplierPpm: 100_000n })).toBe(1n); // 0.32 units
    expect(chargeUnits(audio(60_000n), { ...plain, secondMultiplierPpm: 100_000n })).toBe(6n);
    expect(chargeUnits(audio(1_000n), plain)).toBe(20n); // 20 input tokens a second
    expect(chargeUnits({ inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n, characters: 1_000n }, plain)).toBe(1_000n);
    expect(
      chargeUnits(
        { inputTokens: 0n, cachedInputTokens: 0n, outputTokens: 0n, characters: 1_000n },
        { ...plain, characterMultiplierPpm: 15n },
      ),
    ).toBe(1n);
  });

  it("bounds a call's kinds at their dearer input rate, as it bounds text", () => {
    const strategy = { ...plain, cachedInputMultiplierPpm: 2_000_000n };
    expect(boundUnits(100n, 10n, strategy, { audioInputTokens: 100n })).toBe(boundUnits(100n, 10n, strategy));
    expect(boundUnits(0n, 0n, strategy, { images: 2n, imageTier: 'hd/1024x1024' })).toBe(2n * 4_160n * 4n);
  });

  it('bounds tokens that may come as audio or image at the dearest rate of their side, so their charge never passes it', () => {
    // 1 / 2 units per text input / output token; audio at 10 / 20.
    const audio = { ...plain, inputMultiplierPpm: 1_000_000n, outputMultiplierPpm: 2_000_000n, cachedInputMultiplierPpm: 1_000_000n };
    const dear = { ...audio, audioInputMultiplierPpm: 10_000_000n, audioOutputMultiplierPpm: 20_000_000n };
    expect(boundUnits(100n, 50n, audio)).toBe(100n + 100n);
    expect(boundUnits(100n, 50n, dear)).toBe(1_000n + 1_000n);
    // Whatever part of the bound comes as audio, the charge is within it.
    for (const [audioIn, audioOut] of [
      [0n, 0n],
      [40n, 30n],
      [100n, 50n],
    ] as const) {
      const used = { inputTokens: 100n, cachedInputTokens: 0n, outputTokens: 50n, audioInputTokens: audioIn, audioOutputTokens: audioOut };
      expect(chargeUnits(used, dear)).toBeLessThanOrEqual(boundUnits(100n, 50n, dear));
    }
  });
});

describe('addInterval', () => {
  it.each([
    ['2026-01-15T10:00:00.000Z', 'MONTH', '2026-02-15T10:00:00.000Z'],
    ['2026-01-31T00:00:00.000Z', 'MONTH', '2026-02-28T00:00:00.000Z'],
    ['2028-01-31T00:00:00.000Z', 'MONTH', '2028-02-29T00:00:00.000Z'],
    ['2026-12-31T23:59:59.999Z', 'MONTH', '2027-01-31T23:59:59.999Z'],
    ['2028-02-29T00:00:00.000Z', 'YEAR', '2029-02-28T00:00:00.000Z'],
  ] as const)('%s + 1 %s = %s', (from, interval, expected) => {
    expect(addInterval(new Date(from), interval).toISOString()).toBe(expected);
  });
});

describe('plan change proration', () => {
  const start = new Date('2026-11-01T00:00:00Z');
  const end = new Date('2026-12-01T00:00:00Z'); // 30 days
  const at = (day: number) => new Date(start.getTime() + day * 86_400_000);

  it('halfway, nothing used: old keeps half its grant, new gets half of its own', () => {
    expect(
      splitPeriodForPlanChange({
        cycleStart: start,
        periodStart: start,
        periodEnd: end,
        effectiveAt: at(15),
        oldGranted: 1000n,
        oldUsed: 0n,
        newQuotaUnits: 3000n,
      }),
    ).toEqual({ oldGranted: 500n, newGranted: 1500n, oldShare: 500n, carried: 0n });
  });

  it('an upgrade after using everything: what was used beyond the old share is carried into the new period', () => {
    expect(
      splitPeriodForPlanChange({
        cycleStart: start,
        periodStart: start,
        periodEnd: end,
        effectiveAt: at(15),
        oldGranted: 1000n,
        oldUsed: 1000n,
        newQuotaUnits: 3000n,
      }),
    ).toEqual({ oldGranted: 1000n, newGranted: 1000n, oldShare: 500n, carried: 500n });
  });

  it('a downgrade after heavy use can leave nothing for the rest of the period, never less than zero', () => {
    // 2000 used beyond the old share, but the new part had only 400 to be charged for it.
    expect(
      splitPeriodForPlanChange({
        cycleStart: start,
        periodStart: start,
        periodEnd: end,
        effectiveAt: at(10),
        oldGranted: 3000n,
        oldUsed: 3000n,
        newQuotaUnits: 600n,
      }),
    ).toEqual({ oldGranted: 3000n, newGranted: 0n, oldShare: 1000n, carried: 400n });
  });

  it('switching back and forth cannot mint units', () => {
    const first = splitPeriodForPlanChange({
      cycleStart: start,
      periodStart: start,
      periodEnd: end,
      effectiveAt: at(10),
      oldGranted: 3000n,
      oldUsed: 0n,
      newQuotaUnits: 3000n,
    });
    const back = splitPeriodForPlanChange({
      cycleStart: start,
      periodStart: at(10),
      periodEnd: end,
      effectiveAt: at(10.5),
      oldGranted: first.newGranted,
      oldUsed: 0n,
      newQuotaUnits: 3000n,
    });
    expect(first).toEqual({ oldGranted: 1000n, newGranted: 2000n, oldShare: 1000n, carried: 0n });
    expect(back).toEqual({ oldGranted: 50n, newGranted: 1950n, oldShare: 50n, carried: 0n });
    expect(first.oldGranted + back.oldGranted + back.newGranted).toBe(3000n);
  });

  it('prorate floors and clamps', () => {
    expect(prorate(10n, 1, 3)).toBe(3n);
    expect(prorate(10n, 5, 3)).toBe(10n);
    expect(prorate(10n, -1, 3)).toBe(0n);
  });
});

describe('access state machine', () => {
  it.each([
    ['PENDING', 'ACTIVE', true],
    ['PENDING', 'SUSPENDED', false],
    ['ACTIVE', 'SUSPENDED', true],
    ['SUSPENDED', 'ACTIVE', true],
    ['ACTIVE', 'EXPIRED', true],
    ['EXPIRED', 'ACTIVE', true],
    ['EXPIRED', 'SUSPENDED', false],
    ['REVOKED', 'ACTIVE', false],
    ['REVOKED', 'EXPIRED', false],
    ['SUSPENDED', 'REVOKED', true],
  ] as const)('%s -> %s: %s', (from, to, allowed) => {
    expect(canTransition(from, to)).toBe(allowed);
  });

  it('expiry is due at accessEndsAt or at the end of the last period, never for REVOKED or EXPIRED', () => {
    const now = new Date('2026-11-22T00:00:00Z');
    const before = new Date(now.getTime() - 1);
    const after = new Date(now.getTime() + 1);
    expect(isExpiryDue({ status: 'ACTIVE', access_ends_at: now }, after, now)).toBe(true);
    expect(isExpiryDue({ status: 'ACTIVE', access_ends_at: null }, now, now)).toBe(true);
    expect(isExpiryDue({ status: 'SUSPENDED', access_ends_at: null }, before, now)).toBe(true);
    expect(isExpiryDue({ status: 'ACTIVE', access_ends_at: null }, after, now)).toBe(false);
    expect(isExpiryDue({ status: 'PENDING', access_ends_at: null }, undefined, now)).toBe(false);
    expect(isExpiryDue({ status: 'REVOKED', access_ends_at: before }, before, now)).toBe(false);
    expect(isExpiryDue({ status: 'EXPIRED', access_ends_at: before }, before, now)).toBe(false);
  });
});

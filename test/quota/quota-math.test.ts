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

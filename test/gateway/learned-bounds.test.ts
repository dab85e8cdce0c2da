/** The output bounds learned from answers past their calls' bounds (src/gateway/learned-bounds.ts), on a fixed clock. */
import { describe, expect, it } from 'vitest';
import { createLearnedBounds } from '../../src/gateway/learned-bounds.js';

function fixedClock() {
  let ms = Date.parse('2026-11-26T12:00:00Z');
  return { now: () => new Date(ms), advance: (by: number) => void (ms += by) };
}

describe('learned output bounds', () => {
  it('keep the largest output seen past a bound, per connection, model and kind of answer', () => {
    const clock = fixedClock();
    const learned = createLearnedBounds(clock);
    expect(learned.output('c1', 'm', false)).toBe(0n);
    learned.observed('c1', 'm', false, 2000n);
    learned.observed('c1', 'm', false, 1500n);
    expect(learned.output('c1', 'm', false)).toBe(2000n);
    learned.observed('c1', 'm', false, 3000n);
    expect(learned.output('c1', 'm', false)).toBe(3000n);
    // Another connection, another model, a stream: nothing learned for them.
    expect(learned.output('c2', 'm', false)).toBe(0n);
    expect(learned.output('c1', 'm2', false)).toBe(0n);
    expect(learned.output('c1', 'm', true)).toBe(0n);
  });

  it('are capped at 1,000,000 tokens', () => {
    const learned = createLearnedBounds(fixedClock());
    learned.observed('c', 'm', false, 9_000_000_000_000_000_000n);
    expect(learned.output('c', 'm', false)).toBe(1_000_000n);
  });

  it('hold 15 minutes after the last answer past its bound, then are forgotten', () => {
    const clock = fixedClock();
    const learned = createLearnedBounds(clock);
    learned.observed('c', 'm', false, 2000n);
    clock.advance(14 * 60_000);
    expect(learned.output('c', 'm', false)).toBe(2000n);
    // Another answer past its bound: 15 more minutes from now.
    learned.observed('c', 'm', false, 100n);
    clock.advance(14 * 60_000);
    expect(learned.output('c', 'm', false)).toBe(2000n);
    clock.advance(60_000);
    expect(learned.output('c', 'm', false)).toBe(0n);
    // Learned again from scratch: the old figure is gone.
    learned.observed('c', 'm', false, 100n);
    expect(learned.output('c', 'm', false)).toBe(100n);
  });

  it('say when to tell the other processes: a new or larger bound, or one not told for 5 minutes', () => {
    const clock = fixedClock();
    const learned = createLearnedBounds(clock);
    expect(learned.observed('c', 'm', false, 2000n)).toBe(2000n);
    expect(learned.observed('c', 'm', false, 2000n)).toBeNull();
    expect(learned.observed('c', 'm', false, 1000n)).toBeNull();
    expect(learned.observed('c', 'm', false, 2500n)).toBe(2500n);
    clock.advance(4 * 60_000);
    expect(learned.observed('c', 'm', false, 100n)).toBeNull();
    clock.advance(60_000);
    expect(learned.observed('c', 'm', false, 100n)).toBe(2500n);
  });
});

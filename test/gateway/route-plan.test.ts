/**
 * A route's pure rules (src/gateway/route-plan.ts): the order targets are tried in by strategy, the
 * weighted draw over thousands of calls, and the backoff between retries.
 */
import { describe, expect, it } from 'vitest';
import type { RouteTarget } from '../../src/domain/routes/route-types.js';
import { backoffMs, orderTargets } from '../../src/gateway/route-plan.js';
import { prng } from '../support/prng.js';

const target = (id: string, weight = 1): RouteTarget => ({ providerConnectionId: id, weight, attempts: 1 });
const idle = () => 0;

describe('orderTargets', () => {
  it('fallback keeps the listed order', () => {
    const targets = [target('a'), target('b'), target('c')];
    expect(orderTargets('fallback', targets, prng(1), idle).map((t) => t.providerConnectionId)).toEqual(['a', 'b', 'c']);
  });

  it('loadbalance 3:1 over 4000 calls serves 75% +- 3% from the first target, the other always next', () => {
    const targets = [target('a', 3), target('b', 1)];
    const random = prng(29);
    let first = 0;
    for (let i = 0; i < 4000; i++) {
      const order = orderTargets('loadbalance', targets, random, idle).map((t) => t.providerConnectionId);
      expect(order).toEqual(order[0] === 'a' ? ['a', 'b'] : ['b', 'a']);
      if (order[0] === 'a') first++;
    }
    expect(Math.abs(first / 4000 - 0.75)).toBeLessThanOrEqual(0.03);
  });

  it.each([1, 2, 3, 4, 5])('loadbalance holds the weights whatever the seed (seed %i)', (seed) => {
    const targets = [target('a', 3), target('b', 1)];
    const random = prng(seed);
    let first = 0;
    for (let i = 0; i < 4000; i++) if (orderTargets('loadbalance', targets, random, idle)[0]!.providerConnectionId === 'a') first++;
    expect(Math.abs(first / 4000 - 0.75)).toBeLessThanOrEqual(0.03);
  });

  it('loadbalance draws the weighted target first, the rest in the listed order after it', () => {
    const targets = [target('a', 1), target('b', 1), target('c', 2)];
    // 0.6 of a total of 4 is 2.4: past a (1) and b (2), inside c.
    expect(orderTargets('loadbalance', targets, () => 0.6, idle).map((t) => t.providerConnectionId)).toEqual(['c', 'a', 'b']);
    expect(orderTargets('loadbalance', targets, () => 0.3, idle).map((t) => t.providerConnectionId)).toEqual(['b', 'a', 'c']);
  });

  it('least-busy puts the fewest calls in flight first, ties in the listed order', () => {
    const busy: Record<string, number> = { a: 3, b: 1, c: 1 };
    const targets = [target('a'), target('b'), target('c')];
    expect(orderTargets('least-busy', targets, prng(1), (id) => busy[id]!).map((t) => t.providerConnectionId)).toEqual(['b', 'c', 'a']);
  });
});

describe('backoffMs', () => {
  const retry = { baseDelayMs: 200, maxDelayMs: 1000 };
  it('doubles from the base with jitter 0.8-1.2, up to the max', () => {
    expect(backoffMs(1, retry, () => 0)).toBe(160);
    expect(backoffMs(1, retry, () => 0.999999)).toBe(240);
    expect(backoffMs(2, retry, () => 0.5)).toBe(400);
    expect(backoffMs(5, retry, () => 0.5)).toBe(1000);
  });
  it("takes the answer's Retry-After when it gave one", () => {
    expect(backoffMs(1, retry, () => 0.5, 3000)).toBe(3000);
  });
});

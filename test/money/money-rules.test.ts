/** The pure rules of money: LiteLLM's per-token prices read exactly, and a budget's window and levels. */
import { describe, expect, it } from 'vitest';
import { budgetLevels, budgetWindow } from '../../src/domain/budgets/budget-rule.js';
import type { BudgetRow } from '../../src/domain/budgets/budget-repo.js';
import { perMillion } from '../../src/domain/prices/litellm-import.js';

describe('perMillion', () => {
  it.each([
    [2.5e-6, '2.5'],
    [1e-5, '10'],
    [1.5e-7, '0.15'],
    [7.5e-8, '0.075'],
    [0, '0'],
    [3, '3000000'],
    [0.000001, '1'],
    [1.23456789e-10, '0.000123456789'],
  ])('%s USD per token is %s per million', (value, expected) => {
    expect(perMillion(value)).toBe(expected);
  });

  it('refuses what is not a non-negative price of at most 12 decimals per million', () => {
    expect(perMillion(-1e-6)).toBeUndefined();
    expect(perMillion(Number.NaN)).toBeUndefined();
    expect(perMillion(1e-20)).toBeUndefined();
  });
});

describe('the budget rule', () => {
  const budget = (o: Partial<BudgetRow> = {}): BudgetRow => ({
    workspace_id: 'w',
    period: 'MONTH',
    soft_micros: 100n,
    hard_micros: 200n,
    soft_crossed_window: null,
    hard_crossed_window: null,
    hard_exceeded_until: null,
    updated_at: new Date(0),
    ...o,
  });

  it("windows are the day or calendar month in the workspace's time zone", () => {
    expect(budgetWindow('DAY', new Date('2026-11-27T23:59:59Z'), 'UTC')).toEqual({
      start: new Date('2026-11-27T00:00:00Z'),
      end: new Date('2026-11-28T00:00:00Z'),
    });
    expect(budgetWindow('MONTH', new Date('2026-12-31T12:00:00Z'), 'UTC')).toEqual({
      start: new Date('2026-12-01T00:00:00Z'),
      end: new Date('2027-01-01T00:00:00Z'),
    });
    // 23:30 UTC on 30 November is already December in Paris (UTC+1).
    expect(budgetWindow('MONTH', new Date('2026-11-30T23:30:00Z'), 'Europe/Paris')).toEqual({
      start: new Date('2026-11-30T23:00:00Z'),
      end: new Date('2026-12-31T23:00:00Z'),
    });
    // New York's March has a day of 23 hours: the month starts at UTC-5 and ends at UTC-4.
    expect(budgetWindow('MONTH', new Date('2026-03-15T12:00:00Z'), 'America/New_York')).toEqual({
      start: new Date('2026-03-01T05:00:00Z'),
      end: new Date('2026-04-01T04:00:00Z'),
    });
    expect(budgetWindow('DAY', new Date('2026-03-08T12:00:00Z'), 'America/New_York')).toEqual({
      start: new Date('2026-03-08T05:00:00Z'),
      end: new Date('2026-03-09T04:00:00Z'),
    });
    // A zone ahead of UTC by more than half a day: 13:00 UTC on 31 May is 1 June in Kiritimati (UTC+14).
    expect(budgetWindow('MONTH', new Date('2026-05-31T13:00:00Z'), 'Pacific/Kiritimati').start).toEqual(new Date('2026-05-31T10:00:00Z'));
  });

  it('reports each level crossed once per window, and refuses until the window ends', () => {
    const window = budgetWindow('MONTH', new Date('2026-11-15T00:00:00Z'), 'UTC');
    expect(budgetLevels(budget(), 99n, window).newlyCrossed).toEqual([]);
    const soft = budgetLevels(budget(), 100n, window);
    expect(soft).toMatchObject({ softCrossed: true, hardCrossed: false, newlyCrossed: ['soft'] });
    const both = budgetLevels(budget(soft.state), 250n, window);
    expect(both).toMatchObject({ softCrossed: true, hardCrossed: true, newlyCrossed: ['hard'] });
    expect(both.state.hard_exceeded_until).toEqual(window.end);
    // Again in the same window: nothing new.
    expect(budgetLevels(budget(both.state), 300n, window).newlyCrossed).toEqual([]);
    // The next month: crossed anew, once.
    const next = budgetWindow('MONTH', new Date('2026-12-02T00:00:00Z'), 'UTC');
    expect(budgetLevels(budget(both.state), 300n, next).newlyCrossed).toEqual(['soft', 'hard']);
    // Raised above the spend: no longer refused.
    expect(budgetLevels(budget({ ...both.state, hard_micros: 1000n }), 250n, window).state.hard_exceeded_until).toBeNull();
  });
});

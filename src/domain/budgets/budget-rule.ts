/**
 * The budget rule, pure: a budget's window at a time, and which of its levels the spend crosses. Every change of a
 * budget's state (a batch of calls recorded, the budget set) goes through `budgetLevels`, so a level is reported
 * crossed once per window, whoever noticed.
 */
import { localDate, localMidnight } from '../workspaces/time-zone.js';
import type { BudgetPeriod, BudgetRow } from './budget-repo.js';

export interface BudgetWindow {
  start: Date;
  end: Date;
}

/**
 * The day or month in `timeZone` (the workspace's) that holds `at`: from its local midnight to the next one (a day is
 * 23 to 25 hours long where the zone changes its clocks).
 */
export function budgetWindow(period: BudgetPeriod, at: Date, timeZone: string): BudgetWindow {
  const { year, month, day } = localDate(at, timeZone);
  if (period === 'DAY') return { start: localMidnight(year, month, day, timeZone), end: localMidnight(year, month, day + 1, timeZone) };
  return { start: localMidnight(year, month, 1, timeZone), end: localMidnight(year, month + 1, 1, timeZone) };
}

type BudgetLevel = 'soft' | 'hard';

export interface BudgetLevels {
  softCrossed: boolean;
  hardCrossed: boolean;
  /** The levels crossed in this window that were not yet reported crossed in it. */
  newlyCrossed: BudgetLevel[];
  /** The budget row's state to write (unchanged fields as they were). */
  state: Pick<BudgetRow, 'soft_crossed_window' | 'hard_crossed_window' | 'hard_exceeded_until'>;
}

/** The levels `spent` reaches in `window`: a level is crossed when the spend is at or above it. */
export function budgetLevels(budget: BudgetRow, spent: bigint, window: BudgetWindow): BudgetLevels {
  const softCrossed = budget.soft_micros !== null && spent >= budget.soft_micros;
  const hardCrossed = budget.hard_micros !== null && spent >= budget.hard_micros;
  const inWindow = (d: Date | null) => d !== null && d.getTime() === window.start.getTime();
  const newlyCrossed: BudgetLevel[] = [];
  if (softCrossed && !inWindow(budget.soft_crossed_window)) newlyCrossed.push('soft');
  if (hardCrossed && !inWindow(budget.hard_crossed_window)) newlyCrossed.push('hard');
  return {
    softCrossed,
    hardCrossed,
    newlyCrossed,
    state: {
      soft_crossed_window: softCrossed ? window.start : budget.soft_crossed_window,
      hard_crossed_window: hardCrossed ? window.start : budget.hard_crossed_window,
      hard_exceeded_until: hardCrossed ? window.end : null,
    },
  };
}

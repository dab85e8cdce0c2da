/**
 * Ranges of time as operators think of them: today, this week, this month and last month in the operator's time
 * zone (the browser's: Date's local fields are that zone's), the rolling ranges, and a custom range of whole days
 * picked with date inputs. A range resolves to the instants the API takes and the granularity that suits it.
 */

export type Granularity = 'hour' | 'day';

export type Preset = 'today' | 'week' | 'month' | 'lastMonth' | '24h' | '7d' | '30d' | '365d' | 'custom';

export const PRESETS: Record<Preset, string> = {
  today: 'Today',
  week: 'This week',
  month: 'This month',
  lastMonth: 'Last month',
  '24h': 'Last 24 hours',
  '7d': 'Last 7 days',
  '30d': 'Last 30 days',
  '365d': 'Last 365 days',
  custom: 'Custom dates',
};

/** A range as the page keeps it: a preset, and for `custom` its first and last days (yyyy-mm-dd, both included). */
export interface RangeChoice {
  preset: Preset;
  from: string;
  to: string;
}

export interface Range {
  since: Date;
  until: Date;
  granularity: Granularity;
}

const DAY_MS = 86_400_000;

/** The local midnight of a date (month and day may overflow: day 0 is the last of the month before). */
const midnight = (year: number, month: number, day: number) => new Date(year, month, day);

/** A date input's value (yyyy-mm-dd) of the local date of `d`. */
function dateValue(d: Date): string {
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

/** A date input's value as its local midnight; undefined when it is not one. */
function dateOf(value: string): Date | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  return m ? midnight(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : undefined;
}

/** Hours for a range of at most a week (a summary holds at most 1000 buckets), else days. */
const granularityOf = (since: Date, until: Date): Granularity => (until.getTime() - since.getTime() <= 7 * DAY_MS ? 'hour' : 'day');

/**
 * The instants of a range at `now`. A calendar range (today, this week from Monday, this month) ends at its end,
 * not now, so its buckets to come are drawn empty and a day's table has the whole of it; a custom range runs from
 * its first day's midnight to the midnight after its last. A custom range not yet whole (a date left empty, or the
 * last before the first) is undefined.
 */
export function resolveRange(choice: RangeChoice, now = new Date()): Range | undefined {
  const y = now.getFullYear();
  const m = now.getMonth();
  const d = now.getDate();
  const rolling = (ms: number, granularity: Granularity) => ({ since: new Date(now.getTime() - ms), until: now, granularity });
  switch (choice.preset) {
    case 'today':
      return { since: midnight(y, m, d), until: midnight(y, m, d + 1), granularity: 'hour' };
    case 'week': {
      // ISO weeks: Monday first (getDay: Sunday is 0).
      const monday = d - ((now.getDay() + 6) % 7);
      return { since: midnight(y, m, monday), until: midnight(y, m, monday + 7), granularity: 'day' };
    }
    case 'month':
      return { since: midnight(y, m, 1), until: midnight(y, m + 1, 1), granularity: 'day' };
    case 'lastMonth':
      return { since: midnight(y, m - 1, 1), until: midnight(y, m, 1), granularity: 'day' };
    case '24h':
      return rolling(DAY_MS, 'hour');
    case '7d':
      return rolling(7 * DAY_MS, 'hour');
    case '30d':
      return rolling(30 * DAY_MS, 'day');
    case '365d':
      return rolling(365 * DAY_MS, 'day');
    case 'custom': {
      const first = dateOf(choice.from);
      const last = dateOf(choice.to);
      if (!first || !last || last < first) return undefined;
      const until = midnight(last.getFullYear(), last.getMonth(), last.getDate() + 1);
      return { since: first, until, granularity: granularityOf(first, until) };
    }
  }
}

/** The range a page opens with: this month's first day to today, for when the operator turns to custom dates. */
export function initialRange(preset: Preset = 'today'): RangeChoice {
  const now = new Date();
  return { preset, from: dateValue(midnight(now.getFullYear(), now.getMonth(), 1)), to: dateValue(now) };
}

/** The range's days as a person reads them: "1 Dec 2026 – 6 Dec 2026" (its last day is the one before `until`). */
export function rangeText(range: Range): string {
  const day = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short', year: 'numeric' });
  const hourly = range.granularity === 'hour' && range.until.getTime() - range.since.getTime() < DAY_MS + 1;
  if (hourly && range.since.getHours() !== 0) {
    const at = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
    return `${at.format(range.since)} – ${at.format(range.until)}`;
  }
  const last = new Date(range.until.getTime() - 1);
  return day.format(range.since) === day.format(last) ? day.format(range.since) : `${day.format(range.since)} – ${day.format(last)}`;
}

/** How the console writes times, counts, factors and money, as the operator's locale does; and the datetime inputs' values. */

export const when = (iso: string | undefined | null) => (iso ? new Date(iso).toLocaleString() : '—');

const numbers = new Intl.NumberFormat();

/** A count as the operator's locale writes it (26,002), from a number or an int64 decimal string, without rounding. */
export function formatNumber(value: number | bigint | string | undefined | null): string {
  if (value === undefined || value === null || value === '') return '—';
  if (typeof value === 'string') return /^-?\d+$/.test(value) ? numbers.format(BigInt(value)) : value;
  return numbers.format(value);
}

/** A multiplier in parts per million as a factor: 1000000 → ×1, 4000000 → ×4, 250000 → ×0.25. */
export function multiplier(ppm: string | number): string {
  return `×${new Intl.NumberFormat(undefined, { maximumFractionDigits: 6 }).format(Number(ppm) / 1_000_000)}`;
}

const moneyFormats = new Map<string, Intl.NumberFormat>();

/**
 * The decimals of a currency's minor unit (ISO 4217, as the browser knows it): USD 2, JPY 0, KWD 3; 2 for a code
 * it does not know.
 */
export function minorDigits(currency: string): number {
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().minimumFractionDigits ?? 2;
  } catch {
    return 2;
  }
}

/**
 * One formatter per currency and number of decimals: at least the currency's minor unit (a cent; none for a yen),
 * at most six (a micro-unit, the API's precision); `decimals` fixes them, so a column's amounts line up.
 */
function moneyFormat(currency: string, decimals?: number): Intl.NumberFormat {
  const key = `${currency}/${decimals ?? ''}`;
  let format = moneyFormats.get(key);
  if (!format) {
    const digits = { minimumFractionDigits: decimals ?? minorDigits(currency), maximumFractionDigits: decimals ?? 6 };
    try {
      format = new Intl.NumberFormat(undefined, { style: 'currency', currency, ...digits });
    } catch {
      // A code the browser does not know: the amount with the code after it.
      format = new Intl.NumberFormat(undefined, digits);
    }
    moneyFormats.set(key, format);
  }
  return format;
}

/**
 * The decimals a column of amounts (millionths of `currency`) needs so that each is exact and all have as many: the
 * currency's minor unit for whole cents (2 for USD, 0 for whole yen), up to 6 ($0.024 and $0.06 are written $0.024
 * and $0.060; a tiny per-call cost, $0.000012, is never $0.00).
 */
export function moneyDecimals(amounts: Iterable<bigint | string | number | undefined | null>, currency: string): number {
  let decimals = minorDigits(currency);
  for (const amount of amounts) {
    if (amount === undefined || amount === null || amount === '') continue;
    const m = typeof amount === 'bigint' ? amount : BigInt(typeof amount === 'number' ? Math.round(amount) : amount);
    let rest = m < 0n ? -m : m;
    let needed = 6;
    while (needed > decimals && rest % 10n === 0n) {
      rest /= 10n;
      needed--;
    }
    decimals = Math.max(decimals, needed);
  }
  return decimals;
}

/**
 * An amount in millionths of `currency` (the API's costMicros, a decimal string) as the operator's locale writes it:
 * 24000 USD → $0.024; with `decimals` (moneyDecimals of its column), as many as its column's. Formatted from its
 * exact decimal, so a large total is not rounded through a float.
 */
export function formatMoney(micros: bigint | string | number | undefined | null, currency: string, decimals?: number): string {
  if (micros === undefined || micros === null || micros === '') return '—';
  const m = typeof micros === 'bigint' ? micros : BigInt(typeof micros === 'number' ? Math.round(micros) : micros);
  const abs = m < 0n ? -m : m;
  const decimal = `${m < 0n ? '-' : ''}${abs / 1_000_000n}.${String(abs % 1_000_000n).padStart(6, '0')}`;
  const format = moneyFormat(currency, decimals);
  // Intl formats a decimal string exactly (the lib's type knows only numbers and bigints).
  const text = format.format(decimal as unknown as number);
  return format.resolvedOptions().style === 'currency' ? text : `${text} ${currency}`;
}

/** A decimal amount as typed (12, 12.5, 0.000001) → millionths, exactly: '12.5' → '12500000'; undefined when it is not one. */
export function microsOf(amount: string): string | undefined {
  const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(amount.trim());
  if (!match) return undefined;
  return String(BigInt(match[1]!) * 1_000_000n + BigInt((match[2] ?? '').padEnd(6, '0')));
}

/** A datetime-local input's value (the operator's local time) as RFC 3339 UTC. */
export const toInstant = (local: string) => new Date(local).toISOString();

/** A range typed in the operator's local time, as the API's instants: a bound left empty is not sent. */
export function rangeOf(since: string, until: string): { since?: string; until?: string } {
  return { ...(since ? { since: toInstant(since) } : {}), ...(until ? { until: toInstant(until) } : {}) };
}

/** Now, to the minute, as a datetime-local input's value (the operator's local time). */
export function localNow(offsetMs = 0): string {
  return localValue(new Date(Date.now() + offsetMs));
}

/** An instant, to the minute, as a datetime-local input's value (the operator's local time). */
export function localValue(at: Date): string {
  const d = new Date(at);
  d.setSeconds(0, 0);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/**
 * The console's money (console/src/format.ts): an amount in millionths written with its currency's decimals (a yen
 * has none, a dollar two, a dinar three), a column of amounts with as many decimals as its most precise needs, and a
 * tiny per-call cost never written as zero. Node formats as the browser does (full ICU), in the en-US locale here.
 */
import { describe, expect, it } from 'vitest';
import { formatMoney, minorDigits, moneyDecimals } from '../../console/src/format.js';

// The tests read the amounts in the en-US locale, whatever the machine's.
const en = (text: string) => text.replace(/\u00a0/g, ' ');

describe('the console writes money with the decimals of its currency', () => {
  it("knows each currency's minor unit, and two for a code the runtime does not know", () => {
    expect(minorDigits('USD')).toBe(2);
    expect(minorDigits('EUR')).toBe(2);
    expect(minorDigits('JPY')).toBe(0);
    expect(minorDigits('KRW')).toBe(0);
    expect(minorDigits('KWD')).toBe(3);
    expect(minorDigits('XYZ')).toBe(2);
  });

  it('writes whole amounts with the minor unit only: ¥1,235 and $12.50, not ¥1,235.00 and $12.5', () => {
    expect(Intl.NumberFormat().resolvedOptions().locale.startsWith('en')).toBe(true);
    expect(en(formatMoney('1235000000', 'JPY'))).toBe('¥1,235');
    expect(en(formatMoney('12500000', 'USD'))).toBe('$12.50');
    expect(en(formatMoney('0', 'USD'))).toBe('$0.00');
    expect(en(formatMoney('0', 'JPY'))).toBe('¥0');
    expect(en(formatMoney('1500000', 'KWD'))).toBe('KWD 1.500');
    expect(en(formatMoney('-2000000', 'USD'))).toBe('-$2.00');
  });

  it('writes a tiny per-call cost exactly, never as zero: $0.000012, ¥0.0024', () => {
    expect(en(formatMoney('12', 'USD'))).toBe('$0.000012');
    expect(en(formatMoney('24000', 'USD'))).toBe('$0.024');
    expect(en(formatMoney('2400', 'JPY'))).toBe('¥0.0024');
    expect(en(formatMoney('1', 'JPY'))).toBe('¥0.000001');
  });

  it("gives a column as many decimals as its most precise amount needs, from the currency's minor unit", () => {
    expect(moneyDecimals(['12000000', '500000'], 'USD')).toBe(2);
    expect(moneyDecimals(['24000', '60000'], 'USD')).toBe(3);
    expect(moneyDecimals(['12', undefined, null, ''], 'USD')).toBe(6);
    expect(moneyDecimals(['3000000', '7000000'], 'JPY')).toBe(0);
    expect(moneyDecimals(['3000000', '500000'], 'JPY')).toBe(1);
    expect(moneyDecimals([], 'KWD')).toBe(3);
    // Aligned: $0.024 and $0.060, not $0.024 and $0.06; yen in a column of whole yen have no decimals.
    const usd = moneyDecimals(['24000', '60000'], 'USD');
    expect(['24000', '60000'].map((m) => en(formatMoney(m, 'USD', usd)))).toEqual(['$0.024', '$0.060']);
    const jpy = moneyDecimals(['3000000', '12000000'], 'JPY');
    expect(['3000000', '12000000'].map((m) => en(formatMoney(m, 'JPY', jpy)))).toEqual(['¥3', '¥12']);
    // A large total is written exactly, not through a float.
    expect(en(formatMoney('123456789012345678', 'USD', 6))).toBe('$123,456,789,012.345678');
  });
});

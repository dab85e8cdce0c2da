import { describe, expect, it } from 'vitest';
import { isoTime, jsonArray, RowJson } from '../../src/db/row-json.js';

describe('row JSON', () => {
  it('writes each kind of field as JSON.parse reads it back, and leaves null fields out', () => {
    const text = new RowJson()
      .id('id', '0190b1a0-0000-7000-8000-000000000001')
      .str('plain', 'chat/completions')
      .str('quoted', 'say "hi"\n\\ \u2028 \u0001')
      .str('missing', null)
      .num('ms', 0.61)
      .num('none', null)
      .num('not_finite', Number.NaN)
      .big('units', 2n ** 60n)
      .raw('streamed', 'true')
      .time('at', new Date('2026-11-24T20:51:31.007Z'))
      .time('never', null)
      .done();
    expect(JSON.parse(text)).toEqual({
      id: '0190b1a0-0000-7000-8000-000000000001',
      plain: 'chat/completions',
      quoted: 'say "hi"\n\\ \u2028 \u0001',
      ms: 0.61,
      units: String(2n ** 60n),
      streamed: true,
      at: '2026-11-24T20:51:31.007Z',
    });
  });

  it('makes an empty object of no fields, and an array of rows', () => {
    expect(new RowJson().done()).toBe('{}');
    const rows = [new RowJson().num('a', 1).done(), new RowJson().str('b', 'x').done()];
    expect(JSON.parse(jsonArray(rows))).toEqual([{ a: 1 }, { b: 'x' }]);
    expect(jsonArray([])).toBe('[]');
  });

  it('formats times as Date#toISOString does, within a second and across seconds and years', () => {
    for (const ms of [0, 999, 1000, 1_700_000_000_123, 1_700_000_000_999, 1_700_000_001_000, Date.UTC(9999, 11, 31, 23, 59, 59, 999)]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    }
  });
});

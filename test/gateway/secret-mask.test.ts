/**
 * The provider key's mask over a streamed body: every way of cutting the body into chunks gives
 * the same bytes out, the key overwritten wherever it falls.
 */
import { describe, expect, it } from 'vitest';
import { SecretMask } from '../../src/gateway/secret-mask.js';

const KEY = 'sk-sk-proj-0123456789abcdef';
const STARS = '*'.repeat(KEY.length);

function run(body: string, cuts: number[]): string {
  const mask = SecretMask.for(KEY)!;
  const bytes = Buffer.from(body);
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(mask.push(bytes.subarray(from, cut)));
    from = cut;
  }
  out.push(mask.end());
  return Buffer.concat(out).toString();
}

describe('SecretMask', () => {
  const body = `{"a":"Bearer ${KEY}","b":"sk-sk-sk-${KEY}x","c":"sk-sk-pro"}`;
  const expected = `{"a":"Bearer ${STARS}","b":"sk-sk-sk-${STARS}x","c":"sk-sk-pro"}`;

  it('masks the key at every single cut and every pair of cuts, and leaves a near miss alone', () => {
    const n = Buffer.byteLength(body);
    for (let i = 0; i <= n; i++) {
      expect(run(body, [i])).toBe(expected);
      for (let j = i; j <= n; j += 3) expect(run(body, [i, j])).toBe(expected);
    }
  });

  it('byte by byte, and holds back only what could begin the key', () => {
    expect(run(body, [...Array(Buffer.byteLength(body)).keys()].slice(1))).toBe(expected);
    const mask = SecretMask.for(KEY)!;
    expect(mask.push(Buffer.from('data: {"x":1}\n\n')).toString()).toBe('data: {"x":1}\n\n');
    expect(mask.push(Buffer.from('tokens sk-sk')).toString()).toBe('tokens ');
    expect(mask.end().toString()).toBe('sk-sk');
  });

  it('does not look for a key too short to tell from ordinary text', () => {
    expect(SecretMask.for('sk-test')).toBeUndefined();
  });
});

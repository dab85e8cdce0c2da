/**
 * The hand-written ASCII pre-tokenizer (src/protocols/o200k-split.ts) against o200k's expression: on random text
 * of every ASCII class, and of ASCII mixed with characters beyond it, the pieces are the expression's.
 */
import { describe, expect, it } from 'vitest';
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';
import { NOT_ASCII, pieceEnd, utf16 } from '../../src/protocols/o200k-split.js';
import { corpus } from '../fixtures/input-corpus.js';
import { prng } from '../support/prng.js';

const SPLIT = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'gu');
const STICKY = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'yu');

/** The expression's pieces. */
const expected = (text: string) => Array.from(text.matchAll(SPLIT), (m) => m[0]);

/** pieceEnd's pieces, the expression cutting those it answers NOT_ASCII for; and how many pieceEnd cut. */
function pieces(text: string): { pieces: string[]; ascii: number } {
  const out: string[] = [];
  let ascii = 0;
  const units = utf16(text);
  for (let start = 0; start < text.length;) {
    let end = pieceEnd(units, start);
    if (end === NOT_ASCII) {
      STICKY.lastIndex = start;
      expect(STICKY.test(text), `the expression matches at ${start}`).toBe(true);
      end = STICKY.lastIndex;
    } else ascii++;
    expect(end).toBeGreaterThan(start);
    out.push(text.slice(start, end));
    start = end;
  }
  return { pieces: out, ascii };
}

/** Characters that exercise every branch: letters of both cases, digits, whitespace of each kind, apostrophes and contractions, slashes, punctuation, control characters. */
const ASCII = [
  ...'aAbZzqQ0159',
  ' ',
  ' ',
  ' ',
  '\t',
  '\n',
  '\r',
  '\v',
  '\f',
  "'",
  "'s",
  "'LL",
  "'ve",
  "'Re",
  "'d",
  "'x",
  '/',
  '//',
  '.',
  ',',
  '(',
  '"',
  '-',
  '_',
  '\u0000',
  '\u001f',
  '\u007f',
  ' the',
  ' Hello',
  'HTTPServer',
  '1234567',
];
/** Beyond ASCII: letters (lower, upper, other), a mark, a digit, whitespace, punctuation, CJK, an emoji. */
const WIDE = ['é', 'É', 'ß', '\u0301', '٣', '\u00a0', '\u3000', '\u2028', '—', '’', '中文', '😀', 'ǅ', 'ʰ'];

function random(next: () => number, length: number, wide: number): string {
  let text = '';
  for (let i = 0; i < length; i++) {
    const from = next() < wide ? WIDE : ASCII;
    text += from[Math.floor(next() * from.length)];
  }
  return text;
}

// Thousands of texts each, checked piece by piece: more than the default 5 s on a loaded host.
describe('o200k pre-tokenizer for ASCII', { timeout: 60_000 }, () => {
  it('cuts random ASCII text into the pieces the expression cuts, with no help from it', () => {
    const next = prng(200);
    for (let n = 0; n < 1500; n++) {
      const text = random(next, 1 + Math.floor(next() * 40), 0);
      const got = pieces(text);
      expect(got.pieces, JSON.stringify(text)).toEqual(expected(text));
      expect(got.ascii).toBe(got.pieces.length);
    }
  });

  it('cuts text mixed with characters beyond ASCII into the same pieces, taking turns with the expression', () => {
    const next = prng(201);
    for (let n = 0; n < 1500; n++) {
      const text = random(next, 1 + Math.floor(next() * 40), 0.15);
      expect(pieces(text).pieces, JSON.stringify(text)).toEqual(expected(text));
    }
  });

  it('cuts the corpus into the same pieces, ASCII kinds without the expression', () => {
    for (const { kind, text } of corpus()) {
      const got = pieces(text);
      expect(got.pieces, kind).toEqual(expected(text));
      if (kind !== 'cjk') expect(got.ascii, kind).toBe(got.pieces.length);
    }
  });
});

/**
 * o200k_base's pre-tokenizer (the regular expression that cuts text into the pieces the BPE merges each on
 * its own), written out by hand for ASCII text: the input estimate's hot loop (input-estimate.ts).
 *
 * The expression, as gpt-tokenizer ships it (O200K_TOKEN_SPLIT_REGEX), tries in order:
 *   1. `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+('s|'t|'re|'ve|'m|'ll|'d)?`
 *   2. `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*('s|...)?`
 *   3. `\p{N}{1,3}`
 *   4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
 *   5. `\s*[\r\n]+`
 *   6. `\s+(?!\S)`
 *   7. `\s+`
 * Run by V8, each match allocates its result and walks the alternatives with Unicode classes; for a 2 KB
 * prompt that is most of the estimate's time. On ASCII the classes are small (letters upper and lower, digits,
 * \r and \n, other whitespace, the rest), and what each alternative takes follows from the characters at and
 * after the piece's start. pieceEnd reads them from the text's UTF-16 code units, copied once into a typed
 * array (utf16: V8's charCodeAt costs about twice a typed array's read here), and allocates nothing. As soon as
 * it reads a character beyond ASCII (whose class it does not know) it answers NOT_ASCII, and the caller lets the
 * expression cut that piece: where a piece ends depends only on the text from its start, so the two can
 * take turns piece by piece and the pieces are the expression's (test/gateway/o200k-split.test.ts compares
 * them on random text).
 */

import { endianness } from 'node:os';

/** A text's UTF-16 code units: `codes` from 0 to `length` (beyond it, what an earlier text left). */
export interface Codes {
  codes: Uint16Array;
  length: number;
}

/** The buffer utf16 writes to, grown to the longest text it was given (one text of a request: at most a few hundred KiB). */
let written = Buffer.alloc(4096);
const units: Codes = { codes: new Uint16Array(written.buffer, written.byteOffset, written.length >> 1), length: 0 };
const BIG_ENDIAN = endianness() === 'BE';

/**
 * `text`'s UTF-16 code units, in the one buffer of the process: valid until the next call, so read them before
 * anything else may call utf16 (the count reads them synchronously, piece by piece).
 */
export function utf16(text: string): Codes {
  if (text.length * 2 > written.length) {
    written = Buffer.alloc(Math.max(text.length * 2, written.length * 2));
    units.codes = new Uint16Array(written.buffer, written.byteOffset, written.length >> 1);
  }
  // Little-endian, as Buffer writes UTF-16; a Uint16Array reads in the host's order.
  written.write(text, 0, 'utf16le');
  if (BIG_ENDIAN) written.subarray(0, text.length * 2).swap16();
  units.length = text.length;
  return units;
}

/** pieceEnd's answer when the piece reaches a character beyond ASCII: the expression must cut it. */
export const NOT_ASCII = -1;

const UPPER = 1;
const LOWER = 2;
const DIGIT = 3;
/** \r and \n. */
const NEWLINE = 4;
/** \t, \v, \f and space: the rest of \s in ASCII. */
const SPACE = 5;
/** Neither a letter, a digit nor whitespace: punctuation, symbols, control characters. */
const OTHER = 6;
/** Past the end of the text. */
const END = 0;
/** A character beyond ASCII. */
const WIDE = 7;

const CLASS = new Uint8Array(128).fill(OTHER);
for (let c = 65; c <= 90; c++) CLASS[c] = UPPER;
for (let c = 97; c <= 122; c++) CLASS[c] = LOWER;
for (let c = 48; c <= 57; c++) CLASS[c] = DIGIT;
CLASS[10] = CLASS[13] = NEWLINE;
CLASS[9] = CLASS[11] = CLASS[12] = CLASS[32] = SPACE;

/**
 * `text`'s character code at `i`, -1 past its end. (Reading past a string's or a typed array's end makes V8 throw
 * away the function's optimised code: every read stays in bounds.)
 */
function codeAt(text: Codes, i: number): number {
  return i < text.length ? text.codes[i]! : -1;
}

function classAt(text: Codes, i: number): number {
  const c = codeAt(text, i);
  return c < 0 ? END : c < 128 ? CLASS[c]! : WIDE;
}

/** The end of the contraction at `text[k]` (an apostrophe) (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`, any case), or `k` when none starts there. */
function contractionEnd(text: Codes, k: number): number {
  const a = codeAt(text, k + 1) | 32;
  if (a === 115 || a === 116 || a === 109 || a === 100) return k + 2; // s t m d
  const b = codeAt(text, k + 2) | 32;
  if ((a === 108 && b === 108) || (a === 118 && b === 101) || (a === 114 && b === 101)) return k + 3; // ll ve re
  return k;
}

/**
 * Where the piece that starts at `start` ends (exclusive), as o200k's expression cuts it, or NOT_ASCII when
 * that depends on a character beyond ASCII. `start` must be below `text.length`.
 */
export function pieceEnd(text: Codes, start: number): number {
  const first = classAt(text, start);
  if (first === WIDE) return NOT_ASCII;
  let k = start;
  // 1 and 2: an optional character that is neither a letter, a digit nor a newline, then letters: upper
  // case ones, then lower case ones (one of the two runs not empty), then a contraction.
  if (first === SPACE || first === OTHER) {
    const next = classAt(text, start + 1);
    if (next === WIDE) return NOT_ASCII;
    if (next === UPPER || next === LOWER) k = start + 1;
  }
  let code = codeAt(text, k);
  if ((code | 32) >= 97 && (code | 32) <= 122) {
    while (code >= 65 && code <= 90) code = codeAt(text, ++k);
    while (code >= 97 && code <= 122) code = codeAt(text, ++k);
    if (code >= 128) return NOT_ASCII;
    return code === 39 ? contractionEnd(text, k) : k;
  }
  let c: number;
  // 3: one to three digits.
  if (first === DIGIT) {
    for (k = start + 1; k < start + 3; k++) {
      c = classAt(text, k);
      if (c === WIDE) return NOT_ASCII;
      if (c !== DIGIT) return k;
    }
    return k;
  }
  // 4: an optional space, characters that are neither letters, digits nor whitespace, then newlines and slashes.
  if (first === OTHER || (codeAt(text, start) === 32 && classAt(text, start + 1) === OTHER)) {
    k = first === OTHER ? start : start + 1;
    do c = classAt(text, ++k);
    while (c === OTHER);
    if (c === WIDE) return NOT_ASCII;
    while (c === NEWLINE || codeAt(text, k) === 47) c = classAt(text, ++k);
    return k;
  }
  // 5, 6 and 7: whitespace. Up to its last newline when it holds one; else all of it before the end of the
  // text, or all but its last character before anything else (that one starts the next piece), or one.
  let newline = -1;
  for (c = first; c === SPACE || c === NEWLINE; c = classAt(text, ++k)) if (c === NEWLINE) newline = k;
  if (c === WIDE) return NOT_ASCII;
  if (newline >= 0) return newline + 1;
  if (c === END) return k;
  return k - 1 > start ? k - 1 : k;
}

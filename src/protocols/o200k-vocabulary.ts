/**
 * o200k_base's vocabulary in four typed arrays, and its byte-pair merge: what input-estimate.ts counts a request's
 * text with. gpt-tokenizer holds the same vocabulary as 200,000 strings in a Map, with its module's source beside
 * them: about 28 MB of every process's heap, for a count that needs only "which byte strings are tokens, and their
 * ranks". Here the tokens' bytes are one Uint8Array, found by an open-addressing table of their FNV-1a hashes: about
 * 5 MB in all, outside the collected heap's objects.
 *
 * The tokens and their ranks are read from gpt-tokenizer's copy of OpenAI's `o200k_base.tiktoken` (one token a line:
 * its bytes in base64, a space, its rank), which the package exports. The count is o200k's own: the merge is
 * tiktoken's (the lowest-ranked adjacent pair merged first, the leftmost of equal ranks), and
 * test/gateway/input-estimate.test.ts compares the count with gpt-tokenizer's on a corpus and random text.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The longest token, in bytes, is well under this: a longer piece is never looked up, only merged. */
const MAX_TOKEN_BYTES = 256;
/** No rank: a pair that is not a token. */
const NONE = 0x7fffffff;

const BASE64 = new Int8Array(128).fill(-1);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].entries()) BASE64[c.charCodeAt(0)] = i;

function fnv1a(bytes: Uint8Array, from: number, to: number): number {
  let hash = 0x811c9dc5;
  for (let i = from; i < to; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
  return (hash ^ (hash >>> 15)) >>> 0;
}

/** The vocabulary: each token's bytes (tokenBytes from tokenStart[i] to tokenStart[i + 1]), its rank, and the hash table. */
interface Vocabulary {
  tokenBytes: Uint8Array;
  tokenStart: Int32Array;
  tokenRank: Int32Array;
  /** Slot -> token index + 1 (0: empty); its size a power of two, at least twice the tokens. */
  slots: Int32Array;
}

/** Reads a tiktoken file: per line, base64 bytes, a space, the rank. */
function readTiktoken(file: Buffer): Vocabulary {
  let lines = 0;
  for (let i = 0; i < file.length; i++) if (file[i] === 10) lines++;
  if (file.length && file[file.length - 1] !== 10) lines++;
  const tokenBytes = new Uint8Array(Math.ceil((file.length * 3) / 4));
  const tokenStart = new Int32Array(lines + 1);
  const tokenRank = new Int32Array(lines);
  let size = 1;
  while (size < lines * 2) size <<= 1;
  const slots = new Int32Array(size);
  let count = 0;
  let written = 0;
  let i = 0;
  while (i < file.length) {
    // The token's base64, decoded as it is read.
    let bits = 0;
    let held = 0;
    tokenStart[count] = written;
    for (; i < file.length && file[i] !== 32; i++) {
      const value = BASE64[file[i]!] ?? -1;
      if (value < 0) continue; // '=' padding
      bits = (bits << 6) | value;
      held += 6;
      if (held >= 8) {
        held -= 8;
        tokenBytes[written++] = (bits >>> held) & 0xff;
      }
    }
    let rank = 0;
    for (i++; i < file.length && file[i] !== 10; i++) rank = rank * 10 + file[i]! - 48;
    i++;
    if (written === tokenStart[count]) continue; // an empty line
    tokenRank[count] = rank;
    let slot = fnv1a(tokenBytes, tokenStart[count]!, written) & (size - 1);
    while (slots[slot] !== 0) slot = (slot + 1) & (size - 1);
    slots[slot] = count + 1;
    count++;
  }
  tokenStart[count] = written;
  return {
    tokenBytes: tokenBytes.slice(0, written),
    tokenStart: tokenStart.slice(0, count + 1),
    tokenRank: tokenRank.slice(0, count),
    slots,
  };
}

const tiktokenFile = createRequire(import.meta.url).resolve('gpt-tokenizer/data/o200k_base.tiktoken');
const { tokenBytes, tokenStart, tokenRank, slots } = readTiktoken(readFileSync(tiktokenFile));
const SLOT_MASK = slots.length - 1;

/** How many tokens the vocabulary holds (tests). */
export const VOCABULARY_SIZE = tokenRank.length;

/** The rank of the token whose bytes are bytes[from..to), or NONE. */
function rankOf(bytes: Uint8Array, from: number, to: number): number {
  const length = to - from;
  if (length > MAX_TOKEN_BYTES) return NONE;
  for (let slot = fnv1a(bytes, from, to) & SLOT_MASK; ; slot = (slot + 1) & SLOT_MASK) {
    const entry = slots[slot]!;
    if (entry === 0) return NONE;
    const start = tokenStart[entry - 1]!;
    if (tokenStart[entry]! - start !== length) continue;
    let i = 0;
    while (i < length && tokenBytes[start + i] === bytes[from + i]) i++;
    if (i === length) return tokenRank[entry - 1]!;
  }
}

/** A piece's UTF-8 bytes, written here (grown when a piece needs more), as TextEncoder writes them. */
let scratch = new Uint8Array(1024);

/** Writes `piece`'s UTF-8 into scratch (a lone surrogate as U+FFFD, as TextEncoder does); returns its length. */
function encode(piece: string): number {
  if (scratch.length < piece.length * 3) scratch = new Uint8Array(piece.length * 3);
  const out = scratch;
  let n = 0;
  for (let i = 0; i < piece.length; i++) {
    let c = piece.charCodeAt(i);
    if (c < 0x80) {
      out[n++] = c;
      continue;
    }
    if (c < 0x800) {
      out[n++] = 0xc0 | (c >> 6);
      out[n++] = 0x80 | (c & 63);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const low = c <= 0xdbff && i + 1 < piece.length ? piece.charCodeAt(i + 1) : 0;
      if (low >= 0xdc00 && low <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00);
        i++;
        out[n++] = 0xf0 | (c >> 18);
        out[n++] = 0x80 | ((c >> 12) & 63);
        out[n++] = 0x80 | ((c >> 6) & 63);
        out[n++] = 0x80 | (c & 63);
        continue;
      }
      c = 0xfffd;
    }
    out[n++] = 0xe0 | (c >> 12);
    out[n++] = 0x80 | ((c >> 6) & 63);
    out[n++] = 0x80 | (c & 63);
  }
  return n;
}

/** Whether `piece` is one token of o200k (its UTF-8 bytes are in the vocabulary). */
export function isToken(piece: string): boolean {
  return rankOf(scratch, 0, encode(piece)) !== NONE;
}

/**
 * The tokens byte-pair encoding makes of `piece`, by tiktoken's merge: from single bytes, the adjacent pair whose
 * joined bytes have the lowest rank is merged, the leftmost of equal ranks, until no pair is a token.
 */
export function mergedTokens(piece: string): number {
  const length = encode(piece);
  const bytes = scratch;
  if (length <= 1) return length;
  // starts: where each part begins (and the end); ranks[i]: the rank of parts i and i + 1 joined.
  const starts: number[] = [];
  const ranks: number[] = [];
  const rankAt = (i: number) => (i + 2 < starts.length ? rankOf(bytes, starts[i]!, starts[i + 2]!) : NONE);
  for (let i = 0; i <= length; i++) starts.push(i);
  for (let i = 0; i < length; i++) ranks.push(i < length - 1 ? rankOf(bytes, i, i + 2) : NONE);
  for (;;) {
    let lowest = NONE;
    let at = -1;
    for (let i = 0; i < ranks.length; i++) {
      if (ranks[i]! < lowest) {
        lowest = ranks[i]!;
        at = i;
      }
    }
    if (at < 0) break;
    starts.splice(at + 1, 1);
    ranks.splice(at + 1, 1);
    ranks[at] = rankAt(at);
    if (at > 0) ranks[at - 1] = rankAt(at - 1);
  }
  return starts.length - 1;
}

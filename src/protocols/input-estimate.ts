/**
 * A call's input bound from the text its request carries (docs/pricing.md "Input bounds").
 *
 * The text a request carries (messages, system prompts, tool definitions, embedding inputs) is counted
 * with o200k_base, the tokenizer of OpenAI's current models (its vocabulary and merge in o200k-vocabulary.ts: pure
 * JavaScript, no native or WebAssembly build), its pieces cut by o200k-split.ts where the text is ASCII
 * (about 90 MB/s of English here). What the count may not bound is bounded otherwise:
 *
 * - **A margin for other tokenizers** (`InputRule.factor`): the text's o200k count times the factor, plus
 *   what digits and whitespace runs may cost beyond it (foreignExtra), but never more than the text's
 *   UTF-8 bytes (a byte-level BPE token covers at least one byte, so bytes bound any such tokenizer).
 *   OpenAI's o200k models: 1 (the count is theirs, nothing added); its cl100k models and every other
 *   model (Gemini's, Anthropic's, the open models OpenAI-compatible servers run): FOREIGN_FACTOR.
 * - **Structure**: each object and array element of the walked input adds STRUCTURE_TOKENS, each key its
 *   own tokens, each call BASE_TOKENS: more than the chat template's tokens around a message (3 per
 *   message and 3 to prime the reply in OpenAI's accounting) and than a tool definition rendered as
 *   the model sees it. Anthropic adds a hidden system prompt when a request carries tools:
 *   ANTHROPIC_TOOLS_TOKENS (anthropic.ts, added by its walk and by Bedrock's for an Anthropic model).
 * - **Bytes for what the tokenizer cannot see**: an inline image counts its base64 bytes up to
 *   INLINE_IMAGE_TOKEN_BOUND (what an image may cost at most); other inline data (files, audio), a field
 *   the endpoint does not list, a number or literal, and text beyond TOKENIZE_BUDGET bytes in one
 *   request count byte for byte, as every input did before.
 * - **Bounded work**: a piece of text in o200k's vocabulary is one token (a lookup); one that is not must be
 *   merged, 2 to 10 µs (CJK text, and text of random characters, base64 or identifiers, is mostly such
 *   pieces): a request's new merges may cost MERGE_BUDGET, after which the rest of its text counts its
 *   bytes, and a piece longer than MAX_MERGED_PIECE counts its bytes.
 *
 * The walk of a request is its protocol's (each endpoint's `input`, in the protocol's module: openAiInput,
 * anthropicInput, geminiInput, bedrockInput): it names the fields that carry input and those that are
 * parameters (walkBody), with the parsed request body and an InputTally.
 */
import { O200K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';
import { NOT_ASCII, pieceEnd, utf16 } from './o200k-split.js';
import { isToken, mergedTokens } from './o200k-vocabulary.js';

/**
 * Tokens an inline image may cost at most, whatever its size in bytes: providers scale an image down before
 * they tokenize it (the most found: OpenAI's gpt-4o-mini, 48 169 tokens for a high-detail image at its largest;
 * Anthropic ~1600-4800, Gemini 258 a tile). Beyond this, the excess is charged as an ADJUSTMENT.
 */
export const INLINE_IMAGE_TOKEN_BOUND = 65_536;

/** The margin on the o200k count for a model whose tokenizer is not o200k (at most the text's bytes). */
export const FOREIGN_FACTOR = 2;
/** Tokens added per object and per array element of the walked input (role, separators, template). */
export const STRUCTURE_TOKENS = 4;
/** Tokens added per call (the reply's priming, a tools header). */
export const BASE_TOKENS = 16;
/** Text counted per request, in UTF-8 bytes (about 5 ms of English); text beyond it is bounded by its bytes. */
export const TOKENIZE_BUDGET = 256 * 1024;

/**
 * The merges of pieces outside the vocabulary a request may cost, counted as their pieces' bytes and
 * MERGE_COST more each: measured, a short piece's merge costs about 10 µs (random base64: about 500 of
 * them, 5 ms), a 30-character CJK run about 2 µs (about 18 KB of CJK text never seen before, under 1 ms).
 * Past it the rest of the request's text counts its bytes, without being split.
 */
export const MERGE_BUDGET = 32 * 1024;
/** What a merge costs beyond its piece's bytes, in the budget's bytes. */
const MERGE_COST = 64;
/** A piece longer than this (in UTF-16 units) counts its bytes: the merge is quadratic in a piece's length. */
const MAX_MERGED_PIECE = 256;
/** Pieces whose merge is remembered, per process; the memory is emptied when full. */
const MERGED_PIECES = 65_536;

/** The merges counted so far, by piece (emptied when full, MERGED_PIECES). */
const merged = new Map<string, number>();
/** o200k's pre-tokenizer, for the pieces o200k-split.ts leaves to it (those reaching beyond ASCII). */
const SPLIT = new RegExp(O200K_TOKEN_SPLIT_REGEX.source, 'yu');

/**
 * Short pieces already counted, in a table of HOT_SLOTS found by a hash of the piece's characters (FNV-1a),
 * one piece a slot, the last one counted there: most of a prompt's pieces are found in it without making a
 * string of them or looking them up in the 200,000 entries of the vocabulary. A slot holds its piece's length
 * and its characters themselves, four to an integer (a piece of up to HOT_PIECE characters, each below 256:
 * ASCII and Latin-1): a slot is a hit only when they are the piece's, so the count is o200k's whatever the hash.
 */
const HOT_SLOTS = 1 << 14;
/** The longest piece kept in the table, in characters: three integers of four. */
const HOT_PIECE = 12;
const hotCount = new Int32Array(HOT_SLOTS);
/** A slot's piece: its length (0: none) and its characters 0-3, 4-7 and 8-11, a byte each. */
const hotLength = new Int32Array(HOT_SLOTS);
const hotChars0 = new Int32Array(HOT_SLOTS);
const hotChars1 = new Int32Array(HOT_SLOTS);
const hotChars2 = new Int32Array(HOT_SLOTS);

/**
 * `text`'s o200k tokens, piece by piece as the encoder splits it (pieceEnd, the expression where it answers
 * NOT_ASCII): a piece in the vocabulary is one token, another is merged (remembered), or counts its UTF-8
 * bytes when it is too long to merge. When a piece needs a merge and the request's MERGE_BUDGET is spent, the
 * piece and the rest of `text` count their bytes. Equal to o200k's count while the budget lasts, above it after
 * (a token covers at least one byte).
 */
function countPieces(text: string, budget: { merge: number }): number {
  const units = utf16(text);
  const codes = units.codes;
  let tokens = 0;
  for (let start = 0; start < text.length;) {
    let end = pieceEnd(units, start);
    if (end === NOT_ASCII) {
      SPLIT.lastIndex = start;
      // Every character is in one of the expression's classes; were one not, the rest counts its bytes.
      if (!SPLIT.test(text)) return tokens + Buffer.byteLength(text.slice(start));
      end = SPLIT.lastIndex;
    }
    let slot = -1;
    const length = end - start;
    let c0 = 0;
    let c1 = 0;
    let c2 = 0;
    if (length <= HOT_PIECE) {
      let hash = 0x811c9dc5;
      let wide = 0;
      for (let i = 0; i < length; i++) {
        const c = codes[start + i]!;
        hash = Math.imul(hash ^ c, 0x01000193);
        wide |= c;
        if (i < 4) c0 = (c0 << 8) | c;
        else if (i < 8) c1 = (c1 << 8) | c;
        else c2 = (c2 << 8) | c;
      }
      if (wide < 256) {
        slot = (hash ^ (hash >>> 16)) & (HOT_SLOTS - 1);
        if (hotLength[slot] === length && hotChars0[slot] === c0 && hotChars1[slot] === c1 && hotChars2[slot] === c2) {
          tokens += hotCount[slot]!;
          start = end;
          continue;
        }
      }
    }
    const piece = text.slice(start, end);
    start = end;
    let count = isToken(piece) ? 1 : merged.get(piece);
    if (count === undefined) {
      if (piece.length > MAX_MERGED_PIECE) {
        tokens += Buffer.byteLength(piece);
        continue;
      }
      // Text mostly outside the vocabulary (random characters, base64, identifiers): not worth splitting further.
      if (budget.merge <= 0) return tokens + Buffer.byteLength(piece) + Buffer.byteLength(text.slice(start));
      budget.merge -= Buffer.byteLength(piece) + MERGE_COST;
      count = mergedTokens(piece);
      if (merged.size >= MERGED_PIECES) merged.clear();
      merged.set(piece, count);
    }
    if (slot >= 0) {
      hotCount[slot] = count;
      hotLength[slot] = length;
      hotChars0[slot] = c0;
      hotChars1[slot] = c1;
      hotChars2[slot] = c2;
    }
    tokens += count;
  }
  return tokens;
}

/**
 * A whitespace run longer than this counts a token a character for a foreign tokenizer (foreignExtra); a shorter
 * one is a token or two of any tokenizer measured (Gemma's takes up to 31 spaces a token), within the margin.
 */
const LONG_WHITESPACE_RUN = 32;

/**
 * What a tokenizer other than o200k may need for `text`'s ASCII digits and long whitespace runs beyond twice
 * their o200k tokens. o200k takes up to three digits a token; Gemma's tokenizer (Gemini's) takes one, so a run
 * of R digits adds floor(R / 3): with its ceil(R / 3) tokens twice, it counts at least R. o200k takes a long
 * whitespace run in a few tokens, up to about 128 characters each; Gemma's cuts it every 31, so a run of L over
 * LONG_WHITESPACE_RUN adds L - 2: with the token it takes at least, it counts at least L, one a character, which
 * no tokenizer with byte fallback passes.
 */
function foreignExtra(text: string): number {
  let extra = 0;
  let digits = 0;
  let spaces = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      digits++;
      continue;
    }
    if (digits) extra += (digits / 3) | 0;
    digits = 0;
    if (c === 32 || (c >= 9 && c <= 13)) {
      spaces++;
      continue;
    }
    if (spaces > LONG_WHITESPACE_RUN) extra += spaces - 2;
    spaces = 0;
  }
  if (digits) extra += (digits / 3) | 0;
  if (spaces > LONG_WHITESPACE_RUN) extra += spaces - 2;
  return extra;
}

/** How a protocol's model is bounded: the factor on the o200k count (1: the model's tokenizer is o200k). */
export interface InputRule {
  factor: number;
}

export const O200K: InputRule = Object.freeze({ factor: 1 });
export const FOREIGN: InputRule = Object.freeze({ factor: FOREIGN_FACTOR });

/** An image in a request body: its inline base64 data, when `node` is one (the protocol's inlineImage). */
export type ImageOf = (node: Record<string, unknown>) => string | undefined;

/**
 * What a request's input adds up to, as its endpoint's walk finds it: text (counted), bytes (bounded byte
 * for byte) and structure.
 */
export class InputTally {
  /** o200k tokens of the text counted, and that text's UTF-8 bytes. */
  textTokens = 0;
  textBytes = 0;
  /** Bytes bounded byte for byte, and inline images at their bound. */
  bytes = 0;
  /** The base64 bytes of the inline images walked beyond INLINE_IMAGE_TOKEN_BOUND each (what the body's bytes may drop). */
  imageExcess = 0;
  /** Structure and fixed overheads, in tokens. */
  overhead = BASE_TOKENS;
  /** What is left of the request's merge budget (countPieces). */
  private readonly budget = { merge: MERGE_BUDGET };
  /** The text counted, read again only for a foreign rule (foreignExtra): an o200k model's bound never reads it. */
  private readonly texts: string[] = [];

  constructor(private readonly imageOf: ImageOf) {}

  /** A string the model reads as text. */
  text(value: string): void {
    const size = Buffer.byteLength(value);
    if (this.textBytes + size > TOKENIZE_BUDGET || this.budget.merge <= 0) {
      this.bytes += size;
      return;
    }
    this.textBytes += size;
    this.textTokens += countPieces(value, this.budget);
    this.texts.push(value);
  }

  /** A value the tokenizer cannot see: its JSON's bytes. */
  opaque(value: unknown): void {
    if (value === undefined) return;
    this.bytes += typeof value === 'string' ? Buffer.byteLength(value) : Buffer.byteLength(JSON.stringify(value) ?? '');
  }

  /**
   * Any JSON value of the request's input: its strings as text, except inline images (their bound) and
   * inline data (`data:` URLs, `{ type: 'base64', data }` and `{ bytes }` sources: bytes); keys as text, structure per node.
   */
  walk(root: unknown): void {
    // Iterative: a body may nest deeper than the call stack.
    const pending: unknown[] = [root];
    while (pending.length) {
      const node = pending.pop();
      if (typeof node === 'string') {
        if (node.startsWith('data:') && node.includes(';base64,')) this.opaque(node);
        else this.text(node);
      } else if (Array.isArray(node)) {
        this.overhead += STRUCTURE_TOKENS;
        for (const item of node) pending.push(item);
      } else if (node && typeof node === 'object') {
        this.overhead += STRUCTURE_TOKENS;
        const o = node as Record<string, unknown>;
        const image = this.imageOf(o);
        if (image !== undefined) {
          this.bytes += Math.min(image.length, INLINE_IMAGE_TOKEN_BOUND);
          this.imageExcess += Math.max(0, image.length - INLINE_IMAGE_TOKEN_BOUND);
          continue;
        }
        if (o.type === 'base64' && typeof o.data === 'string') {
          // Anthropic's inline document or image source: the provider reads the file, not its base64.
          this.opaque(o.data);
          continue;
        }
        if (typeof o.bytes === 'string' && Object.keys(o).length === 1) {
          // Bedrock's inline document, image or video source (`{ bytes }`, base64 in the JSON body): the same.
          this.opaque(o.bytes);
          continue;
        }
        for (const key in o) {
          this.text(key);
          pending.push(o[key]);
        }
      } else if (node !== undefined && node !== null) {
        // A number or literal: a token or more, at most its characters.
        this.opaque(node);
      }
    }
  }

  /** Token ids (a completions prompt or an embeddings input given as numbers): one token each. */
  tokenIds(value: unknown): boolean {
    if (!Array.isArray(value) || value.length === 0) return false;
    if (value.every((v) => typeof v === 'number')) {
      this.overhead += value.length;
      return true;
    }
    if (value.every((v) => Array.isArray(v) && v.every((t) => typeof t === 'number'))) {
      for (const ids of value) this.overhead += ids.length + STRUCTURE_TOKENS;
      return true;
    }
    return false;
  }

  /**
   * The bound: text at the rule's factor with its digits' and whitespace runs' extra (at most its bytes), plus
   * bytes and structure.
   */
  bound(rule: InputRule): number {
    if (rule.factor === 1) return this.textTokens + this.bytes + this.overhead;
    let extra = 0;
    for (const text of this.texts) extra += foreignExtra(text);
    return Math.min(Math.ceil(this.textTokens * rule.factor) + extra, this.textBytes) + this.bytes + this.overhead;
  }
}

/** Top-level fields of a request: those that carry input, or those that are parameters (they add nothing). */
export type Fields = ReadonlySet<string>;
export const fields = (...names: string[]): Fields => new Set(names);

/**
 * Walks `body`'s input fields, skips its parameters (and `counted`), and counts any other field byte for byte: a
 * protocol's endpoint walks its request with it (its `input`), naming the fields of its API.
 */
export function walkBody(tally: InputTally, body: Record<string, unknown>, input: Fields, parameters: Fields, counted?: string): void {
  for (const key in body) {
    if (parameters.has(key) || key === counted) continue;
    if (input.has(key)) tally.walk(body[key]);
    else tally.opaque(body[key]);
  }
}

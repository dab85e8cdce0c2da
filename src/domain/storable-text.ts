/**
 * What PostgreSQL can store. Its text and jsonb types refuse U+0000, and jsonb
 * refuses an unpaired UTF-16 surrogate (JSON allows both as escapes), so such a
 * string would reach the database and fail there as a 500. The Admin API
 * refuses them as bad input (src/http/api.ts); text the gateway records from
 * opaque provider bodies (model names) is made storable instead.
 */
import { AppError } from '../errors.js';

const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

/** How deeply a request's JSON may nest (metadata is the only free-form part). */
const MAX_JSON_DEPTH = 32;

/** `text` with NUL and unpaired surrogates replaced by U+FFFD, at most `max` characters. */
export function storableText(text: string, max: number): string {
  const clean = UNSTORABLE.test(text) ? text.replace(UNSTORABLE_ALL, '\uFFFD') : text;
  return clean.length > max ? clean.slice(0, max) : clean;
}

function refuse(param: string, problem: string): never {
  throw new AppError('invalid_parameter', `${param || 'The request body'} ${problem}`, param ? { param } : {});
}

/**
 * Throws a 400 naming the field when a request value holds a string (or an
 * object key) PostgreSQL cannot store, or nests deeper than MAX_JSON_DEPTH.
 */
export function assertStorable(value: unknown, param: string, depth = 0): void {
  if (typeof value === 'string') {
    if (UNSTORABLE.test(value)) refuse(param, 'must not contain NUL characters or unpaired UTF-16 surrogates');
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (depth >= MAX_JSON_DEPTH) refuse(param, `nests deeper than ${MAX_JSON_DEPTH} levels`);
  if (Array.isArray(value)) {
    value.forEach((item, i) => assertStorable(item, `${param}[${i}]`, depth + 1));
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    assertStorable(key, param, depth + 1);
    assertStorable(item, param ? `${param}.${key}` : key, depth + 1);
  }
}

/**
 * Rows as elements of a PostgreSQL array of a composite type (`{"(a,b,,d)","(...)"}`), the text the record statement
 * reads with `unnest(cast($n as <type>[]))` (src/domain/recording/record-sql.ts). PostgreSQL reads a row of this
 * text by position, each field with its type's input function; a JSON object (row-json.ts) it lexes whole and looks
 * its keys up in a hash table made for each row, which cost it about a third more for the same row
 * (docs/performance.md, "The record statement's input"). The gateway makes a call's elements as the call ends, so the
 * recorder queues short strings (row-json.ts says why).
 */
import { isoTime } from './row-json.js';

/** What a field must be quoted for: record_in splits at these, and an empty unquoted field is NULL. */
const NEEDS_QUOTES = /[",()\\\s]/;
const ESCAPED = /["\\]/g;

/**
 * A value as a composite's field: null, undefined and an empty list as NULL (nothing), a date in RFC 3339 UTC with
 * milliseconds, a number only when finite, a list or an object as its JSON (a jsonb column), a string quoted when it
 * must be.
 */
function recordField(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text: string;
  if (typeof value === 'string') text = value;
  else if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '';
  else if (typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  else if (value instanceof Date) return isoTime(value.getTime());
  else if (Array.isArray(value) && value.length === 0) return '';
  else text = JSON.stringify(value);
  return text !== '' && !NEEDS_QUOTES.test(text) ? text : '"' + text.replace(ESCAPED, '\\$&') + '"';
}

/**
 * The row of `row`'s values under `columns` (the composite type's attributes, in its order), as an array's element
 * (quoted: a row always holds a comma).
 */
export function recordElement(columns: readonly string[], row: object): string {
  const values = row as Readonly<Record<string, unknown>>;
  let text = '(';
  for (let i = 0; i < columns.length; i++) text += (i ? ',' : '') + recordField(values[columns[i]!]);
  text += ')';
  return '"' + (text.includes('"') || text.includes('\\') ? text.replace(ESCAPED, '\\$&') : text) + '"';
}

/** Array elements (recordElement's) as one array. */
export const recordArray = (elements: string[]): string => '{' + elements.join(',') + '}';

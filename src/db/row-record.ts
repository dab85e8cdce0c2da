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
 * A value as a composite's field, escaped as its array element's text (recordElement): null, undefined and an empty list as NULL (nothing), a date in RFC 3339 UTC with
 * milliseconds, a number only when finite, a list or an object as its JSON (a jsonb column), a string quoted when it
 * must be.
 */
function recordElementField(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text: string;
  if (typeof value === 'string') text = value;
  else if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '';
  else if (typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  else if (value instanceof Date) return isoTime(value.getTime());
  else if (Array.isArray(value) && value.length === 0) return '';
  else text = JSON.stringify(value);
  if (text !== '' && !NEEDS_QUOTES.test(text)) return text;
  // Quoted for record_in (its quotes and backslashes escaped), then escaped again as the array's element: only a
  // quoted field holds a quote or a backslash, so the element's escaping is done here, field by field.
  return '\\"' + text.replace(ESCAPED, '\\$&').replace(ESCAPED, '\\$&') + '\\"';
}

/**
 * The row of `row`'s values under `columns` (the composite type's attributes, in its order), as an array's element
 * (quoted: a row always holds a comma). Its fields are escaped for the element as they are written, not the row's text
 * scanned again once made; joined, they make one string, not a rope of a hundred that would wait so in the recorder's
 * queue (2.7 KB held for an invocation's 680 characters, against 0.77 KB).
 */
export function recordElement(columns: readonly string[], row: object): string {
  const values = row as Readonly<Record<string, unknown>>;
  const fields = new Array<string>(columns.length);
  for (let i = 0; i < columns.length; i++) fields[i] = recordElementField(values[columns[i]!]);
  return '"(' + fields.join(',') + ')"';
}

/** Array elements (recordElement's) as one array. */
export const recordArray = (elements: string[]): string => '{' + elements.join(',') + '}';

/**
 * Rows as a JSON parameter, one JSON object per row, which json_to_recordset and
 * json_populate_recordset read: bigints as decimal strings, dates as ISO strings,
 * null fields left out (a missing key reads as NULL, and the text to build and
 * parse is shorter); the keys are column names, which need no escaping. The
 * gateway writes a call's rows as the call ends, so the recorder queues short
 * strings rather than object graphs that would outlive the young generation
 * while they wait for a group commit. Timestamps are formatted here because
 * V8's Date#toISOString goes through a general-purpose printf.
 */

/** What JSON must escape in a string; ids, enums and our own codes never hold it. */
// eslint-disable-next-line no-control-regex -- JSON escapes the control characters: they are what this matches
const NEEDS_ESCAPE = /["\\\u0000-\u001f\u2028\u2029\ud800-\udfff]/;

const pad2 = (n: number) => (n < 10 ? '0' : '') + n;
const pad3 = (n: number) => (n < 10 ? '00' : n < 100 ? '0' : '') + n;

let cachedSecond = NaN;
let cachedPrefix = '';

/** RFC 3339 UTC with milliseconds, as Date#toISOString writes it (years 0-9999). */
export function isoTime(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    const d = new Date(second * 1000);
    const year = d.getUTCFullYear();
    if (year < 0 || year > 9999) return new Date(ms).toISOString();
    cachedSecond = second;
    cachedPrefix =
      String(year).padStart(4, '0') +
      '-' +
      pad2(d.getUTCMonth() + 1) +
      '-' +
      pad2(d.getUTCDate()) +
      'T' +
      pad2(d.getUTCHours()) +
      ':' +
      pad2(d.getUTCMinutes()) +
      ':' +
      pad2(d.getUTCSeconds()) +
      '.';
  }
  return cachedPrefix + pad3(ms - second * 1000) + 'Z';
}

/**
 * One JSON object, its fields appended in turn. The fields are kept as a list and joined once at the end:
 * appended to one string they would make a deep tree of string pieces for the batch's join to flatten later.
 */
export class RowJson {
  private readonly fields: string[] = [];

  /** A string field (escaped only when it must be). */
  str(key: string, value: string | null | undefined): this {
    if (value === null || value === undefined) return this;
    return this.raw(key, NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : '"' + value + '"');
  }

  /** An id (a UUID: nothing to escape), quoted. */
  id(key: string, value: string): this {
    return this.raw(key, '"' + value + '"');
  }

  /** A field whose JSON is given as is: a number, a boolean, or a string already quoted. */
  raw(key: string, json: string): this {
    this.fields.push('"' + key + '":' + json);
    return this;
  }

  num(key: string, value: number | null | undefined): this {
    return value === null || value === undefined || !Number.isFinite(value) ? this : this.raw(key, String(value));
  }

  /** A 64-bit quantity, as a decimal string. */
  big(key: string, value: bigint | null | undefined): this {
    return value === null || value === undefined ? this : this.raw(key, '"' + value + '"');
  }

  time(key: string, value: Date | null | undefined): this {
    return value ? this.raw(key, '"' + isoTime(value.getTime()) + '"') : this;
  }

  done(): string {
    return '{' + this.fields.join(',') + '}';
  }
}

/** Rows' JSON texts as one JSON array. */
export const jsonArray = (rows: string[]): string => '[' + rows.join(',') + ']';

/**
 * CSV (RFC 4180) lines for the exports: a header, then one line per row, each ending in CRLF. A text cell that a
 * spreadsheet would run as a formula (`=`, `+`, `-`, `@` first) is written with a leading apostrophe.
 */
type Cell = string | number | bigint | Date | null | undefined;

const NEEDS_QUOTES = /[",\r\n]/;
const FORMULA = /^[=+\-@\t\r]/;

function cell(value: Cell): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Date) return value.toISOString();
  if (typeof value !== 'string') return String(value);
  const text = FORMULA.test(value) ? `'${value}` : value;
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

const csvLine = (cells: readonly Cell[]): string => cells.map(cell).join(',') + '\r\n';

/** The header, then each page's rows as lines (one string per page: a few hundred KB at most). */
export async function* csvLines<T>(
  header: readonly string[],
  pages: AsyncIterable<T[]>,
  cells: (row: T) => Cell[],
): AsyncGenerator<string> {
  yield csvLine(header);
  for await (const rows of pages) {
    let chunk = '';
    for (const row of rows) chunk += csvLine(cells(row));
    yield chunk;
  }
}

/** A usage bucket's sums in their text (UsageSumRow.sums): the first ten, then the kinds; the counts among them are numbers. */
const SUMS_BEFORE_CURRENCY = 10;
const COUNT_SUMS = new Set([4, 6, 7, 8, 9]);

/**
 * The usage summary's CSV: the header, then a line per bucket, its sums written as the database summed them with the
 * currency after the call counts, in texts of at most `perText` lines (each a size V8 makes and writes cheaply,
 * src/http/handler.ts). A bucket with a negative sum is written cell by cell (its text cells begin with `'`). A page that
 * is UTF-8 is lines the database made (by day and user: usage-summary-repo.ts's usageSummarySumBatches), written as
 * it is.
 */
export async function* usageSumLines(
  header: readonly string[],
  pages: AsyncIterable<{ start: string; key: string; sums: string }[] | Buffer>,
  currency: string,
  perText = 256,
): AsyncGenerator<string | Buffer> {
  yield csvLine(header);
  const money = cell(currency);
  const lineOf = (row: { start: string; key: string; sums: string }) => {
    if (row.sums.includes('-')) {
      const sums = row.sums.split(',').map((sum, i) => (COUNT_SUMS.has(i) ? Number(sum) : sum));
      return csvLine([row.start, row.key, ...sums.slice(0, SUMS_BEFORE_CURRENCY), currency, ...sums.slice(SUMS_BEFORE_CURRENCY)]);
    }
    let at = -1;
    for (let i = 0; i < SUMS_BEFORE_CURRENCY; i++) at = row.sums.indexOf(',', at + 1);
    return `${row.start},${cell(row.key)},${row.sums.slice(0, at)},${money},${row.sums.slice(at + 1)}\r\n`;
  };
  for await (const rows of pages) {
    if (!Array.isArray(rows)) {
      yield rows;
      continue;
    }
    for (let from = 0; from < rows.length; from += perText) {
      let text = '';
      for (let i = from; i < Math.min(rows.length, from + perText); i++) text += lineOf(rows[i]!);
      yield text;
    }
  }
}

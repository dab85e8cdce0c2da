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

export const csvLine = (cells: readonly Cell[]): string => cells.map(cell).join(',') + '\r\n';

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

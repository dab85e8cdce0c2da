/**
 * A summary's rows where one bucket may come as a few rows next to each other (byDayBucketsSql's whole days: a row per
 * day, access and key, not summed by the statement), made a row a bucket, the sums of its rows added (as PostgreSQL
 * would: bigints, written in decimal). A bucket is one row in the common case (a user of one key), passed on as it is.
 * The export's lines of such a day (mergeLines) are added up the same way.
 */
interface SumRow {
  start: string;
  key: string | null;
  /** The sums, comma-separated (usage-summary-repo.ts's SummedRow). */
  sums: string;
}

/** Two rows' sums (comma-separated, in the same order) added. */
function addSums(a: string, b: string): string {
  const more = b.split(',');
  return a
    .split(',')
    .map((sum, i) => String(BigInt(sum) + BigInt(more[i]!)))
    .join(',');
}

/**
 * Rows of a bucket (the same start and key) next to each other, made one, in `rows` from `held` (the row before them,
 * not yet passed on) on: the rows passed on, and the last one held back (the next rows may be of its bucket).
 */
function mergeInto<R extends SumRow>(rows: readonly R[], held: R | undefined, out: R[]): R | undefined {
  for (const row of rows) {
    if (held !== undefined && held.start === row.start && held.key === row.key) held = { ...held, sums: addSums(held.sums, row.sums) };
    else {
      if (held !== undefined) out.push(held);
      held = row;
    }
  }
  return held;
}

/** The rows with each bucket's rows made one. */
export function mergeAdjacent<R extends SumRow>(rows: readonly R[]): R[] {
  const out: R[] = [];
  const last = mergeInto(rows, undefined, out);
  if (last !== undefined) out.push(last);
  return out;
}

/**
 * Whether a line of a day's export lines (`key,` then its cells, CRLF between them, by key) has the key of the line
 * before it: a bucket of several rows, for mergeLines. A day of 2,000 lines is looked through in about 0.1 ms.
 */
export function repeatsKey(lines: string): boolean {
  let before = lines.slice(0, lines.indexOf(','));
  for (let at = lines.indexOf('\r\n'); at !== -1;) {
    const start = at + 2;
    const comma = lines.indexOf(',', start);
    const key = lines.slice(start, comma);
    if (key === before) return true;
    before = key;
    at = lines.indexOf('\r\n', comma);
  }
  return false;
}

/** Where the currency is among an export line's cells after its key: after the first ten sums. */
const CURRENCY_CELL = 10;

/**
 * A day's export lines (byDayBucketsSql's `csv`: `key,` then the cells of csvCells, CRLF between them, by key) with
 * each bucket's lines next to each other made one: where a key is the same as the line's before it, their sums are
 * added (bigints, the currency cell kept), and written as the statement writes a bucket's (a negative sum with a
 * leading apostrophe, but for the counts, COUNT_CELLS).
 */
export function mergeLines(lines: string, countCells: readonly number[]): string {
  const out: string[] = [];
  let heldKey: string | undefined;
  let held: string[] = [];
  const flush = () => {
    if (heldKey !== undefined) out.push(`${heldKey},${held.join(',')}`);
  };
  for (const line of lines.split('\r\n')) {
    const comma = line.indexOf(',');
    const key = line.slice(0, comma);
    const cells = line.slice(comma + 1).split(',');
    if (key === heldKey) held = addCells(held, cells, countCells);
    else {
      flush();
      heldKey = key;
      held = cells;
    }
  }
  flush();
  return out.join('\r\n');
}

/** Two lines' cells added, cell by cell: the sums (before and after the currency, the 11th cell), each written again. */
function addCells(a: string[], b: string[], countCells: readonly number[]): string[] {
  const value = (cell: string) => BigInt(cell.startsWith("'") ? cell.slice(1) : cell);
  return a.map((cell, i) => {
    if (i === CURRENCY_CELL) return cell;
    const sum = value(cell) + value(b[i]!);
    const column = i < CURRENCY_CELL ? i : i - 1;
    return sum < 0n && !countCells.includes(column) ? `'${sum}` : String(sum);
  });
}

/**
 * A summary's rows where one bucket may come as a few rows next to each other (byDayBucketsSql's whole days: a row per
 * day, access and key, not summed by the statement), made a row a bucket, the sums of its rows added (as PostgreSQL
 * would: bigints, written in decimal). A bucket is one row in the common case (a user of one key), passed on as it is.
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

/**
 * A top summary by day made from every key's buckets (usage-days.ts's rows, mostly days kept in the process), as
 * topUsageSummary's statement makes it from the rollups: the keys ranked by cost over the range (then units, then
 * key), the buckets of those ranked `offset` + 1 to `offset` + `top`, and each bucket's other keys summed as one (its
 * key null, last in its bucket), where the range has keys beyond those kept and the other keys' sums count an event or
 * a call.
 */

/** A bucket as the summaries read it (usage-summary-repo.ts's SummedRow). */
export interface KeyedRow {
  start: string;
  key: string | null;
  sums: string;
}

/** The sums' places of units, events, cost and calls (ROLLUP_SUMS' order). */
const UNITS = 0;
const EVENTS = 4;
const COST = 5;
const CALLS = 7;

/**
 * A batch's rows' cost and units, its sums per bucket start, and the sum of every sum's magnitude (a bound of any
 * partial sum: while the range's is a safe integer, numbers add them exactly); made once for a kept day's rows (they do
 * not change).
 */
interface Sums {
  costs: Float64Array;
  units: Float64Array;
  totals: Map<string, number[]>;
  magnitude: number;
}

const made = new WeakMap<readonly KeyedRow[], Sums>();

function sumsOf(batch: readonly KeyedRow[]): Sums {
  const known = made.get(batch);
  if (known) return known;
  const sums: Sums = { costs: new Float64Array(batch.length), units: new Float64Array(batch.length), totals: new Map(), magnitude: 0 };
  batch.forEach((row, i) => {
    const cells = row.sums.split(',').map(Number);
    for (const cell of cells) sums.magnitude += Number.isSafeInteger(cell) ? Math.abs(cell) : Infinity;
    sums.costs[i] = cells[COST]!;
    sums.units[i] = cells[UNITS]!;
    const total = sums.totals.get(row.start);
    if (total) for (let c = 0; c < cells.length; c++) total[c]! += cells[c]!;
    else sums.totals.set(row.start, cells);
  });
  made.set(batch, sums);
  return sums;
}

interface Ranked {
  key: string;
  cost: number;
  units: number;
}

const byCostThenUnits = (a: Ranked, b: Ranked) => b.cost - a.cost || b.units - a.units;

/**
 * The keys ranked `offset` + 1 to `offset` + `top`. Keys of equal cost and units are in the order of their text, as
 * the database orders text (`order`, asked only for such keys at an edge of the slice: its collation decides).
 */
async function keptKeys(ranked: Ranked[], top: number, offset: number, order: (keys: string[]) => Promise<string[]>): Promise<Set<string>> {
  ranked.sort((a, b) => byCostThenUnits(a, b) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const edge of [offset, offset + top]) {
    if (edge <= 0 || edge >= ranked.length || byCostThenUnits(ranked[edge - 1]!, ranked[edge]!) !== 0) continue;
    let from = edge - 1;
    while (from > 0 && byCostThenUnits(ranked[from - 1]!, ranked[edge]!) === 0) from--;
    let to = edge + 1;
    while (to < ranked.length && byCostThenUnits(ranked[to]!, ranked[edge]!) === 0) to++;
    const tied = new Map(ranked.slice(from, to).map((r) => [r.key, r]));
    ranked.splice(from, to - from, ...(await order([...tied.keys()])).map((key) => tied.get(key)!));
  }
  return new Set(ranked.slice(offset, offset + top).map((r) => r.key));
}

/**
 * The top summary's rows (oldest first, then by key, the others last in their bucket) and how many keys were ranked;
 * undefined where the range's sums pass what numbers add exactly (2^53: the statement sums them instead).
 */
export async function topOfRows(
  batches: readonly (readonly KeyedRow[])[],
  top: number,
  offset: number,
  order: (keys: string[]) => Promise<string[]>,
): Promise<{ rows: KeyedRow[]; keys: number } | undefined> {
  if (batches.reduce((sum, batch) => sum + sumsOf(batch).magnitude, 0) > Number.MAX_SAFE_INTEGER) return undefined;
  const ranks = new Map<string, Ranked>();
  for (const batch of batches) {
    const { costs, units } = sumsOf(batch);
    batch.forEach((row, i) => {
      const key = row.key ?? '';
      const ranked = ranks.get(key);
      if (ranked) {
        ranked.cost += costs[i]!;
        ranked.units += units[i]!;
      } else ranks.set(key, { key, cost: costs[i]!, units: units[i]! });
    });
  }
  const kept = await keptKeys([...ranks.values()], top, offset, order);
  const others = ranks.size > kept.size;
  const rows: KeyedRow[] = [];
  for (const batch of batches) {
    const { totals } = sumsOf(batch);
    for (let i = 0; i < batch.length;) {
      const start = batch[i]!.start;
      const rest = others ? [...totals.get(start)!] : [];
      for (; i < batch.length && batch[i]!.start === start; i++) {
        const row = batch[i]!;
        if (!kept.has(row.key ?? '')) continue;
        rows.push(row);
        if (others) row.sums.split(',').forEach((cell, c) => (rest[c]! -= Number(cell)));
      }
      if (others && (rest[EVENTS] !== 0 || rest[CALLS] !== 0)) rows.push({ start, key: null, sums: rest.join(',') });
    }
  }
  return { rows, keys: ranks.size };
}

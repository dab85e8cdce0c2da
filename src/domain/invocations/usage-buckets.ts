/**
 * A usage summary's buckets as its statements give them (SummedRow: a start, a key, the sums in one text) and as the
 * API writes them (UsageBucketRow), and the order of hours by key.
 */
import { KIND_COUNTS } from '../recording/kind-sql.js';
import { ROLLUP_SUMS } from '../recording/rollup-sql.js';

/**
 * A bucket as its start (ISO 8601 in UTC), its key, and its sums in ROLLUP_SUMS' order (units, input, cached and
 * output tokens, events, cost, unpriced events, calls, failed and refused calls, then the kinds), comma-separated.
 */
export interface UsageSumRow {
  start: string;
  key: string;
  sums: string;
}

/** A sum as its decimal string (it may pass 2^53). */
type DecimalSum = `${bigint}`;

/**
 * One bucket of one series, already in the shape the API writes (UsageBucketDto): the largest summary's tens of
 * thousands of buckets are made once and written as they are, where a copy of each in the wire's names cost the
 * process about a tenth of that answer's CPU.
 */
export interface UsageBucketRow {
  /** ISO 8601 in UTC, as the API writes it. */
  start: string;
  key: string;
  units: DecimalSum;
  inputTokens: DecimalSum;
  cachedInputTokens: DecimalSum;
  outputTokens: DecimalSum;
  events: number;
  costMicros: DecimalSum;
  unpricedEvents: number;
  calls: number;
  failedCalls: number;
  refusedCalls: number;
  /** The kinds beyond text tokens (docs/pricing.md, "Kinds"), each only where the bucket has some. */
  audioInputTokens?: DecimalSum;
  audioOutputTokens?: DecimalSum;
  imageInputTokens?: DecimalSum;
  imageOutputTokens?: DecimalSum;
  images?: DecimalSum;
  audioMs?: DecimalSum;
  characters?: DecimalSum;
  /** The sums of every key beyond the summary's top ones (its key is empty). */
  other?: true;
}

/** A bucket's kinds, in ROLLUP_SUMS' order (after its first ten sums: KIND_COUNTS). */
const BUCKET_KINDS = [
  'audioInputTokens',
  'audioOutputTokens',
  'imageInputTokens',
  'imageOutputTokens',
  'images',
  'audioMs',
  'characters',
] as const satisfies readonly (keyof UsageBucketRow)[];
const FIRST_KIND = ROLLUP_SUMS.length - KIND_COUNTS.length;

/** A bucket as its query returns it: three columns rather than twelve (reading each column costs node-pg a string). */
export interface SummedRow {
  /** Seconds since the epoch, made an ISO string in toBuckets: to_char costs PostgreSQL about a tenth of the query. */
  start: string;
  /** Null: the keys beyond the top ones (TopUsageSummaryQuery.top). */
  key: string | null;
  /** The sums in ROLLUP_SUMS' order, comma-separated. */
  sums: string;
}

/** A start in seconds since the epoch as an ISO string in UTC, written once for the rows of a start (they come by start). */
export function startsAsIso(): (seconds: string) => string {
  let last = '';
  let iso = '';
  return (seconds) => {
    if (seconds !== last) {
      last = seconds;
      iso = new Date(Number(seconds) * 1000).toISOString();
    }
    return iso;
  };
}

/** The buckets of rows that come by start: each start written as an ISO string in UTC once, each row's sums split. */
export function toBuckets(rows: readonly SummedRow[]): UsageBucketRow[] {
  const isoOf = startsAsIso();
  return rows.map((row) => {
    const sums = row.sums.split(',') as DecimalSum[];
    const bucket: UsageBucketRow = {
      start: isoOf(row.start),
      key: row.key ?? '',
      units: sums[0]!,
      inputTokens: sums[1]!,
      cachedInputTokens: sums[2]!,
      outputTokens: sums[3]!,
      events: Number(sums[4]),
      costMicros: sums[5]!,
      unpricedEvents: Number(sums[6]),
      calls: Number(sums[7]),
      failedCalls: Number(sums[8]),
      refusedCalls: Number(sums[9]),
    };
    for (let i = 0; i < BUCKET_KINDS.length; i++) {
      const sum = sums[FIRST_KIND + i]!;
      if (sum !== '0') bucket[BUCKET_KINDS[i]!] = sum;
    }
    if (row.key === null) bucket.other = true;
    return bucket;
  });
}

/**
 * Buckets already written as the API writes them: each text the JSON of a day's buckets, comma-separated, without the
 * array's brackets (UTF-8). A day a usage summary keeps is kept so (usage-summary-repo.ts's usageSummaryPage), and
 * written as it is: making and writing each bucket's JSON again cost an answer of 62,000 buckets most of its CPU.
 */
export interface BucketTexts {
  jsonItems: readonly Buffer[];
}

/** A day's buckets as the API writes them: the day's start (epoch seconds, as its rows give it) and their JSON. */
export type DayJson = readonly [string, Buffer];

/** Rows that come by start, the rows of each start in turn. */
function* runsByStart(rows: readonly SummedRow[]): Generator<SummedRow[]> {
  for (let from = 0; from < rows.length;) {
    let to = from + 1;
    while (to < rows.length && rows[to]!.start === rows[from]!.start) to++;
    yield rows.slice(from, to);
    from = to;
  }
}

/** Rows that come by start, as the JSON of each start's buckets (BucketTexts). */
export function jsonByStart(rows: readonly SummedRow[]): DayJson[] {
  return [...runsByStart(rows)].map((run): DayJson => [run[0]!.start, Buffer.from(JSON.stringify(toBuckets(run)).slice(1, -1))]);
}

/**
 * Hours by key, summed per access and key, made one row per hour and key: rows that come by hour are put in the order
 * of their keys, each hour's few dozen on their own (as PostgreSQL orders the uuids and the empty key in text: by
 * character; sorting a month of hours by key in the query costs it nearly a third more). The rows an event without
 * its call left (no key) are one per access, adjacent once sorted, and their sums are added up.
 */
export function byKeyWithinHour(rows: SummedRow[]): SummedRow[] {
  const out: SummedRow[] = [];
  for (const hour of runsByStart(rows)) {
    for (const row of hour.sort((a, b) => (a.key! < b.key! ? -1 : a.key! > b.key! ? 1 : 0))) {
      const last = out.at(-1);
      if (last?.start === row.start && last.key === row.key) {
        const more = row.sums.split(',');
        out[out.length - 1] = {
          ...last,
          sums: last.sums
            .split(',')
            .map((sum, i) => String(BigInt(sum) + BigInt(more[i]!)))
            .join(','),
        };
      } else out.push(row);
    }
  }
  return out;
}

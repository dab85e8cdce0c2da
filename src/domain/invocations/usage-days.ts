/**
 * The finished days of usage summaries by day, kept in the process: a day's sums never change once the day is over
 * and its calls are recorded, so a summary by day reads again only the days it does not hold (today's, a day not read
 * yet) and takes the others as it read them before. A range's partial first day (the last 30 days' hours from this
 * hour 30 days ago to that day's end) is kept the same way, as a part of its own.
 *
 * A day is kept once it ended more than two hours before the database's clock (FINISHED_AFTER_MS). A statement that
 * adds to an hour that ended more than an hour before (a call recorded late: a spool replayed, a batch settled, a
 * stream longer than an hour) raises the workspace's usage revision in the same statement (rollup-sql.ts); so do
 * cutting its day rollups in another zone and retention's removal of its rollup rows. Each read of a summary asks the
 * revision first, and a day kept at another revision is read again: a late call shows in the next summary, on every
 * process. The hour between the two margins covers the database's and the processes' clocks and a statement under
 * way while a day becomes finished.
 *
 * The days are kept per workspace, zone, grouping and what was read (a summary's rows, an export's lines), at most
 * NEXUS_USAGE_DAY_CACHE_MB in all (the least recently read go first); 0 keeps none.
 */
import type { Queryable } from '../../db/database.js';

const HOUR_MS = 3_600_000;

/** How long after its end a day is kept: an hour more than a late write's (rollup-sql.ts, lateCte). */
const FINISHED_AFTER_MS = 2 * HOUR_MS;

/** A kept day: its rows, the revision they were read at, their size. */
interface Kept {
  revision: string;
  rows: readonly unknown[];
  bytes: number;
}

/** The days kept, least recently read first (a Map's order), bounded by their size. */
export class UsageDayCache {
  private readonly days = new Map<string, Kept>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  /** The day's rows if they were read at `revision`. */
  get<T>(key: string, revision: string): readonly T[] | undefined {
    const kept = this.days.get(key);
    if (!kept) return undefined;
    this.days.delete(key);
    if (kept.revision !== revision) {
      this.bytes -= kept.bytes;
      return undefined;
    }
    this.days.set(key, kept);
    return kept.rows as readonly T[];
  }

  set(key: string, revision: string, rows: readonly unknown[], bytes: number): void {
    const before = this.days.get(key);
    if (before) {
      this.days.delete(key);
      this.bytes -= before.bytes;
    }
    if (bytes > this.maxBytes) return;
    this.days.set(key, { revision, rows, bytes });
    this.bytes += bytes;
    for (const [oldest, kept] of this.days) {
      if (this.bytes <= this.maxBytes) break;
      this.days.delete(oldest);
      this.bytes -= kept.bytes;
    }
  }
}

/** The workspace's usage revision and the database's clock (ms), read together before the days. */
async function usageRevision(q: Queryable, workspaceId: string): Promise<{ revision: string; now: number }> {
  const { rows } = await q.raw<{ rows: { revision: string; now: string }[] }>(
    `select coalesce((select revision from usage_revisions where workspace_id = ?), 0)::text as revision,
            (extract(epoch from now()) * 1000)::int8::text as now`,
    [workspaceId],
  );
  return { revision: rows[0]!.revision, now: Number(rows[0]!.now) };
}

/**
 * The first whole hour of the day in `timeZone` that the hour starting at `ms` falls in (the summary counts an
 * hour in the local day its start falls in): the local midnight, rounded up to its hour.
 */
export function dayStart(ms: number, timeZone: string): number {
  if (timeZone === 'UTC') return Math.floor(ms / (24 * HOUR_MS)) * 24 * HOUR_MS;
  const key = `${timeZone}|${ms}`;
  let start = dayStarts.get(key);
  if (start === undefined) {
    if (dayStarts.size >= MAX_DAY_STARTS) dayStarts.clear();
    start = zoneDayStart(ms, timeZone);
    dayStarts.set(key, start);
  }
  return start;
}

/**
 * dayStart's answers, by zone and hour: a summary asks for the same days again (a year is 365 of them, each a
 * zone's clock read twice), at most MAX_DAY_STARTS (then forgotten at once).
 */
const dayStarts = new Map<string, number>();
const MAX_DAY_STARTS = 100_000;

function zoneDayStart(ms: number, timeZone: string): number {
  const parts = clockOf(timeZone);
  const sinceMidnight = (t: number) => {
    const p = Object.fromEntries(parts.formatToParts(t).map((x) => [x.type, Number(x.value)]));
    return ((p.hour ?? 0) * 3600 + (p.minute ?? 0) * 60 + (p.second ?? 0)) * 1000;
  };
  // Twice: a day that changes its offset (DST) is corrected by the second step.
  let midnight = ms - sinceMidnight(ms);
  const off = sinceMidnight(midnight);
  if (off !== 0) midnight -= off > 12 * HOUR_MS ? off - 24 * HOUR_MS : off;
  return Math.ceil(midnight / HOUR_MS) * HOUR_MS;
}

/** Each zone's clock (hours, minutes, seconds), made once: making one costs about as much as a day's summary reads. */
const clocks = new Map<string, Intl.DateTimeFormat>();

function clockOf(timeZone: string): Intl.DateTimeFormat {
  let clock = clocks.get(timeZone);
  if (!clock) {
    clock = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', hour: 'numeric', minute: 'numeric', second: 'numeric' });
    clocks.set(timeZone, clock);
  }
  return clock;
}

/** A part of a range: a day of it, or its hours before its first whole day; kept once it ended (`keep`). */
interface Part {
  since: number;
  until: number;
  keep: boolean;
}

/**
 * [since, until) (whole hours) cut at the midnights of `timeZone` (the first whole hour of each local day): the hours
 * before its first whole day, each of its days, and the hours of its last day where it ends within one, each part
 * kept (`keep`) where it ended by `finished`. The days after `finished` are one part, read each time.
 */
export function partsOf(since: number, until: number, timeZone: string, finished: number): Part[] {
  const parts: Part[] = [];
  const push = (from: number, to: number) => parts.push({ since: from, until: to, keep: to <= finished });
  let from = dayStart(since, timeZone);
  if (from < since) from = dayStart(from + 25 * HOUR_MS, timeZone);
  if (from > since) push(since, Math.min(from, until));
  for (;;) {
    const next = dayStart(from + 25 * HOUR_MS, timeZone);
    if (next > until || next > finished) break;
    push(from, next);
    from = next;
  }
  if (from < until) push(from, until);
  return parts;
}

/** How a summary's rows are read and kept by day. */
export interface DayReads<T> {
  cache: UsageDayCache;
  db: Queryable;
  workspaceId: string;
  /** What the rows are of, beside the workspace and the day: the zones, the grouping, what is read. */
  kind: string;
  timeZone: string;
  /**
   * The rows of [since, until), ordered by their bucket's start, in batches as they come; `finished`: its days are
   * finished (kept once read), else they are read each time.
   */
  read: (since: Date, until: Date, finished: boolean) => Promise<AsyncIterable<readonly T[]> | readonly T[]>;
  /** The start of the bucket a row is of (ms): the hour its day begins at or before. */
  startOf: (row: T) => number;
  /** About how many bytes a row holds. */
  sizeOf: (row: T) => number;
}

/**
 * The rows of [since, until) in order, in batches: the finished days kept at the workspace's revision as they were
 * kept, the rest read (consecutive days not kept in one read, the days it brings kept as they end). The revision is
 * read before this returns.
 */
export async function rowsByDay<T>(reads: DayReads<T>, since: number, until: number): Promise<AsyncGenerator<readonly T[]>> {
  const { revision, parts } = await partsNow(reads, since, until);
  return inOrder(reads, revision, parts);
}

/** The workspace's usage revision, and [since, until)'s parts by the database's clock (partsOf). */
async function partsNow<T>(reads: DayReads<T>, since: number, until: number): Promise<{ revision: string; parts: Part[] }> {
  const { revision, now } = await usageRevision(reads.db, reads.workspaceId);
  return { revision, parts: partsOf(since, until, reads.timeZone, now - FINISHED_AFTER_MS) };
}

/** The reads of days under way in the background (keptRowsByDay), by workspace, what is read, range and revision. */
const filling = new Set<string>();

/**
 * rowsByDay's, where every part of [since, until) that may be kept is kept; else undefined, and the parts are read
 * and kept in the background (one such read at a time per workspace, what is read, range and revision): for a reader whose
 * own statement answers faster than every key's buckets are read (a top summary's, which reads only its top keys').
 */
export async function keptRowsByDay<T>(
  reads: DayReads<T>,
  since: number,
  until: number,
): Promise<AsyncGenerator<readonly T[]> | undefined> {
  const { revision, parts } = await partsNow(reads, since, until);
  if (parts.every((part) => !part.keep || reads.cache.get(keyOfPart(reads, part), revision))) return inOrder(reads, revision, parts);
  const fill = `${reads.workspaceId}|${reads.kind}|${since}|${until}|${revision}`;
  if (!filling.has(fill)) {
    filling.add(fill);
    void (async () => {
      for await (const _ of inOrder(reads, revision, parts));
    })()
      // A failed read keeps nothing: the next summary's reads the parts again.
      .catch(() => undefined)
      .finally(() => filling.delete(fill));
  }
  return undefined;
}

const keyOfPart = <T>(reads: DayReads<T>, part: Part) => `${reads.workspaceId}|${reads.kind}|${part.since}|${part.until}`;

async function* inOrder<T>(reads: DayReads<T>, revision: string, parts: Part[]): AsyncGenerator<readonly T[]> {
  // The days not yet finished (the last part, never kept) are read at once, while the parts before them are passed on.
  const last = parts.at(-1);
  const unfinished = last && !last.keep && parts.length > 1 ? reads.read(new Date(last.since), new Date(last.until), false) : undefined;
  // Its failure is thrown where it is awaited; a reader that stops before it never awaits it.
  unfinished?.catch(() => undefined);
  for (let i = 0; i < parts.length;) {
    const part = parts[i]!;
    const kept = part.keep ? reads.cache.get<T>(keyOfPart(reads, part), revision) : undefined;
    if (kept) {
      if (kept.length) yield kept;
      i++;
      continue;
    }
    if (!part.keep) {
      yield* batchesOf(await (part === last && unfinished ? unfinished : reads.read(new Date(part.since), new Date(part.until), false)));
      i++;
      continue;
    }
    // The parts from here not kept, read at once.
    let j = i + 1;
    while (j < parts.length && parts[j]!.keep && !reads.cache.get(keyOfPart(reads, parts[j]!), revision)) j++;
    const days = parts.slice(i, j);
    yield* keepDays(reads, revision, days, await reads.read(new Date(days[0]!.since), new Date(days.at(-1)!.until), true));
    i = j;
  }
}

/** A read's batches, whether it gave them all at once or as they came. */
async function* batchesOf<T>(read: AsyncIterable<readonly T[]> | readonly T[]): AsyncGenerator<readonly T[]> {
  if (Symbol.asyncIterator in read) yield* read;
  else if (read.length) yield read;
}

/** The batches of a read of `days` (parts) passed on, each part's rows kept once the rows of a later one (or the end) come. */
async function* keepDays<T>(
  reads: DayReads<T>,
  revision: string,
  days: Part[],
  read: AsyncIterable<readonly T[]> | readonly T[],
): AsyncGenerator<readonly T[]> {
  let d = 0;
  let rows: T[] = [];
  let bytes = 0;
  const keepUpTo = (start: number) => {
    while (d < days.length && days[d]!.until <= start) {
      reads.cache.set(keyOfPart(reads, days[d]!), revision, rows, bytes);
      rows = [];
      bytes = 0;
      d++;
    }
  };
  for await (const batch of batchesOf(read)) {
    for (const row of batch) {
      keepUpTo(reads.startOf(row));
      rows.push(row);
      bytes += reads.sizeOf(row);
    }
    yield batch;
  }
  keepUpTo(Infinity);
}

/** The rows of rowsByDay in one array. */
export async function allRowsByDay<T>(reads: DayReads<T>, since: number, until: number): Promise<T[]> {
  const all: T[] = [];
  for await (const batch of await rowsByDay(reads, since, until)) for (const row of batch) all.push(row);
  return all;
}

/** A bucket's start (epoch seconds, as the summaries' rows give it) as the first whole hour of its day (ms). */
export const hourOfStart = (seconds: string): number => Math.ceil((Number(seconds) * 1000) / HOUR_MS) * HOUR_MS;

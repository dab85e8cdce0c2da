/**
 * Usage summaries read: the workspace's usage by hour or day and by key, from the rollups (rollup-sql.ts; the
 * statements' text is usage-summary-sql.ts's), the first and last hour with usage (an export's bounds), and the time
 * zone names a day may be cut in.
 */
import type { Knex } from 'knex';
import { isEmbedded, type Queryable } from '../../db/database.js';
import { rowBatches } from '../../db/row-batches.js';
import { mergeAdjacent, mergeLines, repeatsKey } from './adjacent-sums.js';
import type { InvocationRepoDeps } from './invocation-repo.js';
import { ROLLUP_SUMS } from '../recording/rollup-sql.js';
import {
  byKeyWithinHour,
  jsonByStart,
  startsAsIso,
  toBuckets,
  type BucketTexts,
  type DayJson,
  type SummedRow,
  type UsageBucketRow,
  type UsageSumRow,
} from './usage-buckets.js';
import { allRowsByDay, hourOfStart, keptRowsByDay, rowsByDay, type DayReads } from './usage-days.js';
import {
  bucketColumns,
  byDayBucketsSql,
  COUNT_CELLS,
  byDaySql,
  GROUP_KEYS,
  otherZoneDaysSql,
  startOf,
  tablesOf,
  type UsageGroupBy,
  type UsageSummaryQuery,
} from './usage-summary-sql.js';
import { topOfRows } from './usage-top.js';

export type { UsageBucketRow } from './usage-buckets.js';

/** A summary of some of its keys (topUsageSummary): those ranked `offset` + 1 to `offset` + `top`. */
export interface TopUsageSummaryQuery extends UsageSummaryQuery {
  /**
   * At most this many series, the keys that cost most over the range (then units, then key): the other keys' sums
   * are one series a bucket, its key null in the query and the bucket marked `other`.
   */
  top: number;
  /** The keys ranked before the series, skipped (summed in `other` too). */
  offset: number;
}

/** The buckets of a top summary, and how many keys the range has (ranked: the series and the others). */
export interface TopUsageSummary {
  buckets: UsageBucketRow[];
  keys: number;
}

/**
 * The first and last UTC hour of [since, until) in which the workspace has usage (undefined: none), read from the
 * rollup's primary key (workspace, hour): an export reads only what lies between them.
 */
export async function usageHours(
  { db }: InvocationRepoDeps,
  workspaceId: string,
  since: Date,
  until: Date,
  q: Queryable = db,
): Promise<{ first: Date; last: Date } | undefined> {
  const row = (await q('usage_rollups')
    .where('workspace_id', workspaceId)
    .where('hour', '>=', since)
    .where('hour', '<', until)
    .min('hour as first')
    .max('hour as last')
    .first()) as { first: Date | null; last: Date | null } | undefined;
  return row?.first && row.last ? { first: new Date(row.first), last: new Date(row.last) } : undefined;
}

/**
 * The workspace's events in [since, until) (whole UTC hours) summed per UTC hour or day and per
 * key, oldest first: from the rollups (src/domain/recording/rollup-sql.ts), the events and calls already summed per hour, read along
 * their primary key's workspace and hour. By model, connection or plan: usage_rollups (per hour, access, key,
 * model, connection and plan). By access or key: usage_key_rollups (per hour, access and key), where a month of
 * hours by key is a row per bucket, read as it is, and hours by access are the keys' rows summed as they come.
 * UTC days are binned from a UTC midnight (date_bin: about half the cost of a date_trunc in a time zone);
 * other zones' days start at their local midnight (date_trunc in the zone), and an hour counts in the local
 * day its start falls in. Days in the workspace's own zone are read from the day rollups where whole, the
 * hours only at the range's edges (usageByDay).
 *
 * The planner, which cannot tell how many buckets a month holds, would rather hash hours by access (spilling to
 * disk) or sort the whole range first; it is told not to, in the statement's own transaction: no hashing, no
 * parallel sort, and the rollup's pages read in index order cost about what they cost read in turn (they are in
 * memory). Hours by key come by access within an hour, and are put in the order of their keys here
 * (byKeyWithinHour). A month of hours is read by a few queries at once (the service's slices). By day, where the
 * process keeps days, usageSummaryPage reads only the days it does not keep.
 */
export async function usageSummary(deps: InvocationRepoDeps, query: UsageSummaryQuery): Promise<UsageBucketRow[]> {
  return toBuckets(await summedRows(deps.db, query));
}

/**
 * usageSummary's buckets, or by day where the process keeps days, their JSON a day at a time (BucketTexts): each
 * finished day's kept as it is written, made from its rows as kept (which top summaries read: they are read and kept
 * where they are not), and the other days' made from their rows as they are read (dayReads, usage-days.ts).
 */
export async function usageSummaryPage(deps: InvocationRepoDeps, query: UsageSummaryQuery): Promise<UsageBucketRow[] | BucketTexts> {
  const rows = dayReads(deps, query, deps.db);
  if (!rows) return usageSummary(deps, query);
  const json: DayReads<DayJson> = {
    ...rows,
    kind: `json|${rows.kind}`,
    read: async (since, until, finished) =>
      jsonByStart(finished ? await allRowsByDay(rows, since.getTime(), until.getTime()) : await rows.read(since, until)),
    startOf: ([start]) => hourOfStart(start),
    sizeOf: ([, text]) => ROW_BYTES + text.length,
  };
  return { jsonItems: (await allRowsByDay(json, query.since.getTime(), query.until.getTime())).map(([, text]) => text) };
}

/**
 * Whether a part of a summary by day in another zone than the workspace's is better read from its hours alone: one
 * of two days at most (today's, a range's first) holds no whole day of the workspace's, and the statement that reads
 * whole days (otherZoneDaysSql) scanned every hourly row of the workspace to find none (23 ms at 69,000 rows).
 */
const hoursOnly = (query: UsageSummaryQuery, since: Date, until: Date) =>
  query.timeZone !== query.workspaceTimeZone && aDayOrTwo({ since, until });

/** A range of two days at most: today's, or a kept range's edge (usage-days.ts reads the rest from its days). */
const aDayOrTwo = ({ since, until }: { since: Date; until: Date }) => until.getTime() - since.getTime() <= 2 * 86_400_000;

/** About what a summary's row holds beside its key and sums: the object, its start, its strings' headers. */
const ROW_BYTES = 96;

/** A summary's rows by day: read whole (summedRows). */
interface RowReads extends DayReads<SummedRow> {
  read: (since: Date, until: Date) => Promise<SummedRow[]>;
}

/**
 * How a summary by day is read and its finished days kept (usage-days.ts), the rows of a day per zone, workspace
 * zone and grouping; undefined by hour, or where the process keeps no day.
 */
function dayReads({ days }: InvocationRepoDeps, query: UsageSummaryQuery, q: Queryable): RowReads | undefined {
  if (query.granularity !== 'day' || !days.enabled) return undefined;
  return {
    cache: days,
    db: q,
    workspaceId: query.workspaceId,
    kind: `rows|${query.timeZone}|${query.workspaceTimeZone ?? ''}|${query.groupBy}`,
    timeZone: query.timeZone,
    read: (since, until) =>
      summedRows(q, { ...query, since, until, workspaceTimeZone: hoursOnly(query, since, until) ? undefined : query.workspaceTimeZone }),
    startOf: (row) => hourOfStart(row.start),
    sizeOf: (row) => ROW_BYTES + row.sums.length + (row.key?.length ?? 0),
  };
}

/**
 * A day of an export by day and user: its start (epoch seconds) and its lines, as they are written (UTF-8): a kept
 * day is written as it was kept, with no copy made for the socket.
 */
type DayLines = readonly [string, Buffer];

/**
 * A page of an export: its buckets as their sums (UsageSumRow), or its lines already made (CSV lines, each ending in
 * CRLF, as UTF-8).
 */
export type UsageSumPage = UsageSumRow[] | Buffer;

/**
 * The summary's buckets as their sums in one text each (UsageSumRow), in batches of `size`, for its CSV export, which
 * writes them as they are: a bucket object made of each, then a line of it, cost the process about a fifth of the
 * export's time. Hours by key are put in the order of their keys as usageSummary puts them (byKeyWithinHour). By day
 * from the day rollups by access or key (a row per day and user) on PostgreSQL, the statement makes the lines itself,
 * a day's in one text (byDayBucketsSql's `csv`, the workspace's `currency` among their cells), and each day comes as
 * the statement sends it (rowBatches): its start is written here, once a line, and the text is the page. At a month of
 * 2,000 users, a row, an object and three strings a bucket cost the process more CPU than the statement's sums. A day
 * whose whole-day rows hold a bucket of several rows (an access's keys: a line with the key of the line before it,
 * repeatsKey) has its lines added up here (mergeLines); a day of a row a bucket is written as it came. The finished
 * days' lines, or rows, the process keeps are written as they were kept (usage-days.ts).
 */
export async function usageSummarySumBatches(
  deps: InvocationRepoDeps,
  query: UsageSummaryQuery,
  size: number,
  currency: string,
): Promise<AsyncIterable<UsageSumPage>> {
  const { db, days } = deps;
  const isoOf = startsAsIso();
  if (userDaysOf(query) && !isEmbedded(db as Knex)) {
    // A day's lines, as they are written.
    const read = async (since: Date, until: Date) => {
      const userDays = userDaysOf({ ...query, since, until })!;
      const bound = { ...userDays.bound, currency };
      // A day or two (today's, a kept range's edges) is read as it is, as usageSummary reads it: the statement's own
      // transaction cost three round trips more than the statement.
      const batches = aDayOrTwo({ since, until })
        ? [((await db.raw(userDays.lines, bound)).rows as { start: string; lines: string }[]).map((r) => [r.start, r.lines])]
        : await rowBatches(db as Knex, userDays.lines, bound, NO_HASHING, 1);
      return (async function* () {
        for await (const rows of batches) {
          yield (rows as [string, string][]).map(([start, made]): DayLines => {
            const head = `${isoOf(start)},`;
            const lines = repeatsKey(made) ? mergeLines(made, COUNT_CELLS) : made;
            return [start, Buffer.from(`${head}${lines.replaceAll('\r\n', `\r\n${head}`)}\r\n`)];
          });
        }
      })();
    };
    const batches = days.enabled
      ? await rowsByDay<DayLines>(
          {
            cache: days,
            db,
            workspaceId: query.workspaceId,
            kind: `lines|${query.timeZone}|${query.groupBy}|${currency}`,
            timeZone: query.timeZone,
            read,
            startOf: ([start]) => hourOfStart(start),
            sizeOf: ([, lines]) => ROW_BYTES + lines.length,
          },
          query.since.getTime(),
          query.until.getTime(),
        )
      : await read(query.since, query.until);
    return (async function* () {
      for await (const batch of batches) for (const [, lines] of batch) yield lines;
    })();
  }
  const reads = dayReads(deps, query, db);
  const rows = reads ? await allRowsByDay(reads, query.since.getTime(), query.until.getTime()) : await summedRows(db, query);
  return (async function* () {
    for (let from = 0; from < rows.length; from += size)
      yield rows.slice(from, from + size).map((row) => ({ start: isoOf(row.start), key: row.key ?? '', sums: row.sums }));
  })();
}

/**
 * The rows of a statement that reads another zone's days from the day rollups (otherZoneDaysSql), run without JIT:
 * the planner, which cannot tell how few hours the zones cut apart, costs it high enough to compile it (some 600 ms,
 * for a statement of a few milliseconds).
 */
async function rowsWithoutJit(q: Queryable, sql: string, bound: Knex.ValueDict): Promise<unknown[]> {
  return q.transaction(async (trx) => {
    await trx.raw(`select set_config('jit', 'off', true)`);
    return (await trx.raw(sql, bound)).rows as unknown[];
  });
}

/** The statement's settings where it sums a bucket per day and user: sorted and summed in turn, not hashed. */
const NO_HASHING = `select set_config('enable_hashagg', 'off', true)`;

/**
 * The statement of a summary by day in the workspace's zone by access or key (a bucket per day and user: a month of
 * 2,000 users, 62,000 buckets of a row or two each), the edges' hours summed per key, the whole days' rows as they are
 * (a bucket's rows next to each other, added up by mergeAdjacent), the parts merged (byDayBucketsSql); undefined for
 * any other summary.
 */
function userDaysOf(query: UsageSummaryQuery): { sql: string; lines: string; bound: Knex.ValueDict } | undefined {
  const { table, days } = tablesOf(query.groupBy);
  if (query.granularity !== 'day' || query.timeZone !== query.workspaceTimeZone || days !== 'usage_day_key_rollups') return undefined;
  return {
    sql: byDayBucketsSql(query, days, table, GROUP_KEYS[query.groupBy]),
    lines: byDayBucketsSql(query, days, table, GROUP_KEYS[query.groupBy], true),
    bound: { workspaceId: query.workspaceId, since: query.since, until: query.until },
  };
}

/** The rows of the summary's buckets (usageSummary), oldest first, then by key. */
async function summedRows(q: Queryable, query: UsageSummaryQuery): Promise<SummedRow[]> {
  const inRange = 'workspace_id = ? and hour >= ? and hour < ?';
  const bindings = [query.workspaceId, query.since, query.until];
  const { table, days } = tablesOf(query.groupBy);
  const key = GROUP_KEYS[query.groupBy];
  if (query.granularity === 'hour' && days === 'usage_day_key_rollups') {
    return q.transaction(async (trx) => {
      await trx.raw(
        `select set_config('enable_hashagg', 'off', true), set_config('max_parallel_workers_per_gather', '0', true),
                set_config('random_page_cost', '1.1', true)`,
      );
      const result = await trx.raw(
        query.groupBy === 'key'
          ? `select ${bucketColumns('hour', key, false)}
               from usage_key_rollups where ${inRange}
              order by hour, workspace_access_id, inference_key_id`
          : `select ${bucketColumns('hour', key)}
               from usage_key_rollups where ${inRange}
              group by hour, workspace_access_id
              order by hour, workspace_access_id`,
        bindings,
      );
      const rows = result.rows as SummedRow[];
      return query.groupBy === 'key' ? byKeyWithinHour(rows) : rows;
    });
  }
  if (query.granularity === 'day' && query.timeZone === query.workspaceTimeZone) {
    const userDays = userDaysOf(query);
    // A day or two (today's, kept days' edges) is read as it is: its buckets fit in memory however they are summed,
    // and the statement's own transaction cost three round trips more than the statement.
    if (userDays && aDayOrTwo(query)) {
      return mergeAdjacent((await q.raw(userDays.sql, userDays.bound)).rows as SummedRow[]);
    }
    if (userDays) {
      return q.transaction(async (trx) => {
        await trx.raw(NO_HASHING);
        return mergeAdjacent((await trx.raw(userDays.sql, userDays.bound)).rows as SummedRow[]);
      });
    }
    const sql = byDaySql(query, days, table, key, bucketColumns('start', 'key'), 'group by x.start, x.key order by x.start, x.key');
    return (await q.raw(sql, { workspaceId: query.workspaceId, since: query.since, until: query.until })).rows as SummedRow[];
  }
  if (query.granularity === 'day' && query.workspaceTimeZone !== undefined) {
    // Another zone's days: the workspace's whole days from their rows, the hours only where the zones' days differ.
    const sql = otherZoneDaysSql(
      query,
      days,
      table,
      key,
      bucketColumns('start', 'key'),
      'group by x.start, x.key having sum_int8(x.events) <> 0 or sum_int8(x.calls) <> 0 order by x.start, x.key',
    );
    return (await rowsWithoutJit(q, sql, { workspaceId: query.workspaceId, since: query.since, until: query.until })) as SummedRow[];
  }
  const start = startOf(query);
  const result = await q.raw(
    `select ${bucketColumns(start, key)}
       from ${table} where ${inRange}
      group by ${start}, ${key}
      order by ${start}, ${key}`,
    bindings,
  );
  return result.rows as SummedRow[];
}

/**
 * The summary of the keys ranked `offset` + 1 to `offset` + `top` by cost over the range (then units, then key), and
 * every other key summed as one (null) key, last in its bucket; in one statement. The rollup rows the summary reads
 * (a row per bucket start, key and whatever else the rollup keeps: the day rollups' whole days where it reads them,
 * by day in the workspace's zone and in any other zone, as summedRows) are read three ways, none
 * of them into a bucket per start and key (12,000 for a month of 2,000 users by day):
 * - `ranked`: each key's cost and units over the range (two sums a row, grouped by the key's own column). A key's
 *   sums over the whole range are the same whatever zone's days cut it: by day in another zone than the workspace's, they
 *   are summed from the workspace's own days (byDaySql: its whole days' rows and the edge hours, none of the hours
 *   the two zones cut apart);
 * - `tops`: the buckets of the series' keys, their rows picked in the scan (a filter on the key's column, before the
 *   row's sums are read);
 * - `totals`: every key's sums a bucket, from the rollup that sums the fewest rows for it: by day from the day
 *   rollups, the day rollup by model, connection and plan (a few dozen rows a day, whatever the number of users); by
 *   hour, and days summed from the hours, the grouping's own.
 * The other keys' series of a bucket is its totals less its top keys' buckets, where its rows counted an event or a
 * call (every rollup row counts one: there are rows of other keys). The totals are read only where the range has keys
 * beyond the series (more ranked than kept): with 8 users and a top of 9 there is no other series to take them for.
 * A zone's day made of a workspace day's row less its hours in another may sum to nothing (otherZoneDaysSql): no
 * bucket, as the hours give none. Keys are text, the empty string for none. By day where the process keeps the
 * range's finished days, the summary is made from them in the process instead (usage-top.ts), to the same answer.
 */
export async function topUsageSummary(
  deps: InvocationRepoDeps,
  query: TopUsageSummaryQuery,
  q: Queryable = deps.db,
): Promise<TopUsageSummary> {
  // By day, from every key's buckets where the process keeps the range's finished days (usage-top.ts); else from the
  // statement below, which reads only the top keys' rows, while the days are read to be kept.
  const reads = dayReads(deps, query, q);
  const kept = reads && (await keptRowsByDay(reads, query.since.getTime(), query.until.getTime()));
  if (kept) {
    const batches: (readonly SummedRow[])[] = [];
    for await (const batch of kept) batches.push(batch);
    const made = await topOfRows(batches, query.top, query.offset, (tied) => inTextOrder(q, tied));
    if (made) return { buckets: toBuckets(made.rows), keys: made.keys };
  }
  const own = query.workspaceTimeZone;
  const byDay = query.granularity === 'day' && query.timeZone === own;
  // Another zone's days from the workspace's day rollups (summedRows).
  const otherDays = !byDay && query.granularity === 'day' && own !== undefined;
  const column = GROUP_KEYS[query.groupBy];
  const rowsOf = (groupBy: UsageGroupBy, select: string, where = 'true', asked: UsageSummaryQuery = query, daysWhere = where) => {
    const { table, days } = tablesOf(groupBy);
    const key = GROUP_KEYS[groupBy];
    if (asked.granularity === 'day' && asked.timeZone === own) return byDaySql(asked, days, table, key, select, '', where, daysWhere);
    if (otherDays) return otherZoneDaysSql(asked, days, table, key, select, '', where, daysWhere);
    return `select ${select}
           from (select ${startOf(asked)} as start, ${GROUP_KEYS[groupBy]} as key, ${table}.*
                   from ${table} where workspace_id = :workspaceId and hour >= :since and hour < :until and ${where}) x`;
  };
  const sums = ROLLUP_SUMS.map((s) => `sum_int8(${s}) as ${s}`).join(', ');
  // The series' rows. In the hourly rollups' scans an index condition (their key is the workspace, the hour, then
  // the access: a descent per key, over the range's index entries alone). In the day rollups' a filter (the same rows;
  // the planner makes no index condition of a coalesce): their key puts the day and the zone before the access, and
  // a descent per key over every day row of the range cost more than reading them all (2,000 users, 30 days: 9 x
  // 60,000 entries).
  const inTop = `${column} = any(array(select key from top))`;
  const sql = `with ranked as (
       ${rowsOf(query.groupBy, `key, sum_int8(cost_micros) as cost, sum_int8(units) as units`, 'true', otherDays ? { ...query, timeZone: own } : query)}
        group by key
     ), top as (
       select key from ranked order by cost desc, units desc, key::text limit :top offset :offset
     ), tops as (
       ${rowsOf(query.groupBy, `start, key, ${sums}`, inTop, query, `coalesce(${inTop}, false)`)} group by start, key
       ${otherDays ? 'having sum_int8(events) <> 0 or sum_int8(calls) <> 0' : ''}
     ), totals as (
       ${rowsOf(byDay || otherDays ? 'model' : query.groupBy, `start, ${sums}`)} group by start
     ), others as (
       select t.start, ${ROLLUP_SUMS.map((s) => `t.${s} - coalesce(o.${s}, 0) as ${s}`).join(', ')}
         from totals t left join (select start, ${ROLLUP_SUMS.map((s) => `sum_int8(${s}) as ${s}`).join(', ')} from tops group by start) o
              on o.start = t.start
        where (select count(*) from ranked) > (select count(*) from top)
     )
     select ${bucketColumns('start', 'key', false)}, (select count(*) from ranked)::int as keys
       from (select start, key::text as key, ${ROLLUP_SUMS.join(', ')} from tops
             union all
             select start, null, ${ROLLUP_SUMS.join(', ')} from others where events <> 0 or calls <> 0) b
      order by b.start, b.key`;
  const bound = { workspaceId: query.workspaceId, since: query.since, until: query.until, top: query.top, offset: query.offset };
  const rows = (otherDays ? await rowsWithoutJit(q, sql, bound) : (await q.raw(sql, bound)).rows) as (SummedRow & { keys: number })[];
  // No row: no usage in the range, so no key either.
  return { buckets: toBuckets(rows), keys: rows[0]?.keys ?? 0 };
}

/** Keys in the order the database puts them as text (its collation): topUsageSummary's last order, of keys tied in cost and units. */
async function inTextOrder(q: Queryable, keys: string[]): Promise<string[]> {
  const { rows } = await q.raw<{ rows: { key: string }[] }>(
    'select value as key from json_array_elements_text(cast(? as json)) order by 1',
    [JSON.stringify(keys)],
  );
  return rows.map((r) => r.key);
}

/**
 * The time zone names the database knows (pg_timezone_names) and Intl does too (an export's slices are cut
 * at local midnights), read once: the list only changes with the server.
 */
export function timeZones({ db, zones }: InvocationRepoDeps): Promise<ReadonlySet<string>> {
  zones.names ??= db
    .raw('select name from pg_timezone_names')
    .then((result) => new Set((result.rows as { name: string }[]).map((r) => r.name).filter(intlKnows)))
    .catch((err: unknown) => {
      zones.names = undefined;
      throw err;
    });
  return zones.names;
}

function intlKnows(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
    return true;
  } catch {
    return false;
  }
}

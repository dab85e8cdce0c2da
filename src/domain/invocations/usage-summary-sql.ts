/**
 * The SQL text of usage summaries (usage-summary-repo.ts runs it): which rollups a grouping is summed from, a
 * bucket's start and columns, and the summary by day in the workspace's zone from day rollups and edge hours.
 */
import { ROLLUP_SUMS } from '../recording/rollup-sql.js';

export type UsageGranularity = 'hour' | 'day';
export type UsageGroupBy = 'model' | 'access' | 'connection' | 'key' | 'plan';

export interface UsageSummaryQuery {
  workspaceId: string;
  since: Date;
  until: Date;
  granularity: UsageGranularity;
  groupBy: UsageGroupBy;
  /** The IANA zone whose days the day buckets are (one of timeZones()). */
  timeZone: string;
  /**
   * The workspace's own zone, whose days usage_day_rollups keeps: a summary by day in it reads its whole days there
   * (usageByDay). Left out, or another zone: the hours are summed.
   */
  workspaceTimeZone?: string | undefined;
}

/** The series key of each grouping (usage_rollups' columns; an access's uuid is grouped as one, not as text). */
export const GROUP_KEYS: Record<UsageGroupBy, string> = {
  model: 'model',
  access: 'workspace_access_id',
  connection: 'provider_connection_id',
  key: 'inference_key_id',
  plan: 'plan_id',
};

/**
 * A bucket's columns (usage-summary-repo.ts's SummedRow) from the rollup's rows grouped by `start` and `key`, or from a row that is a bucket
 * (`summed` false). The sums are bigints (sum_int8: the built-in sum of a bigint is a numeric, slower to convert),
 * written in one text (concat_ws costs PostgreSQL no more than a column each).
 */
export const bucketColumns = (start: string, key: string, summed = true) =>
  `date_part('epoch', ${start})::int8::text as start, ${key} as key,
   concat_ws(',', ${ROLLUP_SUMS.map((column) => (summed ? `sum_int8(${column})` : column)).join(', ')}) as sums`;

/** The hourly rollup a grouping is summed from, and its day rollup. */
export function tablesOf(groupBy: UsageGroupBy): { table: string; days: string } {
  return groupBy === 'access' || groupBy === 'key'
    ? { table: 'usage_key_rollups', days: 'usage_day_key_rollups' }
    : { table: 'usage_rollups', days: 'usage_day_rollups' };
}

/** A bucket's start from an hourly rollup's hour: the hour, or the start of its day (UTC, or in the zone). */
export function startOf(query: UsageSummaryQuery): string {
  if (query.granularity === 'hour') return 'hour';
  return query.timeZone === 'UTC'
    ? `date_bin('1 day', hour, timestamptz '2000-01-01T00:00:00Z')`
    : `date_trunc('day', hour, ${sqlString(query.timeZone)})`;
}

/** The start of the local day after the day starting at `day` (an SQL expression) in `zone` (an SQL literal). */
const nextDay = (day: string, zone: string) => `((${day} at time zone ${zone}) + interval '1 day') at time zone ${zone}`;

/** The first whole UTC hour at or after `at` (an SQL expression). */
const ceilHour = (at: string) =>
  `date_bin('1 hour', ${at} + interval '1 hour' - interval '1 microsecond', timestamptz '2000-01-01T00:00:00Z')`;

/**
 * The summary by day in the workspace's zone: its whole days read from `days` (a day rollup: a row per day and
 * series), the hours of the days the range cuts at either edge from `table` (an hourly rollup), each hour summed in the local
 * day its start falls in, as the hourly summary sums it (the answer is the same to the unit). The days read are those
 * after the day of the hour before `since` and before the day of `until`: every hour of them lies in the range, and
 * the hours are read from the range's start to the first hour of the first of them (`edge_from`), and from the first
 * hour of the day of `until` (`edge_to`, never before `edge_from`: a range of no whole day is read as hours). Where
 * the workspace has days of another zone (kept before its zone changed: none once rebuilt, workspace-repo.ts) near
 * the range, the whole range is read as hours.
 *
 * The day of `until` is read from its day row instead of its hours when the range holds all of that day's hours
 * with usage (`tail_whole`): none at or after `until` in the hourly rollup (one probe of its primary key), the day
 * starts at or after the range's edges above, and the rollup retention has removed none of its hours (its start is
 * within the workspace's retention of now; a day the cutoff falls in keeps its row, history-repo.ts). The day row
 * is then the sum of exactly the hours the range holds of it: "this month" and "the last 30 days" up to now read
 * today's row, not today's hours of every series (a row per hour and user by user, per hour and user and model by
 * model).
 *
 * `where`: a condition on the rows of both rollups (their own columns), in each of their scans; `daysWhere`, the
 * same condition as the day rollup's scan is to have it (where it differs in form only: topUsageSummary's).
 */
export function byDaySql(
  query: UsageSummaryQuery,
  days: string,
  table: string,
  key: string,
  select: string,
  tail: string,
  where = 'true',
  daysWhere = where,
): string {
  const zone = sqlString(query.timeZone);
  const { wholeDays, hoursBefore, hoursAfter } = byDayScans(zone);
  const hours = (inRange: string) => `select date_trunc('day', hour, ${zone}), ${key}, ${ROLLUP_SUMS.join(', ')}
               from ${table} where ${inRange} and ${where}`;
  return `${byDaySpans(zone, days, table)}
     select ${select}
       from (select day as start, ${key} as key, ${ROLLUP_SUMS.join(', ')}
               from ${days} where ${wholeDays} and ${daysWhere}
             union all
             ${hours(hoursBefore)}
             union all
             ${hours(hoursAfter)}) x
     ${tail}`;
}

/**
 * byDaySql's buckets (the summary's rows: usage-summary-repo.ts's SummedRow), oldest first, then by key, from its three
 * parts (the hours before the first whole day, the whole days, the hours after the last), whose buckets are apart: the
 * hours before a day read from its row lie in the days before it (all in `after_day`), those after in the days after
 * (all in the day of `until`, `before_day`). The whole days' rows are not summed here: a row per day, access and key,
 * they come in the order of the day rollup's primary key (workspace, day, zone, access, key), as their sums' text, and
 * the rows of one bucket (an access's keys; by key, the accesses' rows without a key) come next to each other, for
 * the reader to add up (mergeAdjacent in usage-summary-repo.ts): at a month of 2,000 users of a key each, every
 * bucket is one row, and its 17 sums' transitions were most of the statement's CPU. Each edge's hours are summed per
 * key into its one day (no zone's day computed per hour), or, where the whole range is read as hours (`days` false),
 * per local day and key. The parts are merged in order (a Merge Append), instead of every row of the range sorted at
 * once, which spilled to disk at a month of 2,000 users.
 *
 * With `csv` (an export's, usage-summary-repo.ts's usageSummarySumBatches), each bucket is its line after its start (the
 * key, then csvCells), and a row is a day: its start, its lines in one text, a CRLF between them, in the buckets'
 * order (the aggregate's own `order by`, which the subquery's order already gives it; the tests compare the lines
 * with the summary's buckets, and `npm run bench:console` counts a month's 62,000 lines). The whole days' rows are not
 * summed here either: each is its line as it is, and where a day holds a bucket of several rows (a line's key the
 * same as the line's before it), the reader adds up its lines (adjacent-sums.ts's repeatsKey and mergeLines).
 * Grouping the day rows into buckets (a bucket a row at a month of 2,000 users of a key each: a group's states made
 * and ended for every row) took a slice of 22,000 day rows 56 ms of its backend's CPU, 40 as lines; flagging the
 * days with a window's `lag` cost 8 of those back, where the reader finds them in about 4 ms an export.
 */
export function byDayBucketsSql(query: UsageSummaryQuery, days: string, table: string, key: string, csv = false): string {
  const zone = sqlString(query.timeZone);
  const { wholeDays, hoursBefore, hoursAfter } = byDayScans(zone);
  const sums = csv
    ? csvCells((column) => `sum_int8(${column})`)
    : `concat_ws(',', ${ROLLUP_SUMS.map((column) => `sum_int8(${column})`).join(', ')})`;
  const inOneDay = (day: string, inRange: string) => `select (select ${day} from spans) as start, ${key} as key, ${sums} as sums
               from ${table} where ${inRange} and (select days from spans)
              group by ${key}`;
  const buckets = `${inOneDay('after_day', hoursBefore)}
             union all
             select date_trunc('day', hour, ${zone}) as start, ${key} as key, ${sums} as sums
               from ${table} where ${hoursBefore} and not (select days from spans)
              group by 1, 2
             union all
             ${
               csv
                 ? `select day, ${key}, ${csvCells((column) => column)} from ${days} where ${wholeDays}`
                 : `select day, ${key}, concat_ws(',', ${ROLLUP_SUMS.join(', ')}) from ${days} where ${wholeDays}`
             }
             union all
             ${inOneDay('before_day', hoursAfter)}`;
  if (!csv) {
    return `${byDaySpans(zone, days, table)}
     select date_part('epoch', b.start)::int8::text as start, b.key, b.sums
       from (${buckets}) b
      order by b.start, b.key`;
  }
  return `${byDaySpans(zone, days, table)}
     select date_part('epoch', d.start)::int8::text as start, string_agg(d.line, E'\\r\\n' order by d.key) as lines
       from (select b.start, b.key, coalesce(b.key::text, '') || ',' || b.sums as line from (${buckets}) b order by b.start, b.key) d
      group by d.start
      order by d.start`;
}

/** The sums (in ROLLUP_SUMS' order) that are counts: an export writes them as numbers, even where negative. */
export const COUNT_CELLS: readonly number[] = [4, 6, 7, 8, 9];

/**
 * A bucket's cells after its key in an export's line (src/handlers/money/csv.ts's usageSumLines), each sum `valueOf` a
 * column of the rollup (summed over the rows grouped into it, or a row's own): its first ten sums, the currency
 * (`:currency`, three capital letters by the workspaces' check: its own cell), then the kinds. A negative sum is
 * written as a text cell is (a leading apostrophe), but for the counts (events, unpriced events, calls, failed and
 * refused calls), which the export writes as numbers (COUNT_CELLS).
 */
function csvCells(valueOf: (column: string) => string): string {
  const summed = ROLLUP_SUMS.map(valueOf);
  const counts = new Set(COUNT_CELLS);
  const cells = (each: (sum: string, i: number) => string) =>
    `concat_ws(',', ${summed.slice(0, 10).map(each).join(', ')}, cast(:currency as text), ${summed
      .slice(10)
      .map((sum, i) => each(sum, 10 + i))
      .join(', ')})`;
  const signed = (sum: string, i: number) =>
    counts.has(i) ? `${sum}::text` : `case when ${sum} < 0 then '''' || ${sum} else ${sum}::text end`;
  return `case when least(${summed.join(', ')}) < 0 then ${cells(signed)} else ${cells((sum) => sum)} end`;
}

/**
 * The rows byDaySql's three parts read, within its `spans` (byDaySpans): the whole days of the day rollup, and the
 * hours of the hourly rollup before the first of them and after the last.
 */
function byDayScans(zone: string) {
  return {
    wholeDays: `workspace_id = :workspaceId and time_zone = ${zone}
                and day > (select after_day from spans) and day < (select days_to from spans) and (select days from spans)`,
    hoursBefore: 'workspace_id = :workspaceId and hour >= :since and hour < (select hours_to from spans)',
    hoursAfter: 'workspace_id = :workspaceId and hour >= (select hours_from from spans) and hour < :until and (select days from spans)',
  };
}

/**
 * byDaySql's bounds (a CTE `spans`, ending its `with`): the days read from the day rollup (after `after_day`, before
 * `days_to`, none unless `days`), and the hours read from the hourly rollup (from `:since` to `hours_to`, and from
 * `hours_from` to `:until` where `days`).
 */
function byDaySpans(zone: string, days: string, table: string): string {
  return `with edges as (
       select date_trunc('day', cast(:since as timestamptz) - interval '1 hour', ${zone}) as after_day,
              date_trunc('day', cast(:until as timestamptz), ${zone}) as before_day
     ), bounds as (
       select after_day, before_day, ${ceilHour(nextDay('after_day', zone))} as edge_from,
              ${ceilHour('before_day')} as edge_to, ${nextDay('before_day', zone)} as day_after,
              exists (select 1 from ${days} o where o.workspace_id = :workspaceId and o.time_zone < ${zone}
                         and o.day > cast(:since as timestamptz) - interval '2 days' and o.day < :until)
              or exists (select 1 from ${days} o where o.workspace_id = :workspaceId and o.time_zone > ${zone}
                         and o.day > cast(:since as timestamptz) - interval '2 days' and o.day < :until) as mixed
         from edges
     ), tail as (
       select bounds.*, not mixed and edge_to >= edge_from and edge_to >= :since
              and before_day >= now() - (select rollup_retention_days from workspaces where id = :workspaceId) * interval '1 day'
              and not exists (select 1 from ${table} t where t.workspace_id = :workspaceId and t.hour >= :until and t.hour < day_after)
              as tail_whole
         from bounds
     ), spans as (
       select after_day, before_day, case when tail_whole then day_after else before_day end as days_to,
              case when mixed then :until else least(edge_from, :until) end as hours_to,
              case when tail_whole then :until else greatest(edge_to, edge_from, :since) end as hours_from, not mixed as days
         from tail
     )`;
}

/**
 * The summary by day in a zone other than the workspace's (`query.timeZone`), from the workspace's day rollups where
 * they hold whole days: each workspace day `X` wholly in the range (its start at or after `since` and within the
 * rollup retention, its end at or before `until`; none where days of another zone lie near the range, as byDaySql)
 * is its day row, summed in the zone's day its middle hour falls in (`major`), less its hours that fall in another
 * of the zone's days, which are summed in their own (each hour in the day its start falls in, as the hours are
 * summed). A workspace day's hours in the major day are those from the first hour of that day to the first hour of
 * the next (as byDaySql's edges): its other hours (`parts`) are at its start, all in the zone's day before the major
 * one, and at its end, all in the day after it (a zone's day is at least 23 hours, half a workspace's day at most 12
 * and a half), read by a range scan of the hourly rollup each and summed per part and key (`minor`) before the
 * buckets are: at most 12 hours of a day are read, and no hour's day is computed. The hours before the first whole
 * day and after the last are read and summed as they are. A bucket whose sums are of no event and no call (a day
 * row less every hour of it) is left out: every rollup row counts one.
 *
 * `where`, `daysWhere`: a condition on the rows of both rollups (their own columns), in each of their scans (as
 * byDaySql's).
 */
export function otherZoneDaysSql(
  query: UsageSummaryQuery,
  days: string,
  table: string,
  key: string,
  select: string,
  tail: string,
  where = 'true',
  daysWhere = where,
): string {
  const zone = sqlString(query.timeZone);
  const own = sqlString(query.workspaceTimeZone!);
  const sums = ROLLUP_SUMS.join(', ');
  const hours = (from: string, to: string) =>
    `select date_trunc('day', hour, ${zone}), ${key}, ${sums} from ${table} where workspace_id = :workspaceId and hour >= ${from} and hour < ${to} and ${where}`;
  return `with bounds as (
       select now() - (select rollup_retention_days from workspaces where id = :workspaceId) * interval '1 day' as kept_from,
              exists (select 1 from ${days} o where o.workspace_id = :workspaceId and o.time_zone < ${own}
                         and o.day > cast(:since as timestamptz) - interval '2 days' and o.day < :until)
              or exists (select 1 from ${days} o where o.workspace_id = :workspaceId and o.time_zone > ${own}
                         and o.day > cast(:since as timestamptz) - interval '2 days' and o.day < :until) as mixed
     ), whole as (
       select d.day, d.${key} as key, date_trunc('day', d.day + interval '12 hours', ${zone}) as major, ${ROLLUP_SUMS.map((c) => `d.${c}`).join(', ')}
         from ${days} d, bounds
        where d.workspace_id = :workspaceId and d.time_zone = ${own} and not bounds.mixed
          and d.day >= :since and d.day >= bounds.kept_from and ${nextDay('d.day', own)} <= :until and ${daysWhere}
     ), span as (
       select coalesce(${ceilHour('min(day)')}, :until) as first_hour, coalesce(${ceilHour(nextDay('max(day)', own))}, :until) as end_hour
         from whole
     ), cuts as (
       select major, ${ceilHour('day')} as h0, ${ceilHour(nextDay('day', own))} as h1, ${ceilHour('major')} as m1,
              ${ceilHour(nextDay('major', zone))} as m2
         from (select distinct day, major from whole) w
     ), parts as (
       select major, h0 as from_hour, m1 as to_hour, date_trunc('day', h0, ${zone}) as local_day from cuts where h0 < m1
       union all
       select major, m2, h1, date_trunc('day', m2, ${zone}) from cuts where m2 < h1
     ), minor as (
       select p.major, p.local_day, r.${key} as key, ${ROLLUP_SUMS.map((c) => `sum_int8(r.${c}) as ${c}`).join(', ')}
         from parts p join ${table} r on r.workspace_id = :workspaceId and r.hour >= p.from_hour and r.hour < p.to_hour
        where ${where}
        group by p.major, p.local_day, r.${key}
     )
     select ${select}
       from (select major as start, key, ${sums} from whole
             union all
             select major, key, ${ROLLUP_SUMS.map((c) => `-${c}`).join(', ')} from minor
             union all
             select local_day, key, ${sums} from minor
             union all
             ${hours(':since', '(select first_hour from span)')}
             union all
             ${hours('(select end_hour from span)', ':until')}) x (start, key, ${sums})
     ${tail}`;
}

/**
 * A known zone name as an SQL literal: the group by and the select must name the same expression, which a
 * bound parameter (two placeholders) does not.
 */
function sqlString(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

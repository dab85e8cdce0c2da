/**
 * Reads of invocations (each with its attempt) and usage_events: the Admin API's, and the
 * gateway's for a conversation a call continues. The gateway writes them in one statement
 * with the settlement (src/gateway/call-repo.ts).
 */
import type { Knex } from 'knex';
import type { Queryable } from '../../db/database.js';
import { hasUuidForm } from '../../ids.js';
import { ROLLUP_SUMS } from '../recording/rollup-sql.js';
import { paginate, whereInRange, type Page, type PageRequest, type TimeRange } from '../pagination.js';
import type { UsageEventRow } from '../quota/quota-types.js';
import type { InvocationRow, InvocationStatus, InvocationUser } from './invocation-types.js';

/**
 * `since`/`until` bound the invocation's start; `model` is the requested model's beginning; `q` names an end
 * user (email, case-insensitive, or external id) or else one invocation (its id or request id).
 */
export interface InvocationFilter extends PageRequest, TimeRange {
  workspaceId: string;
  workspaceAccessId?: string | undefined;
  model?: string | undefined;
  status?: InvocationStatus | undefined;
  q?: string | undefined;
}

/** What a filter's `q` came to: the accesses of the end users it names, or else the invocation it names. */
type Search = { accessIds: string[] } | { exact: string };

/** A LIKE pattern matching what begins with `text` (its `%`, `_` and `\\` taken as they are). */
const prefixPattern = (text: string) => `${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** `since`/`until` bound the event's time. */
export interface UsageEventFilter extends PageRequest, TimeRange {
  workspaceId: string;
  workspaceAccessId?: string | undefined;
  invocationId?: string | undefined;
  kind?: 'USAGE' | 'ADJUSTMENT' | undefined;
}

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
}

/** The series key of each grouping (usage_rollups' columns; an access's uuid is grouped as one, not as text). */
const GROUP_KEYS: Record<UsageGroupBy, string> = {
  model: 'model',
  access: 'workspace_access_id',
  connection: 'provider_connection_id',
  key: 'inference_key_id',
  plan: 'plan_id',
};

/** A bucket as its query returns it: three columns rather than twelve (reading each column costs node-pg a string). */
interface SummedRow {
  /** Seconds since the epoch, made an ISO string in toBuckets: to_char costs PostgreSQL about a tenth of the query. */
  start: string;
  key: string;
  /** The sums in ROLLUP_SUMS' order, comma-separated. */
  sums: string;
}

/**
 * A bucket's columns (SummedRow) from the rollup's rows grouped by `start` and `key`, or from a row that is a bucket
 * (`summed` false). The sums are bigints (sum_int8: the built-in sum of a bigint is a numeric, slower to convert),
 * written in one text (concat_ws costs PostgreSQL no more than a column each).
 */
const bucketColumns = (start: string, key: string, summed = true) =>
  `date_part('epoch', ${start})::int8::text as start, ${key} as key,
   concat_ws(',', ${ROLLUP_SUMS.map((column) => (summed ? `sum_int8(${column})` : column)).join(', ')}) as sums`;

/** The buckets of rows that come by start: each start written as an ISO string in UTC once, each row's sums split. */
function toBuckets(rows: SummedRow[]): UsageBucketRow[] {
  let seconds = '';
  let iso = '';
  return rows.map((row) => {
    if (row.start !== seconds) {
      seconds = row.start;
      iso = new Date(Number(seconds) * 1000).toISOString();
    }
    const sums = row.sums.split(',') as DecimalSum[];
    return {
      start: iso,
      key: row.key,
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
  });
}

/**
 * Hours by key, summed per access and key, made one row per hour and key: rows that come by hour are put in the order
 * of their keys, each hour's few dozen on their own (as PostgreSQL orders the uuids and the empty key in text: by
 * character; sorting a month of hours by key in the query costs it nearly a third more). The rows an event without
 * its call left (no key) are one per access, adjacent once sorted, and their sums are added up.
 */
function byKeyWithinHour(rows: SummedRow[]): SummedRow[] {
  const out: SummedRow[] = [];
  for (let from = 0; from < rows.length;) {
    let to = from + 1;
    while (to < rows.length && rows[to]!.start === rows[from]!.start) to++;
    for (const row of rows.slice(from, to).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))) {
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
    from = to;
  }
  return out;
}

/** An invocation as an export lists it: with its USAGE event's tokens and cost. */
export interface InvocationExportRow {
  id: string;
  started_at: Date;
  completed_at: Date | null;
  status: InvocationStatus;
  error_code: string | null;
  workspace_access_id: string;
  inference_key_id: string;
  provider_connection_id: string;
  requested_model: string;
  attempt_upstream_model: string | null;
  quota_units: bigint;
  input_tokens: bigint | null;
  cached_input_tokens: bigint | null;
  output_tokens: bigint | null;
  cost_micros: bigint | null;
  price_id: string | null;
  total_latency_ms: number | null;
  request_id: string;
  user_email: string | null;
  user_external_id: string | null;
  endpoint: string;
  error_message: string | null;
}

/** Rows an export reads at a time: its memory is one page, whatever the range holds. */
const EXPORT_PAGE = 1000;

export function createInvocationRepo(db: Queryable) {
  let zoneNames: Promise<ReadonlySet<string>> | undefined;
  /** The accesses of the workspace's end users whose email (case-insensitive) or external id is `text`. */
  async function searchOf(workspaceId: string, text: string, q: Queryable): Promise<Search> {
    const rows: { id: string }[] = await q('workspace_users as u')
      .join('workspace_accesses as a', 'a.user_id', 'u.id')
      .where('u.workspace_id', workspaceId)
      .where((w) => {
        void w.whereRaw('lower(u.email) = lower(?)', [text]).orWhere('u.external_user_id', text);
      })
      .select('a.id');
    return rows.length ? { accessIds: rows.map((r) => r.id) } : { exact: text };
  }

  /** The filter's conditions on invocations (`i`: the table's name or alias in the query). */
  function applyFilter(
    query: Knex.QueryBuilder,
    filter: Omit<InvocationFilter, 'workspaceId'>,
    search: Search | undefined,
    i: string,
  ): void {
    if (filter.workspaceAccessId) query.where(`${i}.workspace_access_id`, filter.workspaceAccessId);
    if (filter.model) query.whereRaw(`${i}.requested_model like ?`, [prefixPattern(filter.model)]);
    if (filter.status) query.where(`${i}.status`, filter.status);
    if (search && 'accessIds' in search) query.whereIn(`${i}.workspace_access_id`, search.accessIds);
    else if (search) {
      const text = search.exact;
      query.where((w) => {
        w.where(`${i}.request_id`, text);
        if (hasUuidForm(text)) w.orWhere(`${i}.id`, text.toLowerCase());
      });
    }
    whereInRange(query, `${i}.started_at`, filter);
  }

  const searchFor = (filter: InvocationFilter, q: Queryable) => {
    const text = filter.q?.trim();
    return text ? searchOf(filter.workspaceId, text, q) : Promise.resolve(undefined);
  };

  return {
    /**
     * The end users of these accesses and the USAGE events (tokens, cost, price) of these invocations: what a
     * list's rows show besides their own columns, read for a page at once.
     */
    async detailsOf(rows: InvocationRow[], q: Queryable = db): Promise<void> {
      if (!rows.length) return;
      const accessIds = [...new Set(rows.map((r) => r.workspace_access_id))];
      const [users, events] = await Promise.all([
        q('workspace_accesses as a')
          .join('workspace_users as u', 'u.id', 'a.user_id')
          .whereIn('a.id', accessIds)
          .select('a.id as access_id', 'u.id', 'u.email', 'u.external_user_id', 'u.name') as Promise<
          (InvocationUser & { access_id: string })[]
        >,
        q('usage_events')
          .whereIn(
            'invocation_id',
            rows.map((r) => r.id),
          )
          .where('kind', 'USAGE')
          .select('invocation_id', 'cost_micros', 'price_id', 'input_tokens', 'cached_input_tokens', 'output_tokens') as Promise<
          Pick<UsageEventRow, 'invocation_id' | 'cost_micros' | 'price_id' | 'input_tokens' | 'cached_input_tokens' | 'output_tokens'>[]
        >,
      ]);
      const userOf = new Map(users.map(({ access_id, ...user }) => [access_id, user]));
      const eventOf = new Map(events.map((e) => [e.invocation_id, e]));
      for (const row of rows) {
        row.user = userOf.get(row.workspace_access_id) ?? null;
        const e = eventOf.get(row.id);
        row.cost_micros = e?.cost_micros ?? null;
        row.price_id = e?.price_id ?? null;
        row.input_tokens = e ? e.input_tokens : null;
        row.cached_input_tokens = e ? e.cached_input_tokens : null;
        row.output_tokens = e ? e.output_tokens : null;
      }
    },

    async findById(id: string, q: Queryable = db): Promise<InvocationRow | undefined> {
      return q('invocations').where({ id }).first();
    },

    async usageEventsOf(invocationId: string, q: Queryable = db): Promise<UsageEventRow[]> {
      return q('usage_events').where({ invocation_id: invocationId }).orderBy('id', 'asc');
    },

    /**
     * The input and output tokens of the access's latest charged call that answered with this Responses
     * API response id (what a call continuing it adds to its input), or undefined when none did.
     */
    async conversationTokens(workspaceId: string, accessId: string, responseId: string, q: Queryable = db): Promise<bigint | undefined> {
      const result = await q.raw(
        `select u.input_tokens + u.output_tokens as tokens
           from invocations i join usage_events u on u.invocation_id = i.id and u.kind = 'USAGE'
          where i.workspace_id = ? and i.upstream_response_id = ? and i.workspace_access_id = ?
          order by i.started_at desc limit 1`,
        [workspaceId, responseId, accessId],
      );
      return (result.rows as { tokens: bigint }[])[0]?.tokens;
    },

    /** A page of the filter's invocations, newest first, each with its end user, tokens and cost (detailsOf). */
    async list(filter: InvocationFilter, q: Queryable = db): Promise<Page<InvocationRow>> {
      const search = await searchFor(filter, q);
      const query = q('invocations').select('*').where({ workspace_id: filter.workspaceId });
      applyFilter(query, filter, search, 'invocations');
      const page = await paginate<InvocationRow>(query, filter);
      await this.detailsOf(page.items, q);
      return page;
    },

    /**
     * The filter's invocations (those that started in [since, until)), in id order (UUID v7, minted as a call starts: the
     * order they started), a page at a time along (workspace_id, id): an export of any size holds one page.
     */
    async *exportInvocations(filter: InvocationFilter, q: Queryable = db): AsyncGenerator<InvocationExportRow[]> {
      const search = await searchFor(filter, q);
      let after: string | undefined;
      for (;;) {
        const query = q('invocations as i')
          .leftJoin('usage_events as u', (j) => j.on('u.invocation_id', 'i.id').andOnVal('u.kind', 'USAGE'))
          .leftJoin('workspace_accesses as a', 'a.id', 'i.workspace_access_id')
          .leftJoin('workspace_users as w', 'w.id', 'a.user_id')
          .where('i.workspace_id', filter.workspaceId)
          .select(
            'i.id',
            'i.started_at',
            'i.completed_at',
            'i.status',
            'i.error_code',
            'i.workspace_access_id',
            'i.inference_key_id',
            'i.provider_connection_id',
            'i.requested_model',
            'i.attempt_upstream_model',
            'i.quota_units',
            'u.input_tokens',
            'u.cached_input_tokens',
            'u.output_tokens',
            'u.cost_micros',
            'u.price_id',
            'i.total_latency_ms',
            'i.request_id',
            'w.email as user_email',
            'w.external_user_id as user_external_id',
            'i.endpoint',
            'i.error_message',
          )
          .orderBy('i.id')
          .limit(EXPORT_PAGE);
        applyFilter(query, filter, search, 'i');
        if (after) query.where('i.id', '>', after);
        const rows = (await query) as InvocationExportRow[];
        if (rows.length) yield rows;
        if (rows.length < EXPORT_PAGE) return;
        after = rows[rows.length - 1]!.id;
      }
    },

    async listUsageEvents(filter: UsageEventFilter, q: Queryable = db): Promise<Page<UsageEventRow>> {
      const query = q('usage_events').select('*').where({ workspace_id: filter.workspaceId });
      if (filter.workspaceAccessId) query.where({ workspace_access_id: filter.workspaceAccessId });
      if (filter.invocationId) query.where({ invocation_id: filter.invocationId });
      if (filter.kind) query.where({ kind: filter.kind });
      whereInRange(query, 'created_at', filter);
      return paginate<UsageEventRow>(query, filter);
    },

    /**
     * The first and last UTC hour of [since, until) in which the workspace has usage (undefined: none), read from the
     * rollup's primary key (workspace, hour): an export reads only what lies between them.
     */
    async usageHours(workspaceId: string, since: Date, until: Date, q: Queryable = db): Promise<{ first: Date; last: Date } | undefined> {
      const row = (await q('usage_rollups')
        .where('workspace_id', workspaceId)
        .where('hour', '>=', since)
        .where('hour', '<', until)
        .min('hour as first')
        .max('hour as last')
        .first()) as { first: Date | null; last: Date | null } | undefined;
      return row?.first && row.last ? { first: new Date(row.first), last: new Date(row.last) } : undefined;
    },

    /**
     * The workspace's events in [since, until) (whole UTC hours) summed per UTC hour or day and per
     * key, oldest first: from the rollups (src/domain/recording/rollup-sql.ts), the events and calls already summed per hour, read along
     * their primary key's workspace and hour. By model, connection or plan: usage_rollups (per hour, access, key,
     * model, connection and plan). By access or key: usage_key_rollups (per hour, access and key), where a month of
     * hours by key is a row per bucket, read as it is, and hours by access are the keys' rows summed as they come.
     * UTC days are binned from a UTC midnight (date_bin: about half the cost of a date_trunc in a time zone);
     * other zones' days start at their local midnight (date_trunc in the zone), and an hour counts in the local
     * day its start falls in.
     *
     * The planner, which cannot tell how many buckets a month holds, would rather hash hours by access (spilling to
     * disk) or sort the whole range first; it is told not to, in the statement's own transaction: no hashing, no
     * parallel sort, and the rollup's pages read in index order cost about what they cost read in turn (they are in
     * memory). Hours by key come by access within an hour, and are put in the order of their keys here
     * (byKeyWithinHour). A month of hours is read by a few queries at once (the service's slices).
     */
    async usageSummary(query: UsageSummaryQuery, q: Queryable = db): Promise<UsageBucketRow[]> {
      const inRange = 'workspace_id = ? and hour >= ? and hour < ?';
      const bindings = [query.workspaceId, query.since, query.until];
      const bySeries = query.groupBy === 'access' || query.groupBy === 'key';
      const table = bySeries ? 'usage_key_rollups' : 'usage_rollups';
      const key = GROUP_KEYS[query.groupBy];
      if (query.granularity === 'hour' && bySeries) {
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
          return toBuckets(query.groupBy === 'key' ? byKeyWithinHour(rows) : rows);
        });
      }
      const start =
        query.granularity === 'hour'
          ? 'hour'
          : query.timeZone === 'UTC'
            ? `date_bin('1 day', hour, timestamptz '2000-01-01T00:00:00Z')`
            : `date_trunc('day', hour, ${sqlString(query.timeZone)})`;
      const result = await q.raw(
        `select ${bucketColumns(start, key)}
           from ${table} where ${inRange}
          group by ${start}, ${key}
          order by ${start}, ${key}`,
        bindings,
      );
      return toBuckets(result.rows as SummedRow[]);
    },

    /**
     * The time zone names the database knows (pg_timezone_names) and Intl does too (an export's slices are cut
     * at local midnights), read once: the list only changes with the server.
     */
    timeZones(): Promise<ReadonlySet<string>> {
      zoneNames ??= db
        .raw('select name from pg_timezone_names')
        .then((result) => new Set((result.rows as { name: string }[]).map((r) => r.name).filter(intlKnows)))
        .catch((err: unknown) => {
          zoneNames = undefined;
          throw err;
        });
      return zoneNames;
    },
  };
}

/**
 * A known zone name as an SQL literal: the group by and the select must name the same expression, which a
 * bound parameter (two placeholders) does not.
 */
function sqlString(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

export type InvocationRepo = ReturnType<typeof createInvocationRepo>;

function intlKnows(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
    return true;
  } catch {
    return false;
  }
}

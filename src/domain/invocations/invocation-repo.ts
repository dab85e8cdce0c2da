/**
 * Reads of invocations (each with its attempt) and usage_events: the Admin API's, and the
 * gateway's for a conversation a call continues. The gateway writes them in one statement
 * with the settlement (src/records/call-repo.ts).
 */
import type { Knex } from 'knex';
import type { Queryable } from '../../db/database.js';
import { hasUuidForm } from '../../ids.js';
import { bindDeps } from '../bind.js';
import { paginate, whereInRange, type Page, type PageRequest, type TimeRange } from '../pagination.js';
import type { KindColumns, UsageEventRow } from '../quota/quota-types.js';
import { KIND_COLUMNS } from '../recording/kind-sql.js';
import type { InvocationBatchRow, InvocationRow, InvocationStatus, InvocationUser } from './invocation-types.js';
import { UsageDayCache } from './usage-days.js';
import { timeZones, topUsageSummary, usageHours, usageSummaryPage, usageSummarySumBatches } from './usage-summary-repo.js';

export type { UsageBucketRow, UsageSumPage } from './usage-summary-repo.js';
export type { UsageGranularity, UsageGroupBy } from './usage-summary-sql.js';

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

/** An invocation as an export lists it: with its USAGE event's tokens, kinds and cost. */
interface InvocationExportRow extends KindColumns {
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

/** What the invocation reads run on: the database, and the time zone names once read (timeZones). */
export interface InvocationRepoDeps {
  db: Queryable;
  zones: { names?: Promise<ReadonlySet<string>> | undefined };
  /** The summaries' finished days kept in the process (usage-days.ts). */
  days: UsageDayCache;
}

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
function applyFilter(query: Knex.QueryBuilder, filter: Omit<InvocationFilter, 'workspaceId'>, search: Search | undefined, i: string): void {
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

function searchFor(filter: InvocationFilter, q: Queryable): Promise<Search | undefined> {
  const text = filter.q?.trim();
  return text ? searchOf(filter.workspaceId, text, q) : Promise.resolve(undefined);
}

/** The earliest start of these invocations: the events of any of them are not older. */
const earliestStart = (rows: InvocationRow[]): Date => new Date(Math.min(...rows.map((r) => r.started_at.getTime())));

/**
 * The end users of these accesses and the USAGE events (tokens, cost, price) of these invocations: what a
 * list's rows show besides their own columns, read for a page at once.
 */
async function detailsOf({ db }: InvocationRepoDeps, rows: InvocationRow[], q: Queryable = db): Promise<void> {
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
      // A call's events are written when it ends: the months before the page's first start are not read.
      .where('created_at', '>=', earliestStart(rows))
      .select(
        'invocation_id',
        'cost_micros',
        'price_id',
        'input_tokens',
        'cached_input_tokens',
        'output_tokens',
        ...KIND_COLUMNS,
      ) as Promise<
      (Pick<UsageEventRow, 'invocation_id' | 'cost_micros' | 'price_id' | 'input_tokens' | 'cached_input_tokens' | 'output_tokens'> &
        KindColumns)[]
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
    row.kinds = e ?? null;
  }
}

async function findById({ db }: InvocationRepoDeps, id: string, q: Queryable = db): Promise<InvocationRow | undefined> {
  return q('invocations').where({ id }).first();
}

/** The batch whose invocation this is (docs/batches.md), if it is one's. */
async function batchOf({ db }: InvocationRepoDeps, invocationId: string, q: Queryable = db): Promise<InvocationBatchRow | undefined> {
  return q('batches')
    .where({ invocation_id: invocationId })
    .first(
      'upstream_batch_id',
      'upstream_status',
      'requests',
      'settled_requests',
      'bound_units',
      'settled_units',
      'cost_micros',
      'created_at',
      'expires_at',
      'settled_at',
    );
}

/** The events of an invocation that started at `startedAt` (its events are not older: the months before are not read). */
async function usageEventsOf(
  { db }: InvocationRepoDeps,
  invocationId: string,
  startedAt: Date,
  q: Queryable = db,
): Promise<UsageEventRow[]> {
  return q('usage_events').where({ invocation_id: invocationId }).where('created_at', '>=', startedAt).orderBy('id', 'asc');
}

/**
 * The input and output tokens of the access's latest charged call that answered with this Responses
 * API response id (what a call continuing it adds to its input), or undefined when none did.
 */
async function conversationTokens(
  { db }: InvocationRepoDeps,
  workspaceId: string,
  accessId: string,
  responseId: string,
  q: Queryable = db,
): Promise<bigint | undefined> {
  const result = await q.raw(
    `select u.input_tokens + u.output_tokens as tokens
       from invocations i join usage_events u on u.invocation_id = i.id and u.kind = 'USAGE' and u.created_at >= i.started_at
      where i.workspace_id = ? and i.upstream_response_id = ? and i.workspace_access_id = ?
      order by i.started_at desc limit 1`,
    [workspaceId, responseId, accessId],
  );
  return (result.rows as { tokens: bigint }[])[0]?.tokens;
}

/** A page of the filter's invocations, newest first, each with its end user, tokens and cost (detailsOf). */
async function list(deps: InvocationRepoDeps, filter: InvocationFilter, q: Queryable = deps.db): Promise<Page<InvocationRow>> {
  const search = await searchFor(filter, q);
  const query = q('invocations').select('*').where({ workspace_id: filter.workspaceId });
  applyFilter(query, filter, search, 'invocations');
  const page = await paginate<InvocationRow>(query, filter);
  await detailsOf(deps, page.items, q);
  return page;
}

/**
 * The filter's invocations (those that started in [since, until)), in id order (UUID v7, minted as a call starts: the
 * order they started), a page at a time along (workspace_id, id): an export of any size holds one page.
 */
async function* exportInvocations(
  { db }: InvocationRepoDeps,
  filter: InvocationFilter,
  q: Queryable = db,
): AsyncGenerator<InvocationExportRow[]> {
  const search = await searchFor(filter, q);
  let after: string | undefined;
  for (;;) {
    const query = q('invocations as i')
      .leftJoin('usage_events as u', (j) =>
        j.on('u.invocation_id', 'i.id').andOnVal('u.kind', 'USAGE').andOn('u.created_at', '>=', 'i.started_at'),
      )
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
        ...KIND_COLUMNS.map((c) => `u.${c}`),
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
}

async function listUsageEvents({ db }: InvocationRepoDeps, filter: UsageEventFilter, q: Queryable = db): Promise<Page<UsageEventRow>> {
  const query = q('usage_events').select('*').where({ workspace_id: filter.workspaceId });
  if (filter.workspaceAccessId) query.where({ workspace_access_id: filter.workspaceAccessId });
  if (filter.invocationId) query.where({ invocation_id: filter.invocationId });
  if (filter.kind) query.where({ kind: filter.kind });
  whereInRange(query, 'created_at', filter);
  return paginate<UsageEventRow>(query, filter);
}

/** `dayCacheBytes`: at most how much of the summaries' finished days the process keeps (0: none; usage-days.ts). */
export function createInvocationRepo(db: Queryable, dayCacheBytes = 0) {
  const deps: InvocationRepoDeps = { db, zones: {}, days: new UsageDayCache(dayCacheBytes) };
  return bindDeps(deps, {
    detailsOf,
    findById,
    batchOf,
    usageEventsOf,
    conversationTokens,
    list,
    exportInvocations,
    listUsageEvents,
    usageHours,
    usageSummaryPage,
    usageSummarySumBatches,
    topUsageSummary,
    timeZones,
  });
}

export type InvocationRepo = ReturnType<typeof createInvocationRepo>;

/**
 * The Admin API's reads of gateway records: invocations (with their attempt and
 * usage events) and the usage/adjustment event log. The gateway writes them
 * (src/records/call-recorder.ts); nothing here changes them.
 */
import type { RequestLogService } from '../request-logs/request-log-service.js';
import type { RequestLogEntry } from '../request-logs/request-log-types.js';
import { AppError } from '../../errors.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { Page } from '../pagination.js';
import type { UsageEventRow } from '../quota/quota-types.js';
import { sameDays } from '../workspaces/time-zone.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { ExportSlots } from './export-slots.js';
import { dayStart } from './usage-days.js';
import type {
  InvocationFilter,
  InvocationRepo,
  UsageBucketRow,
  UsageEventFilter,
  UsageGranularity,
  UsageGroupBy,
  UsageSumPage,
} from './invocation-repo.js';
import type { InvocationRow } from './invocation-types.js';
import type { BucketTexts } from './usage-buckets.js';

/** A summary's range holds at most this many buckets. */
const MAX_BUCKETS = 1000;
/** An export's range holds at most this many buckets: a leap year of hours (or 24 years of days). */
const MAX_EXPORT_BUCKETS = 366 * 24;
/**
 * The most buckets of a summary one query sums, and how many such queries run at once: a month of hours (by key,
 * tens of thousands of buckets) is summed by three queries, each on its own connection and so in its own PostgreSQL
 * process, while the answer is written as they come.
 */
const SLICE_BUCKETS: Record<UsageGranularity, number> = { hour: 240, day: MAX_BUCKETS };
const SLICES_AT_ONCE = 3;
/** An export's buckets come in batches of this many: a text of lines each (usageSumLines' perText). */
const SUM_BATCH = 256;
/**
 * The fewest hours a slice of a summary by hour holds: a day of hours is summed by three queries at once too (a
 * day of a million calls a month is some 33,000 rollup rows by model: 93 ms p50 and 138 ms p95 summed by one query
 * on a host at load 12, 38 and 58 ms by three), a few hours by one.
 */
const MIN_SLICE_HOURS = 8;
const HOUR_MS = 3_600_000;
const BUCKET_MS: Record<UsageGranularity, number> = { hour: 3_600_000, day: 86_400_000 };
const DEFAULT_RANGE_MS: Record<UsageGranularity, number> = { hour: 24 * 3_600_000, day: 30 * 86_400_000 };

interface UsageSummaryRequest {
  workspaceId: string;
  since?: Date | undefined;
  until?: Date | undefined;
  granularity: UsageGranularity;
  groupBy: UsageGroupBy;
  /** The IANA zone whose days the day buckets are. */
  timeZone: string;
  /** The workspace's zone (set here, from its row): days in it are read from the day rollups. */
  workspaceTimeZone?: string | undefined;
  /** At most this many series, the keys that cost most over the range; the others summed as one (`other`). */
  top?: number | undefined;
  /** With `top`: the series are the keys ranked after this many (default 0). */
  offset?: number | undefined;
}

export interface UsageSummary {
  /** The workspace's currency: the buckets' costs are in it. */
  currency: string;
  since: Date;
  until: Date;
  timeZone: string;
  /** The buckets, oldest first, then by key, a slice of the range at a time (by day, kept days as their JSON). */
  buckets: AsyncIterable<UsageBucketRow[] | BucketTexts>;
  /** Asked with `top`: how many keys have usage in the range (ranked: the series and the others). */
  keys?: number;
}

/** What the reads of gateway records run on. */
export interface InvocationDeps {
  invocationRepo: InvocationRepo;
  workspaces: WorkspaceService;
  clock: Clock;
  /** The process's export slots: each export holds one until its answer ends. */
  exportSlots: ExportSlots;
  /** The calls' request logs (docs/request-logs.md). */
  requestLogs: RequestLogService;
}

/** Refuses a range of more than `max` buckets, naming `since`. */
function assertBuckets(since: number, until: number, granularity: UsageGranularity, max: number, remedy: string): void {
  const buckets = Math.ceil((until - since) / BUCKET_MS[granularity]);
  if (buckets > max) {
    throw new AppError('invalid_parameter', `The range holds ${buckets} ${granularity}s; at most ${max} buckets are ${remedy}`, {
      param: 'since',
    });
  }
}

/** Refuses a zone the database does not know (it sums the days), before anything is read. */
async function assertTimeZone({ invocationRepo }: InvocationDeps, timeZone: string): Promise<void> {
  if (!(await invocationRepo.timeZones()).has(timeZone)) {
    throw new AppError('invalid_parameter', `Unknown time zone "${timeZone}" (an IANA name such as Europe/Paris)`, {
      param: 'timeZone',
    });
  }
}

/**
 * The buckets of [since, until) (whole UTC hours), oldest first, in slices of at most `sliceBuckets` buckets (as
 * even as whole buckets allow), `inFlight` of them read at once (readAhead), each read by `read` (the buckets, or
 * their CSV lines). A slice ends on a bucket's edge (an hour, or the first hour of a day in the zone, as the summary
 * bins them), so that no bucket is split.
 */
async function readSlices<T>(
  request: UsageSummaryRequest,
  since: number,
  until: number,
  sliceBuckets: number,
  inFlight: number,
  read: (range: UsageSummaryRequest & { since: Date; until: Date }) => Promise<T>,
) {
  const width = BUCKET_MS[request.granularity];
  const buckets = Math.ceil((until - since) / width);
  const slice = Math.ceil(buckets / Math.ceil(buckets / sliceBuckets)) * width;
  const edge = (ms: number) => (request.granularity === 'hour' ? ms : dayStart(ms, request.timeZone));
  const reads: (() => Promise<T>)[] = [];
  for (let from = since; from < until;) {
    const range = { ...request, since: new Date(from), until: new Date(Math.min(until, edge(from + slice))) };
    reads.push(() => read(range));
    from = range.until.getTime();
  }
  return readAhead(reads, inFlight);
}

/**
 * The most buckets a slice of a summary holds: by hour, the range in SLICES_AT_ONCE slices of MIN_SLICE_HOURS or more;
 * by day, SLICE_BUCKETS.day, or byUserDays.
 */
function sliceBuckets(request: UsageSummaryRequest, since: Date, until: Date): number {
  const { granularity } = request;
  if (granularity === 'day') return byUserDays(request, since, until) ?? SLICE_BUCKETS.day;
  const hours = Math.ceil((until.getTime() - since.getTime()) / HOUR_MS);
  return Math.min(SLICE_BUCKETS.hour, Math.max(MIN_SLICE_HOURS, Math.ceil(hours / SLICES_AT_ONCE)));
}

/**
 * By day and by access or key (a bucket per day and user: a month of 2,000 users is 62,000), the days of a slice: the
 * range in SLICES_AT_ONCE slices, summed by as many statements at once, each on its own connection (the next slices'
 * read while the first is written); undefined by hour, or by model, connection or plan (a few buckets a day).
 */
function byUserDays(request: UsageSummaryRequest, since: Date, until: Date): number | undefined {
  if (request.granularity !== 'day' || (request.groupBy !== 'access' && request.groupBy !== 'key')) return undefined;
  return Math.max(1, Math.ceil((until.getTime() - since.getTime()) / BUCKET_MS.day / SLICES_AT_ONCE));
}

async function list({ workspaces, invocationRepo }: InvocationDeps, actor: Actor, filter: InvocationFilter): Promise<Page<InvocationRow>> {
  await workspaces.get(actor, filter.workspaceId);
  return invocationRepo.list(filter);
}

async function get(
  { invocationRepo }: InvocationDeps,
  actor: Actor,
  id: string,
): Promise<{ invocation: InvocationRow; usageEvents: UsageEventRow[] }> {
  const invocation = await invocationRepo.findById(id);
  if (!invocation) throw new AppError('invocation_not_found', 'Invocation not found');
  assertVisible(actor, invocation.workspace_id, 'invocation_not_found', 'Invocation');
  const [usageEvents, batch] = await Promise.all([
    invocationRepo.usageEventsOf(id, invocation.started_at),
    invocationRepo.batchOf(id),
    invocationRepo.detailsOf([invocation]),
  ]);
  invocation.batch = batch ?? null;
  return { invocation, usageEvents };
}

/** The call's request log: 404 invocation_not_found as get(), then request_log_not_found when it kept none. */
async function getLog({ invocationRepo, requestLogs }: InvocationDeps, actor: Actor, id: string): Promise<RequestLogEntry> {
  const invocation = await invocationRepo.findById(id);
  if (!invocation) throw new AppError('invocation_not_found', 'Invocation not found');
  assertVisible(actor, invocation.workspace_id, 'invocation_not_found', 'Invocation');
  return requestLogs.get(actor, id);
}

async function listUsageEvents(
  { workspaces, invocationRepo }: InvocationDeps,
  actor: Actor,
  filter: UsageEventFilter,
): Promise<Page<UsageEventRow>> {
  await workspaces.get(actor, filter.workspaceId);
  return invocationRepo.listUsageEvents(filter);
}

/**
 * The filter's invocations (listInvocations'), a page at a time, and the workspace's currency. Without
 * `until`, up to now. The export holds one of the process's export slots until `release` is called.
 */
async function exportInvocations(
  { workspaces, invocationRepo, clock, exportSlots }: InvocationDeps,
  actor: Actor,
  filter: Omit<InvocationFilter, 'limit' | 'after'>,
) {
  const until = filter.until ?? clock.now();
  if (filter.since && filter.since >= until) throw new AppError('invalid_parameter', 'since must be before until', { param: 'since' });
  const workspace = await workspaces.get(actor, filter.workspaceId);
  const release = exportSlots.take();
  return { currency: workspace.currency, pages: invocationRepo.exportInvocations({ ...filter, until }), release };
}

/**
 * The summary's buckets over [since, until) (whole UTC hours, at most MAX_EXPORT_BUCKETS buckets) as their sums
 * (usageSummarySumBatches), from the first hour with usage to the last (one query finds them), in the summary's
 * slices (SLICE_BUCKETS), the next read while one is written: an export holds two slices at most. A slice comes in
 * batches of SUM_BATCH buckets (by day and user on PostgreSQL, a day's lines as its statement sends them, in the
 * workspace's currency). It holds one of the process's export slots until `release` is called.
 */
async function exportUsageSummary(deps: InvocationDeps, actor: Actor, request: UsageSummaryRequest & { since: Date; until: Date }) {
  const { workspaces, invocationRepo, exportSlots } = deps;
  if (request.since >= request.until) throw new AppError('invalid_parameter', 'since must be before until', { param: 'since' });
  const since = Math.floor(request.since.getTime() / HOUR_MS) * HOUR_MS;
  const until = Math.ceil(request.until.getTime() / HOUR_MS) * HOUR_MS;
  assertBuckets(since, until, request.granularity, MAX_EXPORT_BUCKETS, 'exported at once (narrow since/until, or export by day)');
  await assertTimeZone(deps, request.timeZone);
  const release = exportSlots.take();
  try {
    // The workspace and the range's first and last hour with usage are read at once: two round trips' time in one.
    const [workspace, used] = await Promise.all([
      workspaces.get(actor, request.workspaceId),
      invocationRepo.usageHours(request.workspaceId, new Date(since), new Date(until)),
    ]);
    const slices = used
      ? await readSlices(
          { ...request, workspaceTimeZone: workspace.time_zone },
          used.first.getTime(),
          used.last.getTime() + HOUR_MS,
          byUserDays(request, used.first, new Date(used.last.getTime() + HOUR_MS)) ?? SLICE_BUCKETS[request.granularity],
          2,
          (range) => invocationRepo.usageSummarySumBatches(range, SUM_BATCH, workspace.currency),
        )
      : await readAhead<AsyncIterable<UsageSumPage>>([], 1);
    return { currency: workspace.currency, pages: inTurn(slices), release };
  } catch (err) {
    release();
    throw err;
  }
}

/** The batches of each slice in turn. */
async function* inTurn<T>(slices: AsyncIterable<AsyncIterable<T>>): AsyncGenerator<T> {
  for await (const slice of slices) yield* slice;
}

/**
 * Units and tokens per bucket and key over [since, until), a slice at a time (the first read before this
 * returns); a range of more than MAX_BUCKETS buckets is refused.
 */
async function usageSummary(deps: InvocationDeps, actor: Actor, request: UsageSummaryRequest): Promise<UsageSummary> {
  // Whole UTC hours, the rollup's grain: since down to its hour, until up to the end of its hour.
  const asked = request.until ?? deps.clock.now();
  const until = new Date(Math.ceil(asked.getTime() / HOUR_MS) * HOUR_MS);
  const since = new Date(
    Math.floor((request.since ?? new Date(asked.getTime() - DEFAULT_RANGE_MS[request.granularity])).getTime() / HOUR_MS) * HOUR_MS,
  );
  if (request.since && request.since.getTime() >= asked.getTime()) {
    throw new AppError('invalid_parameter', 'since must be before until', { param: 'since' });
  }
  assertBuckets(
    since.getTime(),
    until.getTime(),
    request.granularity,
    MAX_BUCKETS,
    'summed at once (narrow since/until, or sum by day; exportUsageSummary takes a year of hours)',
  );
  await assertTimeZone(deps, request.timeZone);
  const workspace = await deps.workspaces.get(actor, request.workspaceId);
  // Days of another name for the workspace's own (Etc/UTC for UTC) are its days: read from its day rollups.
  const timeZone = sameDays(request.timeZone, workspace.time_zone) ? workspace.time_zone : request.timeZone;
  const asRead = { ...request, timeZone, workspaceTimeZone: workspace.time_zone };
  const head = { currency: workspace.currency, since, until, timeZone: request.timeZone };
  if (request.top === undefined) {
    if (request.offset !== undefined) throw new AppError('invalid_parameter', 'offset is asked with top', { param: 'offset' });
    return {
      ...head,
      buckets: await readSlices(asRead, since.getTime(), until.getTime(), sliceBuckets(request, since, until), SLICES_AT_ONCE, (range) =>
        deps.invocationRepo.usageSummaryPage(range),
      ),
    };
  }
  // The top keys are those of the whole range: it is summed in one read (at most top + 1 series a bucket).
  const { buckets, keys } = await deps.invocationRepo.topUsageSummary({
    ...asRead,
    since,
    until,
    top: request.top,
    offset: request.offset ?? 0,
  });
  return { ...head, keys, buckets: await readAhead([() => Promise.resolve(buckets)], 1) };
}

export const createInvocationService = (deps: InvocationDeps) =>
  bindDeps(deps, { list, get, getLog, listUsageEvents, exportInvocations, exportUsageSummary, usageSummary });

/**
 * The results of `reads` in order, up to `inFlight` of them read at once (the next one started as one is handed
 * out), so that they run while the caller uses the ones before. The first is read before this returns: its failure
 * is thrown here, before an answer has begun.
 */
async function readAhead<T>(reads: (() => Promise<T>)[], inFlight: number): Promise<AsyncGenerator<T>> {
  const started: Promise<T>[] = [];
  const startNext = () => {
    const read = reads[started.length];
    if (!read) return;
    const result = read();
    // Awaited in turn below; if the caller stops first (a client gone), its failure is nobody's to hear.
    result.catch(() => undefined);
    started.push(result);
  };
  while (started.length < Math.min(inFlight, reads.length)) startNext();
  await started[0];
  async function* inTurn(): AsyncGenerator<T> {
    for (let i = 0; i < reads.length; i++) {
      const value = await started[i]!;
      startNext();
      yield value;
    }
  }
  return inTurn();
}

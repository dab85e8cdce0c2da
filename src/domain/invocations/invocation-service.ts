/**
 * The Admin API's reads of gateway records: invocations (with their attempt and
 * usage events) and the usage/adjustment event log. The gateway writes them
 * (src/gateway/call-recorder.ts); nothing here changes them.
 */
import { AppError } from '../../errors.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { Page } from '../pagination.js';
import type { UsageEventRow } from '../quota/quota-types.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type {
  InvocationFilter,
  InvocationRepo,
  UsageBucketRow,
  UsageEventFilter,
  UsageGranularity,
  UsageGroupBy,
} from './invocation-repo.js';
import type { InvocationRow } from './invocation-types.js';

/** A summary's range holds at most this many buckets. */
const MAX_BUCKETS = 1000;
const HOUR_MS = 3_600_000;
const BUCKET_MS: Record<UsageGranularity, number> = { hour: 3_600_000, day: 86_400_000 };
const DEFAULT_RANGE_MS: Record<UsageGranularity, number> = { hour: 24 * 3_600_000, day: 30 * 86_400_000 };

export interface UsageSummaryRequest {
  workspaceId: string;
  since?: Date | undefined;
  until?: Date | undefined;
  granularity: UsageGranularity;
  groupBy: UsageGroupBy;
}

export interface UsageSummary {
  /** The workspace's currency: the buckets' costs are in it. */
  currency: string;
  since: Date;
  until: Date;
  buckets: UsageBucketRow[];
}

export function createInvocationService(deps: { invocationRepo: InvocationRepo; workspaces: WorkspaceService; clock: Clock }) {
  const { invocationRepo, workspaces, clock } = deps;
  return {
    async list(actor: Actor, filter: InvocationFilter): Promise<Page<InvocationRow>> {
      await workspaces.get(actor, filter.workspaceId);
      return invocationRepo.list(filter);
    },

    async get(actor: Actor, id: string): Promise<{ invocation: InvocationRow; usageEvents: UsageEventRow[] }> {
      const invocation = await invocationRepo.findById(id);
      if (!invocation) throw new AppError('invocation_not_found', 'Invocation not found');
      assertVisible(actor, invocation.workspace_id, 'invocation_not_found', 'Invocation');
      const [usageEvents] = await Promise.all([invocationRepo.usageEventsOf(id), invocationRepo.detailsOf([invocation])]);
      return { invocation, usageEvents };
    },

    async listUsageEvents(actor: Actor, filter: UsageEventFilter): Promise<Page<UsageEventRow>> {
      await workspaces.get(actor, filter.workspaceId);
      return invocationRepo.listUsageEvents(filter);
    },

    /**
     * The filter's invocations (listInvocations'), a page at a time, and the workspace's currency. Without
     * `until`, up to now.
     */
    async exportInvocations(actor: Actor, filter: Omit<InvocationFilter, 'limit' | 'after'>) {
      const until = filter.until ?? clock.now();
      if (filter.since && filter.since >= until) throw new AppError('invalid_parameter', 'since must be before until', { param: 'since' });
      const workspace = await workspaces.get(actor, filter.workspaceId);
      return { currency: workspace.currency, pages: invocationRepo.exportInvocations({ ...filter, until }) };
    },

    /**
     * The summary's buckets over [since, until) (whole UTC hours), in slices of at most MAX_BUCKETS buckets: an
     * export holds one slice, whatever the range.
     */
    async exportUsageSummary(actor: Actor, request: UsageSummaryRequest & { since: Date; until: Date }) {
      if (request.since >= request.until) throw new AppError('invalid_parameter', 'since must be before until', { param: 'since' });
      const workspace = await workspaces.get(actor, request.workspaceId);
      const since = Math.floor(request.since.getTime() / HOUR_MS) * HOUR_MS;
      const until = Math.ceil(request.until.getTime() / HOUR_MS) * HOUR_MS;
      // A slice ends on a bucket's edge (days from a UTC midnight, as the summary bins them), so no bucket is split.
      const slice = MAX_BUCKETS * BUCKET_MS[request.granularity];
      async function* pages(): AsyncGenerator<UsageBucketRow[]> {
        for (let from = since; from < until;) {
          const to = Math.min(until, Math.floor(from / BUCKET_MS[request.granularity]) * BUCKET_MS[request.granularity] + slice);
          yield await invocationRepo.usageSummary({ ...request, since: new Date(from), until: new Date(to) });
          from = to;
        }
      }
      return { currency: workspace.currency, pages: pages() };
    },

    /** Units and tokens per bucket and key over [since, until); a range of more than MAX_BUCKETS buckets is refused. */
    async usageSummary(actor: Actor, request: UsageSummaryRequest): Promise<UsageSummary> {
      // Whole UTC hours, the rollup's grain: since down to its hour, until up to the end of its hour.
      const asked = request.until ?? clock.now();
      const until = new Date(Math.ceil(asked.getTime() / HOUR_MS) * HOUR_MS);
      const since = new Date(
        Math.floor((request.since ?? new Date(asked.getTime() - DEFAULT_RANGE_MS[request.granularity])).getTime() / HOUR_MS) * HOUR_MS,
      );
      if (request.since && request.since.getTime() >= asked.getTime()) {
        throw new AppError('invalid_parameter', 'since must be before until', { param: 'since' });
      }
      const buckets = Math.ceil((until.getTime() - since.getTime()) / BUCKET_MS[request.granularity]);
      if (buckets > MAX_BUCKETS) {
        throw new AppError(
          'invalid_parameter',
          `The range holds ${buckets} ${request.granularity}s; at most ${MAX_BUCKETS} buckets are summed at once (narrow since/until, or sum by day)`,
          { param: 'since' },
        );
      }
      const workspace = await workspaces.get(actor, request.workspaceId);
      return { currency: workspace.currency, since, until, buckets: await invocationRepo.usageSummary({ ...request, since, until }) };
    },
  };
}

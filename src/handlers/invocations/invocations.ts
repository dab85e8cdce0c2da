import type {
  GetInvocationData,
  GetInvocationLogData,
  GetInvocationLogResponses,
  GetInvocationResponses,
  GetUsageSummaryData,
  GetUsageSummaryResponses,
  ListInvocationsData,
  ListInvocationsResponses,
  ListUsageEventsData,
  ListUsageEventsResponses,
  UsageSummaryDto,
} from '../../../generated/client/types.gen.js';
import { toInvocationDto, toUsageEventDto, toUsageSummaryHead } from './invocation-mapper.js';
import { toRequestLogDto } from './request-log-mapper.js';
import type { Services } from '../../domain/services.js';
import { handler, ok, page, streamedJson, type HandlerMap } from '../../http/handler.js';
import { listQuery, optionalTimestamp } from '../../http/wire.js';

export function invocationHandlers({ invocations }: Services): HandlerMap {
  return {
    listInvocations: handler<ListInvocationsData, ListInvocationsResponses>(async ({ actor, path, query }) => {
      const result = await invocations.list(actor, { ...listQuery(query), workspaceId: path.workspaceId });
      return page(
        result.items.map((row) => toInvocationDto(row)),
        result.nextAfter,
      );
    }),
    getInvocation: handler<GetInvocationData, GetInvocationResponses>(async ({ actor, path }) => {
      const { invocation, usageEvents } = await invocations.get(actor, path.invocationId);
      return ok(toInvocationDto(invocation, usageEvents));
    }),
    getInvocationLog: handler<GetInvocationLogData, GetInvocationLogResponses>(async ({ actor, path }) =>
      ok(toRequestLogDto(await invocations.getLog(actor, path.invocationId))),
    ),
    listUsageEvents: handler<ListUsageEventsData, ListUsageEventsResponses>(async ({ actor, path, query }) => {
      const result = await invocations.listUsageEvents(actor, { ...listQuery(query), workspaceId: path.workspaceId });
      return page(result.items.map(toUsageEventDto), result.nextAfter);
    }),
    getUsageSummary: handler<GetUsageSummaryData, GetUsageSummaryResponses>(async ({ actor, path, query }) => {
      const granularity = query.granularity ?? 'hour';
      const groupBy = query.groupBy ?? 'model';
      const summary = await invocations.usageSummary(actor, {
        workspaceId: path.workspaceId,
        since: optionalTimestamp(query.since, 'since'),
        until: optionalTimestamp(query.until, 'until'),
        granularity,
        groupBy,
        timeZone: query.timeZone ?? 'UTC',
        top: query.top,
        offset: query.offset,
      });
      // The domain makes its buckets in the contract's shape (UsageBucketRow); streamedJson's type checks that they are.
      return streamedJson<UsageSummaryDto, 'buckets'>(
        toUsageSummaryHead(path.workspaceId, granularity, groupBy, summary),
        'buckets',
        summary.buckets,
      );
    }),
  };
}

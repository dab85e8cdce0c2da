import type { GetHealthData, GetHealthResponses, GetReadinessData, GetReadinessResponses } from '../../../generated/client/types.gen.js';
import type { Services } from '../../domain/services.js';
import { AppError } from '../../errors.js';
import { handler, ok, type HandlerContext, type HandlerMap } from '../../http/handler.js';

export function systemHandlers({ readiness }: Services, { eventLoop }: HandlerContext): HandlerMap {
  return {
    getHealth: handler<GetHealthData, GetHealthResponses>(async () => {
      const stall = eventLoop.stall();
      if (stall) {
        throw new AppError(
          'event_loop_blocked',
          `The event loop was blocked for ${stall.ms} ms (NEXUS_EVENT_LOOP_BLOCKED_MS): nothing was answered meanwhile`,
        );
      }
      return ok({ status: 'ok' });
    }),
    getReadiness: handler<GetReadinessData, GetReadinessResponses>(async () => {
      if (!(await readiness.check())) throw new AppError('not_ready', 'The database is not reachable or not migrated');
      return ok({ status: 'ok' });
    }),
  };
}

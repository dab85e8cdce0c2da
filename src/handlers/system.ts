import type { Services } from '../domain/services.js';
import { AppError } from '../errors.js';
import { handler, ok, type HandlerMap } from '../http/handler.js';

export function systemHandlers({ readiness }: Services): HandlerMap {
  return {
    getHealth: handler(async () => ok({ status: 'ok' })),
    getReadiness: handler(async () => {
      if (!(await readiness.check())) throw new AppError('not_ready', 'The database is not reachable or not migrated');
      return ok({ status: 'ok' });
    }),
  };
}

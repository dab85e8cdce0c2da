import type { Services } from '../domain/services.js';
import { pendingMigrations } from '../db/migrate.js';
import { AppError } from '../errors.js';
import { handler, ok, type HandlerMap } from '../http/handler.js';

export function systemHandlers(s: Services): HandlerMap {
  return {
    getHealth: handler(async () => ok({ status: 'ok' })),
    getReadiness: handler(async () => {
      try {
        await s.db.raw('select 1');
        if ((await pendingMigrations(s.db, s.config.databaseSchema)) > 0) throw new Error('migrations pending');
      } catch {
        throw new AppError('not_ready', 'The database is not reachable or not migrated');
      }
      return ok({ status: 'ok' });
    }),
  };
}

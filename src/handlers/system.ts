import type { Services } from '../domain/services.js';
import { pendingMigrations } from '../db/migrate.js';
import { AppError } from '../errors.js';
import { handler, ok, type HandlerMap } from '../http/handler.js';

/**
 * How long /readyz waits for the database. A database that does not answer (a network partition)
 * would otherwise hold the probe until the pool gives up on a connection, 30 s later.
 */
const READINESS_TIMEOUT_MS = 2000;

export function systemHandlers(s: Services): HandlerMap {
  return {
    getHealth: handler(async () => ok({ status: 'ok' })),
    getReadiness: handler(async () => {
      let timer: NodeJS.Timeout | undefined;
      const check = (async () => {
        await s.db.raw('select 1');
        if ((await pendingMigrations(s.db, s.config.databaseSchema)) > 0) throw new Error('migrations pending');
      })();
      check.catch(() => {});
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), READINESS_TIMEOUT_MS);
      });
      try {
        await Promise.race([check, late]);
      } catch {
        throw new AppError('not_ready', 'The database is not reachable or not migrated');
      } finally {
        clearTimeout(timer);
      }
      return ok({ status: 'ok' });
    }),
  };
}

/** What /readyz asks: the database answers, and no migration is pending. */
import type { Db } from './database.js';
import { pendingMigrations } from './migrate.js';

/**
 * How long the check waits for the database. A database that does not answer (a network partition)
 * would otherwise hold the probe until the pool gives up on a connection, 30 s later.
 */
const READINESS_TIMEOUT_MS = 2000;

export function createReadiness(deps: { db: Db; schema: string | undefined }) {
  return {
    /** True when the database answered and is migrated within READINESS_TIMEOUT_MS. */
    async check(): Promise<boolean> {
      let timer: NodeJS.Timeout | undefined;
      const check = (async () => {
        await deps.db.raw('select 1');
        if ((await pendingMigrations(deps.db, deps.schema)) > 0) throw new Error('migrations pending');
      })();
      check.catch(() => {});
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), READINESS_TIMEOUT_MS);
      });
      try {
        await Promise.race([check, late]);
        return true;
      } catch {
        return false;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

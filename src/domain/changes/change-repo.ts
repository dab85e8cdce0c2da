/** The one statement of the change feed: a notification, sent on the change's own transaction. */
import type { Queryable } from '../../db/database.js';

export function createChangeRepo() {
  return {
    /** PostgreSQL holds it until the transaction commits, and drops it on a rollback. */
    async notify(channel: string, payload: string, q: Queryable): Promise<void> {
      await q.raw('select pg_notify(?, ?)', [channel, payload]);
    },
  };
}

export type ChangeRepo = ReturnType<typeof createChangeRepo>;

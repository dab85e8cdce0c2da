/**
 * All SQL of request_logs: the gateway's batch insert (from its recorder, call-recorder.ts), the Admin API's read of
 * one call's log, and the sweep of expired logs in bounded batches (src/jobs.ts).
 */
import type { Queryable } from '../../db/database.js';
import type { RequestLogRow } from './request-log-types.js';

export function createRequestLogRepo(db: Queryable) {
  return {
    /** One statement for a batch; a log written twice (a retried batch) is kept once. */
    async insert(rows: RequestLogRow[], q: Queryable = db): Promise<void> {
      if (!rows.length) return;
      await q('request_logs').insert(rows).onConflict(['invocation_id', 'created_at']).ignore();
    },

    async findByInvocation(invocationId: string, q: Queryable = db): Promise<RequestLogRow | undefined> {
      return q<RequestLogRow>('request_logs').where({ invocation_id: invocationId }).first();
    },

    /** Removes up to `limit` logs expired by `now`, the longest expired first; returns how many. */
    async deleteExpired(now: Date, limit: number, q: Queryable = db): Promise<number> {
      const batch = q('request_logs')
        .select('invocation_id', 'created_at')
        .where('expires_at', '<=', now)
        .orderBy('expires_at')
        .limit(limit);
      return q('request_logs').whereIn(['invocation_id', 'created_at'], batch).delete();
    },
  };
}

export type RequestLogRepo = ReturnType<typeof createRequestLogRepo>;

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

    /** Removes up to `limit` logs expired by `now`; returns how many. */
    async deleteExpired(now: Date, limit: number, q: Queryable = db): Promise<number> {
      const result = await q.raw<{ rowCount: number }>(
        `delete from request_logs
          where (invocation_id, created_at) in (
            select invocation_id, created_at from request_logs where expires_at <= ? order by expires_at limit ?)`,
        [now, limit],
      );
      return result.rowCount ?? 0;
    },
  };
}

export type RequestLogRepo = ReturnType<typeof createRequestLogRepo>;

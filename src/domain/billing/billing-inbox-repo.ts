/** The SQL of the webhook inbox: billing_webhook_events and billing_webhook_rejection_counts. */
import type { Queryable } from '../../db/database.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';
import type { RejectionCountRow, WebhookEventRow, WebhookEventStatus } from './billing-repo.js';

/** Inserts unless (connection, provider event id) is stored already; returns null for a duplicate. */
async function insertEventIfNew(db: Queryable, row: WebhookEventRow, q: Queryable = db): Promise<WebhookEventRow | null> {
  const rows = await q('billing_webhook_events')
    .insert({ ...row, headers: JSON.stringify(row.headers) })
    .onConflict(['billing_connection_id', 'provider_event_id'])
    .ignore()
    .returning('*');
  return (rows[0] as WebhookEventRow | undefined) ?? null;
}

/** Adds counts of refused deliveries to their (connection, reason, day) rows. */
async function addRejectionCounts(db: Queryable, rows: RejectionCountRow[], q: Queryable = db): Promise<void> {
  if (!rows.length) return;
  await q('billing_webhook_rejection_counts')
    .insert(rows)
    .onConflict(['billing_connection_id', 'reason', 'day'])
    .merge({
      count: q.raw('billing_webhook_rejection_counts.count + excluded.count'),
      last_body_bytes: q.raw('excluded.last_body_bytes'),
      last_received_at: q.raw('greatest(billing_webhook_rejection_counts.last_received_at, excluded.last_received_at)'),
    });
}

/** Claims an event for processing: one processor at a time, whichever process runs it. */
async function claimEvent(
  db: Queryable,
  id: string,
  from: WebhookEventStatus[],
  staleBefore: Date,
  now: Date,
  q: Queryable = db,
): Promise<WebhookEventRow | undefined> {
  const [row] = await q('billing_webhook_events')
    .where({ id })
    .andWhere((w) => {
      w.whereIn('status', from).orWhere((s) => void s.where({ status: 'PROCESSING' }).andWhere('processing_started_at', '<', staleBefore));
    })
    .update({ status: 'PROCESSING', attempts: q.raw('attempts + 1'), processing_started_at: now })
    .returning('*');
  return row as WebhookEventRow | undefined;
}

async function finishEvent(
  db: Queryable,
  id: string,
  patch: { status: WebhookEventStatus; last_error: string | null; processed_at: Date | null },
  q: Queryable = db,
): Promise<void> {
  await q('billing_webhook_events').where({ id, status: 'PROCESSING' }).update(patch);
}

/**
 * RECEIVED events, PROCESSING ones whose processor died, and FAILED ones due for an
 * automatic retry (fewer than `maxAttempts`, 2^attempts minutes after the last one), oldest first.
 */
async function pendingEventIds(
  db: Queryable,
  staleBefore: Date,
  now: Date,
  maxAttempts: number,
  limit: number,
  q: Queryable = db,
): Promise<string[]> {
  const rows = await q('billing_webhook_events')
    .select('id')
    .where({ status: 'RECEIVED' })
    .orWhere((w) => void w.where({ status: 'PROCESSING' }).andWhere('processing_started_at', '<', staleBefore))
    .orWhere(
      (w) =>
        void w
          .where({ status: 'FAILED' })
          .andWhere('attempts', '<', maxAttempts)
          .andWhereRaw(`processing_started_at + power(2, attempts) * interval '1 minute' <= ?`, [now]),
    )
    .orderBy('received_at', 'asc')
    .orderBy('id', 'asc')
    .limit(limit);
  return rows.map((r: { id: string }) => r.id);
}

async function listEvents(
  db: Queryable,
  filter: PageRequest & { connectionId: string; status?: string | undefined; type?: string | undefined },
  q: Queryable = db,
): Promise<Page<WebhookEventRow>> {
  const query = q('billing_webhook_events')
    .select(
      'id',
      'workspace_id',
      'billing_connection_id',
      'provider_event_id',
      'event_type',
      'provider_created_at',
      'verified_with',
      'status',
      'attempts',
      'last_error',
      'received_at',
      'processed_at',
    )
    .where({ billing_connection_id: filter.connectionId });
  if (filter.status) query.where({ status: filter.status });
  if (filter.type) query.where({ event_type: filter.type });
  return paginate<WebhookEventRow>(query, filter);
}

/** The inbox's statements, each taking the pool first (createBillingRepo binds it). */
export const inboxQueries = { insertEventIfNew, addRejectionCounts, claimEvent, finishEvent, pendingEventIds, listEvents };

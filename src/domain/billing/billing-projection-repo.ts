/** The SQL of what subscriptions drive: external_subscriptions, billing_period_grants and billing_period_syncs. */
import type { Queryable } from '../../db/database.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';
import type { ExternalSubscriptionRow, PeriodGrantRow, PeriodSyncRow } from './billing-repo.js';

// Projections

async function findProjectionForUpdate(
  _db: Queryable,
  connectionId: string,
  externalSubscriptionId: string,
  q: Queryable,
): Promise<ExternalSubscriptionRow | undefined> {
  return q('external_subscriptions')
    .where({ billing_connection_id: connectionId, external_subscription_id: externalSubscriptionId })
    .forUpdate()
    .first();
}

/** Inserts the projection, or returns the one a concurrent writer inserted first (locked). */
async function insertProjection(_db: Queryable, row: ExternalSubscriptionRow, q: Queryable): Promise<ExternalSubscriptionRow | null> {
  const rows = await q('external_subscriptions')
    .insert(row)
    .onConflict(['billing_connection_id', 'external_subscription_id'])
    .ignore()
    .returning('*');
  return (rows[0] as ExternalSubscriptionRow | undefined) ?? null;
}

/** Every projection of the access (the access follows the best of them). */
async function projectionsOf(db: Queryable, accessId: string, q: Queryable = db): Promise<ExternalSubscriptionRow[]> {
  return q('external_subscriptions').where({ workspace_access_id: accessId });
}

/** The access's subscriptions that have ended (canceled): a new subscription's period replaces theirs. */
async function endedProjectionsOf(_db: Queryable, accessId: string, q: Queryable): Promise<ExternalSubscriptionRow[]> {
  return q('external_subscriptions').where({ workspace_access_id: accessId }).whereIn('status', ['canceled', 'incomplete_expired']);
}

async function listProjections(
  db: Queryable,
  filter: PageRequest & { accessId: string },
  q: Queryable = db,
): Promise<Page<ExternalSubscriptionRow>> {
  return paginate<ExternalSubscriptionRow>(q('external_subscriptions').select('*').where({ workspace_access_id: filter.accessId }), filter);
}

/**
 * Accesses that time alone may move (a past_due grace ending, a period set to cancel
 * ending): those with such a projection, not already EXPIRED or REVOKED, and none of an
 * archived workspace (read-only).
 */
async function timeSensitiveAccesses(db: Queryable, q: Queryable = db): Promise<{ accessId: string; workspaceId: string }[]> {
  const rows = await q('external_subscriptions as s')
    .distinct('s.workspace_access_id', 'a.workspace_id')
    .join('workspace_accesses as a', 'a.id', 's.workspace_access_id')
    .join('workspaces as ws', 'ws.id', 'a.workspace_id')
    .whereNot('ws.status', 'ARCHIVED')
    .whereNotIn('a.status', ['EXPIRED', 'REVOKED'])
    .andWhere((w) => void w.whereIn('s.status', ['past_due', 'canceled']).orWhere('s.cancel_at_period_end', true));
  return rows.map((r: { workspace_access_id: string; workspace_id: string }) => ({
    accessId: r.workspace_access_id,
    workspaceId: r.workspace_id,
  }));
}

// Period grants

/** The unique row written before a period's quota is granted; null when the period was granted already. */
async function insertPeriodGrant(_db: Queryable, row: PeriodGrantRow, q: Queryable): Promise<PeriodGrantRow | null> {
  const rows = await q('billing_period_grants').insert(row).onConflict(['workspace_access_id', 'period_key']).ignore().returning('*');
  return (rows[0] as PeriodGrantRow | undefined) ?? null;
}

/** A grant row whose grant was refused (an overlap that may be gone now), locked for another try. */
async function findRefusedPeriodGrantForUpdate(
  _db: Queryable,
  accessId: string,
  periodKey: string,
  q: Queryable,
): Promise<PeriodGrantRow | undefined> {
  return q('billing_period_grants')
    .where({ workspace_access_id: accessId, period_key: periodKey })
    .whereLike('outcome', 'refused:%')
    .forUpdate()
    .first();
}

async function updatePeriodGrant(_db: Queryable, id: string, patch: Partial<PeriodGrantRow>, q: Queryable): Promise<void> {
  await q('billing_period_grants').where({ id }).update(patch);
}

async function findPeriodGrant(db: Queryable, accessId: string, periodKey: string, q: Queryable = db): Promise<PeriodGrantRow | undefined> {
  return q('billing_period_grants').where({ workspace_access_id: accessId, period_key: periodKey }).first();
}

// App-sync periods

async function findPeriodSyncForUpdate(
  _db: Queryable,
  accessId: string,
  connectionId: string,
  externalPeriodId: string,
  q: Queryable,
): Promise<PeriodSyncRow | undefined> {
  return q('billing_period_syncs')
    .where({ workspace_access_id: accessId, billing_connection_id: connectionId, external_period_id: externalPeriodId })
    .forUpdate()
    .first();
}

async function insertPeriodSync(_db: Queryable, row: PeriodSyncRow, q: Queryable): Promise<PeriodSyncRow | null> {
  const rows = await q('billing_period_syncs')
    .insert(row)
    .onConflict(['workspace_access_id', 'billing_connection_id', 'external_period_id'])
    .ignore()
    .returning('*');
  return (rows[0] as PeriodSyncRow | undefined) ?? null;
}

/** The statements of projections, period grants and app-sync periods, each taking the pool first (createBillingRepo binds it). */
export const projectionQueries = {
  findProjectionForUpdate,
  insertProjection,
  projectionsOf,
  endedProjectionsOf,
  listProjections,
  timeSensitiveAccesses,
  insertPeriodGrant,
  findRefusedPeriodGrantForUpdate,
  updatePeriodGrant,
  findPeriodGrant,
  findPeriodSyncForUpdate,
  insertPeriodSync,
};

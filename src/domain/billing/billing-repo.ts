/** All SQL of the billing tables. */
import type { Queryable } from '../../db/database.js';
import { table } from '../../db/table.js';
import { AppError } from '../../errors.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';
import type { BillingKind, BillingMode, BillingProvider, SubscriptionStatus } from './billing-types.js';

type VerificationStatus = 'NOT_CONFIGURED' | 'UNVERIFIED' | 'VERIFIED' | 'FAILED';

export interface BillingConnectionRow {
  id: string;
  workspace_id: string;
  name: string;
  provider: BillingProvider;
  kind: BillingKind;
  mode: BillingMode;
  status: 'ACTIVE' | 'DISABLED';
  credential_ciphertext: string | null;
  credential_key_id: string | null;
  credential_preview: string | null;
  credential_verification_status: VerificationStatus;
  last_verification_error: string | null;
  last_verified_at: Date | null;
  external_account_id: string | null;
  webhook_secret_ciphertext: string | null;
  webhook_secret_key_id: string | null;
  previous_webhook_secret_ciphertext: string | null;
  previous_webhook_secret_key_id: string | null;
  previous_webhook_secret_expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
  disabled_at: Date | null;
}

export interface ProductMappingRow {
  id: string;
  workspace_id: string;
  billing_connection_id: string;
  external_product_id: string;
  external_price_id: string | null;
  plan_id: string;
  checkout_enabled: boolean;
  status: 'ACTIVE' | 'DISABLED';
  created_at: Date;
  disabled_at: Date | null;
}

export interface CheckoutRow {
  id: string;
  workspace_id: string;
  billing_connection_id: string;
  workspace_access_id: string;
  product_mapping_id: string;
  provider_checkout_id: string;
  url: string;
  created_at: Date;
}

export type WebhookEventStatus = 'RECEIVED' | 'PROCESSING' | 'PROCESSED' | 'IGNORED' | 'FAILED';

export interface WebhookEventRow {
  id: string;
  workspace_id: string;
  billing_connection_id: string;
  provider_event_id: string;
  event_type: string;
  provider_created_at: Date | null;
  raw_body: string;
  headers: Record<string, string>;
  verified_with: 'CURRENT_SECRET' | 'PREVIOUS_SECRET';
  status: WebhookEventStatus;
  attempts: number;
  last_error: string | null;
  received_at: Date;
  processing_started_at: Date | null;
  processed_at: Date | null;
}

export interface ExternalSubscriptionRow {
  id: string;
  workspace_id: string;
  billing_connection_id: string;
  workspace_access_id: string;
  provider: BillingProvider;
  external_subscription_id: string;
  external_customer_id: string | null;
  status: SubscriptionStatus;
  plan_id: string | null;
  external_product_id: string | null;
  external_price_id: string | null;
  current_period_start: Date | null;
  current_period_end: Date | null;
  cancel_at_period_end: boolean;
  canceled_at: Date | null;
  ended_at: Date | null;
  past_due_since: Date | null;
  source_updated_at: Date;
  source_tiebreak: string;
  created_at: Date;
  updated_at: Date;
}

export interface PeriodGrantRow {
  id: string;
  workspace_id: string;
  workspace_access_id: string;
  billing_connection_id: string;
  period_key: string;
  plan_id: string | null;
  period_start: Date;
  period_end: Date;
  quota_period_id: string | null;
  outcome: string;
  created_at: Date;
}

export interface PeriodSyncRow {
  id: string;
  workspace_id: string;
  workspace_access_id: string;
  billing_connection_id: string;
  external_period_id: string;
  plan_id: string;
  period_start: Date;
  period_end: Date;
  status: SubscriptionStatus;
  cancel_at_period_end: boolean;
  source_updated_at: Date;
  created_at: Date;
  updated_at: Date;
}

export interface ReconciliationRunRow {
  id: string;
  workspace_id: string;
  billing_connection_id: string;
  status: 'RUNNING' | 'SUCCEEDED' | 'FAILED';
  examined: number;
  changed: number;
  changes: unknown[];
  error: string | null;
  started_at: Date;
  finished_at: Date | null;
}

/** The access columns billing reads (the table belongs to the accesses area). */
export interface AccessRef {
  id: string;
  workspace_id: string;
  plan_id: string;
  status: 'PENDING' | 'ACTIVE' | 'SUSPENDED' | 'EXPIRED' | 'REVOKED';
}

/** Refused webhook deliveries of one connection, for one reason, on one UTC day. */
export interface RejectionCountRow {
  billing_connection_id: string;
  workspace_id: string;
  reason: string;
  /** YYYY-MM-DD, UTC. */
  day: string;
  count: number;
  last_body_bytes: number;
  last_received_at: Date;
}

export function createBillingRepo(db: Queryable) {
  const connections = table<BillingConnectionRow>(db, 'billing_connections');
  const mappings = table<ProductMappingRow>(db, 'billing_product_mappings', {
    conflict: (row) =>
      new AppError('billing_mapping_exists', 'An active mapping for this product and price already exists', {
        param: row.external_price_id ? 'externalPriceId' : 'externalProductId',
      }),
  });
  const checkouts = table<CheckoutRow>(db, 'billing_checkouts');
  const events = table<WebhookEventRow>(db, 'billing_webhook_events', { json: ['headers'] });
  const projections = table<ExternalSubscriptionRow>(db, 'external_subscriptions');
  const periodSyncs = table<PeriodSyncRow>(db, 'billing_period_syncs');
  const runs = table<ReconciliationRunRow>(db, 'reconciliation_runs', { json: ['changes'] });
  return {
    // Connections
    insertConnection: connections.insert,
    findConnection: connections.findById,
    findConnectionForUpdate: connections.findByIdForUpdate,
    updateConnection: connections.updateById,
    async listConnections(
      filter: PageRequest & { workspaceId: string; status?: string | undefined },
      q: Queryable = db,
    ): Promise<Page<BillingConnectionRow>> {
      const query = q('billing_connections').select('*').where({ workspace_id: filter.workspaceId });
      if (filter.status) query.where({ status: filter.status });
      return paginate<BillingConnectionRow>(query, filter);
    },

    // Product mappings
    insertMapping: mappings.insert,
    findMapping: mappings.findById,
    updateMapping: mappings.updateById,
    async listMappings(
      filter: PageRequest & { connectionId: string; status?: string | undefined },
      q: Queryable = db,
    ): Promise<Page<ProductMappingRow>> {
      const query = q('billing_product_mappings').select('*').where({ billing_connection_id: filter.connectionId });
      if (filter.status) query.where({ status: filter.status });
      return paginate<ProductMappingRow>(query, filter);
    },
    /** The active mapping for a price, else the product-only one. */
    async matchMapping(
      connectionId: string,
      productId: string | null,
      priceId: string | null,
      q: Queryable = db,
    ): Promise<ProductMappingRow | undefined> {
      if (priceId) {
        const byPrice = await q('billing_product_mappings')
          .where({ billing_connection_id: connectionId, external_price_id: priceId, status: 'ACTIVE' })
          .first();
        if (byPrice) return byPrice;
      }
      if (!productId) return undefined;
      return q('billing_product_mappings')
        .where({ billing_connection_id: connectionId, external_product_id: productId, status: 'ACTIVE' })
        .whereNull('external_price_id')
        .first();
    },

    // Checkouts
    insertCheckout: checkouts.insert,

    // Webhook inbox
    /** Inserts unless (connection, provider event id) is stored already; returns null for a duplicate. */
    async insertEventIfNew(row: WebhookEventRow, q: Queryable = db): Promise<WebhookEventRow | null> {
      const rows = await q('billing_webhook_events')
        .insert({ ...row, headers: JSON.stringify(row.headers) })
        .onConflict(['billing_connection_id', 'provider_event_id'])
        .ignore()
        .returning('*');
      return (rows[0] as WebhookEventRow | undefined) ?? null;
    },
    /** Adds counts of refused deliveries to their (connection, reason, day) rows. */
    async addRejectionCounts(rows: RejectionCountRow[], q: Queryable = db): Promise<void> {
      if (!rows.length) return;
      await q('billing_webhook_rejection_counts')
        .insert(rows)
        .onConflict(['billing_connection_id', 'reason', 'day'])
        .merge({
          count: q.raw('billing_webhook_rejection_counts.count + excluded.count'),
          last_body_bytes: q.raw('excluded.last_body_bytes'),
          last_received_at: q.raw('greatest(billing_webhook_rejection_counts.last_received_at, excluded.last_received_at)'),
        });
    },
    findEvent: events.findById,
    /** Claims an event for processing: one processor at a time, whichever process runs it. */
    async claimEvent(
      id: string,
      from: WebhookEventStatus[],
      staleBefore: Date,
      now: Date,
      q: Queryable = db,
    ): Promise<WebhookEventRow | undefined> {
      const [row] = await q('billing_webhook_events')
        .where({ id })
        .andWhere((w) => {
          w.whereIn('status', from).orWhere(
            (s) => void s.where({ status: 'PROCESSING' }).andWhere('processing_started_at', '<', staleBefore),
          );
        })
        .update({ status: 'PROCESSING', attempts: q.raw('attempts + 1'), processing_started_at: now })
        .returning('*');
      return row as WebhookEventRow | undefined;
    },
    async finishEvent(
      id: string,
      patch: { status: WebhookEventStatus; last_error: string | null; processed_at: Date | null },
      q: Queryable = db,
    ): Promise<void> {
      await q('billing_webhook_events').where({ id, status: 'PROCESSING' }).update(patch);
    },
    /**
     * RECEIVED events, PROCESSING ones whose processor died, and FAILED ones due for an
     * automatic retry (fewer than `maxAttempts`, 2^attempts minutes after the last one), oldest first.
     */
    async pendingEventIds(staleBefore: Date, now: Date, maxAttempts: number, limit: number, q: Queryable = db): Promise<string[]> {
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
    },
    async listEvents(
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
    },

    // Projections
    async findProjectionForUpdate(
      connectionId: string,
      externalSubscriptionId: string,
      q: Queryable,
    ): Promise<ExternalSubscriptionRow | undefined> {
      return q('external_subscriptions')
        .where({ billing_connection_id: connectionId, external_subscription_id: externalSubscriptionId })
        .forUpdate()
        .first();
    },
    /** Inserts the projection, or returns the one a concurrent writer inserted first (locked). */
    async insertProjection(row: ExternalSubscriptionRow, q: Queryable): Promise<ExternalSubscriptionRow | null> {
      const rows = await q('external_subscriptions')
        .insert(row)
        .onConflict(['billing_connection_id', 'external_subscription_id'])
        .ignore()
        .returning('*');
      return (rows[0] as ExternalSubscriptionRow | undefined) ?? null;
    },
    updateProjection: projections.updateById,
    /** Every projection of the access (the access follows the best of them). */
    async projectionsOf(accessId: string, q: Queryable = db): Promise<ExternalSubscriptionRow[]> {
      return projections.find({ workspace_access_id: accessId }, q);
    },
    /** The access's subscriptions that have ended (canceled): a new subscription's period replaces theirs. */
    async endedProjectionsOf(accessId: string, q: Queryable): Promise<ExternalSubscriptionRow[]> {
      return q('external_subscriptions').where({ workspace_access_id: accessId }).whereIn('status', ['canceled', 'incomplete_expired']);
    },
    async listProjections(filter: PageRequest & { accessId: string }, q: Queryable = db): Promise<Page<ExternalSubscriptionRow>> {
      return paginate<ExternalSubscriptionRow>(
        q('external_subscriptions').select('*').where({ workspace_access_id: filter.accessId }),
        filter,
      );
    },
    /**
     * Accesses that time alone may move (a past_due grace ending, a period set to cancel
     * ending): those with such a projection, not already EXPIRED or REVOKED, and none of an
     * archived workspace (read-only).
     */
    async timeSensitiveAccesses(q: Queryable = db): Promise<{ accessId: string; workspaceId: string }[]> {
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
    },

    // Period grants
    /** The unique row written before a period's quota is granted; null when the period was granted already. */
    async insertPeriodGrant(row: PeriodGrantRow, q: Queryable): Promise<PeriodGrantRow | null> {
      const rows = await q('billing_period_grants').insert(row).onConflict(['workspace_access_id', 'period_key']).ignore().returning('*');
      return (rows[0] as PeriodGrantRow | undefined) ?? null;
    },
    /** A grant row whose grant was refused (an overlap that may be gone now), locked for another try. */
    async findRefusedPeriodGrantForUpdate(accessId: string, periodKey: string, q: Queryable): Promise<PeriodGrantRow | undefined> {
      return q('billing_period_grants')
        .where({ workspace_access_id: accessId, period_key: periodKey })
        .whereLike('outcome', 'refused:%')
        .forUpdate()
        .first();
    },
    async updatePeriodGrant(id: string, patch: Partial<PeriodGrantRow>, q: Queryable): Promise<void> {
      await q('billing_period_grants').where({ id }).update(patch);
    },
    async findPeriodGrant(accessId: string, periodKey: string, q: Queryable = db): Promise<PeriodGrantRow | undefined> {
      return q('billing_period_grants').where({ workspace_access_id: accessId, period_key: periodKey }).first();
    },

    // App-sync periods
    async findPeriodSyncForUpdate(
      accessId: string,
      connectionId: string,
      externalPeriodId: string,
      q: Queryable,
    ): Promise<PeriodSyncRow | undefined> {
      return q('billing_period_syncs')
        .where({ workspace_access_id: accessId, billing_connection_id: connectionId, external_period_id: externalPeriodId })
        .forUpdate()
        .first();
    },
    async insertPeriodSync(row: PeriodSyncRow, q: Queryable): Promise<PeriodSyncRow | null> {
      const rows = await q('billing_period_syncs')
        .insert(row)
        .onConflict(['workspace_access_id', 'billing_connection_id', 'external_period_id'])
        .ignore()
        .returning('*');
      return (rows[0] as PeriodSyncRow | undefined) ?? null;
    },
    updatePeriodSync: periodSyncs.updateById,

    // Reconciliation runs
    insertRun: runs.insert,
    finishRun: runs.updateById,

    // Reads of other areas' tables
    /** Whether the workspace is archived (read-only). */
    async workspaceArchived(id: string, q: Queryable = db): Promise<boolean> {
      const row = (await q('workspaces').select('status').where({ id }).first()) as { status: string } | undefined;
      return row?.status === 'ARCHIVED';
    },
    /** The same, and it stays so until the transaction ends: the share lock makes an archive wait for the commit. */
    async workspaceArchivedForShare(id: string, tx: Queryable): Promise<boolean> {
      const row = (await tx('workspaces').select('status').where({ id }).forShare().first()) as { status: string } | undefined;
      return row?.status === 'ARCHIVED';
    },
    async findAccess(id: string, q: Queryable = db): Promise<AccessRef | undefined> {
      return q('workspace_accesses').select('id', 'workspace_id', 'plan_id', 'status').where({ id }).first();
    },
    async findAccessForUpdate(id: string, q: Queryable): Promise<AccessRef | undefined> {
      return q('workspace_accesses').select('id', 'workspace_id', 'plan_id', 'status').where({ id }).forUpdate().first();
    },
    async findPlan(id: string, q: Queryable = db): Promise<{ id: string; workspace_id: string; status: string } | undefined> {
      return q('plans').select('id', 'workspace_id', 'status').where({ id }).first();
    },
  };
}

export type BillingRepo = ReturnType<typeof createBillingRepo>;

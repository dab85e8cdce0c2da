/** All SQL of the billing tables: the rows, and the statements of connections and mappings (the inbox's and the projections' are beside it). */
import type { Queryable } from '../../db/database.js';
import { table } from '../../db/table.js';
import { AppError } from '../../errors.js';
import { bindDeps } from '../bind.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';
import { inboxQueries } from './billing-inbox-repo.js';
import { projectionQueries } from './billing-projection-repo.js';
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

// Connections and product mappings

async function listConnections(
  db: Queryable,
  filter: PageRequest & { workspaceId: string; status?: string | undefined },
  q: Queryable = db,
): Promise<Page<BillingConnectionRow>> {
  const query = q('billing_connections').select('*').where({ workspace_id: filter.workspaceId });
  if (filter.status) query.where({ status: filter.status });
  return paginate<BillingConnectionRow>(query, filter);
}

async function listMappings(
  db: Queryable,
  filter: PageRequest & { connectionId: string; status?: string | undefined },
  q: Queryable = db,
): Promise<Page<ProductMappingRow>> {
  const query = q('billing_product_mappings').select('*').where({ billing_connection_id: filter.connectionId });
  if (filter.status) query.where({ status: filter.status });
  return paginate<ProductMappingRow>(query, filter);
}

/** The active mapping for a price, else the product-only one. */
async function matchMapping(
  db: Queryable,
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
}

// Reads of other areas' tables

/** Whether the workspace is archived (read-only). */
async function workspaceArchived(db: Queryable, id: string, q: Queryable = db): Promise<boolean> {
  const row = (await q('workspaces').select('status').where({ id }).first()) as { status: string } | undefined;
  return row?.status === 'ARCHIVED';
}

/** The same, and it stays so until the transaction ends: the share lock makes an archive wait for the commit. */
async function workspaceArchivedForShare(_db: Queryable, id: string, tx: Queryable): Promise<boolean> {
  const row = (await tx('workspaces').select('status').where({ id }).forShare().first()) as { status: string } | undefined;
  return row?.status === 'ARCHIVED';
}

async function findAccess(db: Queryable, id: string, q: Queryable = db): Promise<AccessRef | undefined> {
  return q('workspace_accesses').select('id', 'workspace_id', 'plan_id', 'status').where({ id }).first();
}

async function findAccessForUpdate(_db: Queryable, id: string, q: Queryable): Promise<AccessRef | undefined> {
  return q('workspace_accesses').select('id', 'workspace_id', 'plan_id', 'status').where({ id }).forUpdate().first();
}

async function findPlan(
  db: Queryable,
  id: string,
  q: Queryable = db,
): Promise<{ id: string; workspace_id: string; status: string } | undefined> {
  return q('plans').select('id', 'workspace_id', 'status').where({ id }).first();
}

/** Every statement of the billing tables, on `db` unless given a transaction. */
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
    insertConnection: connections.insert,
    findConnection: connections.findById,
    findConnectionForUpdate: connections.findByIdForUpdate,
    updateConnection: connections.updateById,
    insertMapping: mappings.insert,
    findMapping: mappings.findById,
    updateMapping: mappings.updateById,
    insertCheckout: checkouts.insert,
    findEvent: events.findById,
    updateProjection: projections.updateById,
    updatePeriodSync: periodSyncs.updateById,
    insertRun: runs.insert,
    finishRun: runs.updateById,
    ...bindDeps(db, {
      listConnections,
      listMappings,
      matchMapping,
      workspaceArchived,
      workspaceArchivedForShare,
      findAccess,
      findAccessForUpdate,
      findPlan,
    }),
    ...bindDeps(db, inboxQueries),
    ...bindDeps(db, projectionQueries),
  };
}

export type BillingRepo = ReturnType<typeof createBillingRepo>;

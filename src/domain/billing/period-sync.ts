/**
 * APP_SYNC: the customer's backend reports the billing periods of its own billing
 * system. A period is identified by its external id; repeating a report is a no-op
 * and a report older (by `sourceUpdatedAt`) than the stored one never overwrites it.
 * The report drives the access like a provider subscription does (projection
 * `app-sync:{accessId}`); the period's quota is granted once.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { AccessRef, BillingConnectionRow, BillingRepo, PeriodSyncRow } from './billing-repo.js';
import type { SubscriptionState, SubscriptionStatus } from './billing-types.js';
import { requireActive } from './connection-lookup.js';
import type { Projector } from './projection.js';

/** A period as the customer's backend reports it. */
interface PeriodReport {
  billingConnectionId: string;
  externalPeriodId: string;
  planId?: string | undefined;
  externalProductId?: string | undefined;
  externalPriceId?: string | undefined;
  periodStart: Date;
  periodEnd: Date;
  status: SubscriptionStatus;
  cancelAtPeriodEnd?: boolean | undefined;
  /** When the report's state was current in the backend's billing: an older report never overwrites a newer one. */
  sourceUpdatedAt: Date;
}

/** What a report reads and writes through. */
interface PeriodSyncDeps {
  db: Db;
  repo: BillingRepo;
  projector: Projector;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
}

/** The report, about one access, through one of its workspace's connections, selling one plan. */
interface Reported {
  access: AccessRef;
  conn: BillingConnectionRow;
  planId: string;
  dto: PeriodReport;
}

const appSyncSubscriptionId = (accessId: string) => `app-sync:${accessId}`;
const appSyncPeriodKey = (connectionId: string, externalPeriodId: string) => `sync:${connectionId}:${externalPeriodId}`;

/** The access's workspace's active APP_SYNC connection the report names. */
async function reportingConnection(
  { repo }: PeriodSyncDeps,
  access: AccessRef,
  connectionId: string,
  tx: Queryable,
): Promise<BillingConnectionRow> {
  const conn = await repo.findConnection(connectionId, tx);
  if (!conn || conn.workspace_id !== access.workspace_id) {
    throw new AppError('billing_connection_not_found', "Billing connection not found in the access's workspace", {
      param: 'billingConnectionId',
    });
  }
  requireActive(conn);
  if (conn.kind !== 'APP_SYNC') {
    throw new AppError('billing_not_configured', 'Periods are reported through an APP_SYNC connection', { param: 'billingConnectionId' });
  }
  return conn;
}

/** The plan the report names, or the one its product or price is mapped to. */
async function reportedPlan(
  { repo }: PeriodSyncDeps,
  access: AccessRef,
  conn: BillingConnectionRow,
  dto: PeriodReport,
  tx: Queryable,
): Promise<string> {
  if (dto.planId) {
    const plan = await repo.findPlan(dto.planId, tx);
    if (!plan || plan.workspace_id !== access.workspace_id)
      throw new AppError('plan_not_found', 'Plan not found in this workspace', { param: 'planId' });
    return dto.planId;
  }
  if (dto.externalProductId || dto.externalPriceId) {
    const planId = (await repo.matchMapping(conn.id, dto.externalProductId ?? null, dto.externalPriceId ?? null, tx))?.plan_id;
    if (!planId)
      throw new AppError('product_mapping_not_found', 'No active mapping for this product or price', { param: 'externalProductId' });
    return planId;
  }
  throw new AppError('invalid_parameter', 'Give planId, or externalProductId/externalPriceId of a mapping', { param: 'planId' });
}

/** Stores the report; `applied` false: a repeat, or older than the stored one (nothing changes). */
async function storeReport(
  { repo, clock }: PeriodSyncDeps,
  { access, conn, planId, dto }: Reported,
  tx: Queryable,
): Promise<{ row: PeriodSyncRow; applied: boolean }> {
  const now = clock.now();
  const values = {
    plan_id: planId,
    period_start: dto.periodStart,
    period_end: dto.periodEnd,
    status: dto.status,
    cancel_at_period_end: dto.cancelAtPeriodEnd ?? false,
    source_updated_at: dto.sourceUpdatedAt,
    updated_at: now,
  };
  let row = await repo.findPeriodSyncForUpdate(access.id, conn.id, dto.externalPeriodId, tx);
  if (!row) {
    const inserted = await repo.insertPeriodSync(
      {
        id: newId(),
        workspace_id: access.workspace_id,
        workspace_access_id: access.id,
        billing_connection_id: conn.id,
        external_period_id: dto.externalPeriodId,
        created_at: now,
        ...values,
      },
      tx,
    );
    if (inserted) return { row: inserted, applied: true };
    row = (await repo.findPeriodSyncForUpdate(access.id, conn.id, dto.externalPeriodId, tx))!;
  }
  if (dto.sourceUpdatedAt <= row.source_updated_at) return { row, applied: false };
  return { row: await repo.updatePeriodSync(row.id, values, tx), applied: true };
}

/** The stored report drives the access like a provider subscription does. */
async function applyReport(
  { projector, audit }: PeriodSyncDeps,
  actor: Actor,
  { access, conn, planId, dto }: Reported,
  stored: PeriodSyncRow,
  tx: Queryable,
): Promise<void> {
  const state: SubscriptionState = {
    externalSubscriptionId: appSyncSubscriptionId(access.id),
    externalCustomerId: null,
    status: dto.status,
    accessId: access.id,
    externalProductId: dto.externalProductId ?? null,
    externalPriceId: dto.externalPriceId ?? null,
    currentPeriodStart: dto.periodStart,
    currentPeriodEnd: dto.periodEnd,
    cancelAtPeriodEnd: dto.cancelAtPeriodEnd ?? false,
    canceledAt: null,
    endedAt: null,
    sourceUpdatedAt: dto.sourceUpdatedAt,
    sourceTiebreak: dto.externalPeriodId,
  };
  const periodKey = appSyncPeriodKey(conn.id, dto.externalPeriodId);
  const result = await projector.apply(conn, state, { actor, planId, periodKey }, tx);
  await audit.record(
    actor,
    {
      action: 'billing_period.synced',
      resourceType: 'billing_period_sync',
      resourceId: stored.id,
      workspaceId: access.workspace_id,
      changes: { ...dto, effects: result.effects },
    },
    tx,
  );
}

async function sync(
  deps: PeriodSyncDeps,
  actor: Actor,
  accessId: string,
  dto: PeriodReport,
): Promise<{ row: PeriodSyncRow; applied: boolean; quotaGranted: boolean }> {
  const { db, repo, workspaces } = deps;
  if (!(dto.periodEnd > dto.periodStart))
    throw new AppError('invalid_parameter', 'periodEnd must be after periodStart', { param: 'periodEnd' });

  const found = await repo.findAccess(accessId);
  if (!found) throw new AppError('access_not_found', 'Workspace access not found');
  assertVisible(actor, found.workspace_id, 'access_not_found', 'Workspace access');
  // The access under the id the report gives: its projection's and its periods' keys are made from it.
  const access = { ...found, id: accessId };

  return db.transaction(async (tx) => {
    await workspaces.requireWritable(actor, access.workspace_id, tx);
    const conn = await reportingConnection(deps, access, dto.billingConnectionId, tx);
    const report: Reported = { access, conn, planId: await reportedPlan(deps, access, conn, dto, tx), dto };
    const { row, applied } = await storeReport(deps, report, tx);
    if (applied) await applyReport(deps, actor, report, row, tx);
    const grant = await repo.findPeriodGrant(accessId, appSyncPeriodKey(conn.id, dto.externalPeriodId), tx);
    return { row, applied, quotaGranted: Boolean(grant && (grant.outcome === 'granted' || grant.outcome === 'existing')) };
  });
}

export const createPeriodSync = (deps: PeriodSyncDeps) => bindDeps(deps, { sync });

/**
 * APP_SYNC: the customer's backend reports the billing periods of its own billing
 * system. A period is identified by its external id; repeating a report is a no-op
 * and a report older (by `sourceUpdatedAt`) than the stored one never overwrites it.
 * The report drives the access like a provider subscription does (projection
 * `app-sync:{accessId}`); the period's quota is granted once.
 */
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { BillingRepo, PeriodSyncRow } from './billing-repo.js';
import type { SubscriptionState, SubscriptionStatus } from './billing-types.js';
import type { Projector } from './projection.js';

/** A period as the customer's backend reports it. */
export interface PeriodReport {
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

const appSyncSubscriptionId = (accessId: string) => `app-sync:${accessId}`;
const appSyncPeriodKey = (connectionId: string, externalPeriodId: string) => `sync:${connectionId}:${externalPeriodId}`;

export function createPeriodSync(deps: {
  db: Db;
  repo: BillingRepo;
  projector: Projector;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
}) {
  const { db, repo, projector, clock } = deps;

  return {
    async sync(
      actor: Actor,
      accessId: string,
      dto: PeriodReport,
    ): Promise<{ row: PeriodSyncRow; applied: boolean; quotaGranted: boolean }> {
      const { periodStart, periodEnd, sourceUpdatedAt } = dto;
      if (!(periodEnd > periodStart))
        throw new AppError('invalid_parameter', 'periodEnd must be after periodStart', { param: 'periodEnd' });

      const access = await repo.findAccess(accessId);
      if (!access) throw new AppError('access_not_found', 'Workspace access not found');
      assertVisible(actor, access.workspace_id, 'access_not_found', 'Workspace access');

      return db.transaction(async (tx) => {
        await deps.workspaces.requireWritable(actor, access.workspace_id, tx);
        const conn = await repo.findConnection(dto.billingConnectionId, tx);
        if (!conn || conn.workspace_id !== access.workspace_id) {
          throw new AppError('billing_connection_not_found', "Billing connection not found in the access's workspace", {
            param: 'billingConnectionId',
          });
        }
        if (conn.status !== 'ACTIVE')
          throw new AppError('billing_connection_disabled', 'The billing connection is disabled', { current_status: conn.status });
        if (conn.kind !== 'APP_SYNC') {
          throw new AppError('billing_not_configured', 'Periods are reported through an APP_SYNC connection', {
            param: 'billingConnectionId',
          });
        }

        let planId = dto.planId;
        if (planId) {
          const plan = await repo.findPlan(planId, tx);
          if (!plan || plan.workspace_id !== access.workspace_id)
            throw new AppError('plan_not_found', 'Plan not found in this workspace', { param: 'planId' });
        } else if (dto.externalProductId || dto.externalPriceId) {
          planId = (await repo.matchMapping(conn.id, dto.externalProductId ?? null, dto.externalPriceId ?? null, tx))?.plan_id;
          if (!planId)
            throw new AppError('product_mapping_not_found', 'No active mapping for this product or price', { param: 'externalProductId' });
        } else {
          throw new AppError('invalid_parameter', 'Give planId, or externalProductId/externalPriceId of a mapping', { param: 'planId' });
        }

        const periodKey = appSyncPeriodKey(conn.id, dto.externalPeriodId);
        const granted = async () => {
          const grant = await repo.findPeriodGrant(accessId, periodKey, tx);
          return Boolean(grant && (grant.outcome === 'granted' || grant.outcome === 'existing'));
        };
        const now = clock.now();
        const values = {
          plan_id: planId,
          period_start: periodStart,
          period_end: periodEnd,
          status: dto.status,
          cancel_at_period_end: dto.cancelAtPeriodEnd ?? false,
          source_updated_at: sourceUpdatedAt,
          updated_at: now,
        };
        let row = await repo.findPeriodSyncForUpdate(accessId, conn.id, dto.externalPeriodId, tx);
        if (!row) {
          row =
            (await repo.insertPeriodSync(
              {
                id: newId(),
                workspace_id: access.workspace_id,
                workspace_access_id: accessId,
                billing_connection_id: conn.id,
                external_period_id: dto.externalPeriodId,
                created_at: now,
                ...values,
              },
              tx,
            )) ?? undefined;
          if (!row) row = (await repo.findPeriodSyncForUpdate(accessId, conn.id, dto.externalPeriodId, tx))!;
          else return finish(row);
        }
        // A repeat, or an older report: nothing changes.
        if (sourceUpdatedAt <= row.source_updated_at) return { row, applied: false, quotaGranted: await granted() };
        row = await repo.updatePeriodSync(row.id, values, tx);
        return finish(row);

        async function finish(stored: PeriodSyncRow) {
          const state: SubscriptionState = {
            externalSubscriptionId: appSyncSubscriptionId(accessId),
            externalCustomerId: null,
            status: dto.status,
            accessId,
            externalProductId: dto.externalProductId ?? null,
            externalPriceId: dto.externalPriceId ?? null,
            currentPeriodStart: periodStart,
            currentPeriodEnd: periodEnd,
            cancelAtPeriodEnd: dto.cancelAtPeriodEnd ?? false,
            canceledAt: null,
            endedAt: null,
            sourceUpdatedAt,
            sourceTiebreak: dto.externalPeriodId,
          };
          const result = await projector.apply(conn!, state, { actor, planId: planId!, periodKey }, tx);
          await deps.audit.record(
            actor,
            {
              action: 'billing_period.synced',
              resourceType: 'billing_period_sync',
              resourceId: stored.id,
              workspaceId: access!.workspace_id,
              changes: { ...dto, effects: result.effects },
            },
            tx,
          );
          return { row: stored, applied: true, quotaGranted: await granted() };
        }
      });
    },
  };
}

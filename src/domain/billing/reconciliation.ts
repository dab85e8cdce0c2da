/**
 * Reconciliation: list the provider's subscriptions and apply each as a fresh
 * state, repairing projections (and the accesses they drive) that drifted, for
 * instance after missed webhooks. Each run is recorded with what it changed; a
 * second run right after changes nothing.
 */
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import { systemActor, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { BillingConnectionRow, BillingRepo } from './billing-repo.js';
import { ProviderError, type BillingProviderClient } from './billing-types.js';
import { BILLING_ACTOR, type Projector } from './projection.js';

export function createReconciler(deps: {
  db: Db;
  repo: BillingRepo;
  projector: Projector;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
  logger: Logger;
  clientFor: (conn: BillingConnectionRow) => BillingProviderClient | null;
  visibleConnection: (actor: Actor, id: string) => Promise<BillingConnectionRow>;
}) {
  const { db, repo, projector, clock } = deps;

  return {
    async reconcile(actor: Actor, connectionId: string): Promise<{ runId: string; examined: number; changed: number }> {
      const conn = await deps.visibleConnection(actor, connectionId);
      if (conn.status !== 'ACTIVE') {
        throw new AppError('billing_connection_disabled', 'The billing connection is disabled', { current_status: conn.status });
      }
      if (conn.kind !== 'HOSTED')
        throw new AppError('billing_not_configured', 'Only HOSTED connections have provider subscriptions to reconcile');
      const client = deps.clientFor(conn);
      if (!client) throw new AppError('billing_not_configured', 'The connection has no provider credential', { param: 'credential' });

      const runId = newId();
      await db.transaction(async (tx) => {
        await deps.workspaces.requireWritable(actor, conn.workspace_id, tx);
        await repo.insertRun(
          {
            id: runId,
            workspace_id: conn.workspace_id,
            billing_connection_id: conn.id,
            status: 'RUNNING',
            examined: 0,
            changed: 0,
            changes: [],
            error: null,
            started_at: clock.now(),
            finished_at: null,
          },
          tx,
        );
        await deps.audit.record(
          actor,
          {
            action: 'billing_connection.reconciliation_started',
            resourceType: 'billing_connection',
            resourceId: conn.id,
            workspaceId: conn.workspace_id,
            changes: { runId },
          },
          tx,
        );
      });

      const runActor = systemActor(BILLING_ACTOR, `reconcile:${runId}`);
      const changes: unknown[] = [];
      let examined = 0;
      try {
        for await (const state of client.listSubscriptions()) {
          examined++;
          const result = await db.transaction((tx) => projector.apply(conn, state, { actor: runActor }, tx));
          if (result.outcome === 'ignored') continue;
          if (Object.keys(result.changes).length || result.effects.length) {
            changes.push({
              externalSubscriptionId: state.externalSubscriptionId,
              projectionId: result.projectionId,
              changes: result.changes,
              effects: result.effects,
            });
          }
        }
      } catch (err) {
        const message = err instanceof ProviderError || err instanceof AppError ? err.message : 'internal error';
        await repo.finishRun(runId, {
          status: 'FAILED',
          examined,
          changed: changes.length,
          changes,
          error: message,
          finished_at: clock.now(),
        });
        deps.logger.warn({ msg: 'billing reconciliation failed', runId, connectionId: conn.id, error: message });
        if (err instanceof ProviderError)
          throw new AppError('billing_provider_error', `Reconciliation could not list subscriptions: ${err.message}`);
        throw err;
      }
      await repo.finishRun(runId, { status: 'SUCCEEDED', examined, changed: changes.length, changes, finished_at: clock.now() });
      return { runId, examined, changed: changes.length };
    },
  };
}

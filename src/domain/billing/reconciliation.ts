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
import { bindDeps } from '../bind.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { BillingConnectionRow, BillingRepo } from './billing-repo.js';
import { ProviderError, type BillingProviderClient, type SubscriptionState } from './billing-types.js';
import { requireActive, visibleConnection } from './connection-lookup.js';
import type { Projector } from './projection.js';
import { BILLING_ACTOR } from './projection-rules.js';

/** What a reconciliation reads and writes through. */
export interface ReconcilerDeps {
  db: Db;
  repo: BillingRepo;
  projector: Projector;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
  logger: Logger;
  clientFor: (conn: BillingConnectionRow) => BillingProviderClient | null;
}

/** What a run found: how many subscriptions, and what each that changed something changed. */
interface RunTally {
  examined: number;
  changes: unknown[];
}

/** The run's row and its audit entry, once the workspace is known writable. */
async function startRun({ db, repo, workspaces, audit, clock }: ReconcilerDeps, actor: Actor, conn: BillingConnectionRow): Promise<string> {
  const runId = newId();
  await db.transaction(async (tx) => {
    await workspaces.requireWritable(actor, conn.workspace_id, tx);
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
    await audit.record(
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
  return runId;
}

/** Applies each of the provider's subscriptions as a fresh state, each in its own transaction; `tally` counts as it goes. */
async function applyAll(
  { db, projector }: ReconcilerDeps,
  conn: BillingConnectionRow,
  subscriptions: AsyncIterable<SubscriptionState>,
  runId: string,
  tally: RunTally,
): Promise<void> {
  const runActor = systemActor(BILLING_ACTOR, `reconcile:${runId}`);
  for await (const state of subscriptions) {
    tally.examined++;
    const result = await db.transaction((tx) => projector.apply(conn, state, { actor: runActor }, tx));
    if (result.outcome === 'ignored') continue;
    if (Object.keys(result.changes).length || result.effects.length) {
      tally.changes.push({
        externalSubscriptionId: state.externalSubscriptionId,
        projectionId: result.projectionId,
        changes: result.changes,
        effects: result.effects,
      });
    }
  }
}

async function reconcile(
  deps: ReconcilerDeps,
  actor: Actor,
  connectionId: string,
): Promise<{ runId: string; examined: number; changed: number }> {
  const { repo, clock } = deps;
  const conn = await visibleConnection(deps, actor, connectionId);
  requireActive(conn);
  if (conn.kind !== 'HOSTED')
    throw new AppError('billing_not_configured', 'Only HOSTED connections have provider subscriptions to reconcile');
  const client = deps.clientFor(conn);
  if (!client) throw new AppError('billing_not_configured', 'The connection has no provider credential', { param: 'credential' });

  const runId = await startRun(deps, actor, conn);
  const tally: RunTally = { examined: 0, changes: [] };
  try {
    await applyAll(deps, conn, client.listSubscriptions(), runId, tally);
  } catch (err) {
    const message = err instanceof ProviderError || err instanceof AppError ? err.message : 'internal error';
    const { examined, changes } = tally;
    await repo.finishRun(runId, { status: 'FAILED', examined, changed: changes.length, changes, error: message, finished_at: clock.now() });
    deps.logger.warn({ msg: 'billing reconciliation failed', runId, connectionId: conn.id, error: message });
    if (err instanceof ProviderError)
      throw new AppError('billing_provider_error', `Reconciliation could not list subscriptions: ${err.message}`);
    throw err;
  }
  const { examined, changes } = tally;
  await repo.finishRun(runId, { status: 'SUCCEEDED', examined, changed: changes.length, changes, finished_at: clock.now() });
  return { runId, examined, changed: changes.length };
}

export const createReconciler = (deps: ReconcilerDeps) => bindDeps(deps, { reconcile });

/**
 * How every billing rule finds a connection (visible to the actor, locked for a change, active),
 * and what the rules of connections, mappings and checkouts read and write through.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import type { SecretBox } from '../security/secret-box.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { BillingConnectionRow, BillingRepo } from './billing-repo.js';
import type { BillingProviderClient } from './billing-types.js';

export interface ConnectionDeps {
  db: Db;
  repo: BillingRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  secretBox: SecretBox;
  clock: Clock;
  /** How long a rotated-out webhook secret still verifies. */
  webhookSecretOverlapMs: number;
  clientFor: (conn: BillingConnectionRow) => BillingProviderClient | null;
}

/** What finding a connection reads through (the reconciler and app-sync reports find theirs too). */
type LookupDeps = Pick<ConnectionDeps, 'db' | 'repo'>;

function visible(actor: Actor, row: BillingConnectionRow | undefined): BillingConnectionRow {
  if (!row) throw new AppError('billing_connection_not_found', 'Billing connection not found');
  assertVisible(actor, row.workspace_id, 'billing_connection_not_found', 'Billing connection');
  return row;
}

export async function visibleConnection(
  { db, repo }: LookupDeps,
  actor: Actor,
  id: string,
  q: Queryable = db,
): Promise<BillingConnectionRow> {
  return visible(actor, await repo.findConnection(id, q));
}

/** Locks a connection for a change: visible, its workspace writable. */
export async function writableConnection(
  { repo, workspaces }: LookupDeps & { workspaces: WorkspaceService },
  actor: Actor,
  id: string,
  tx: Queryable,
): Promise<BillingConnectionRow> {
  const row = visible(actor, await repo.findConnectionForUpdate(id, tx));
  await workspaces.requireWritable(actor, row.workspace_id, tx);
  return row;
}

export function requireActive(row: BillingConnectionRow): void {
  if (row.status !== 'ACTIVE') {
    throw new AppError('billing_connection_disabled', 'The billing connection is disabled', { current_status: row.status });
  }
}

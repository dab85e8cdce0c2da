/** How every provider connection rule finds a connection (visible, locked for a change), and what the rules read and write through. */
import type { Config } from '../../config.js';
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { canSeeWorkspace, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import type { Events } from '../events/outbox.js';
import type { SecretBox } from '../security/secret-box.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { ProviderConnectionRepo, ProviderConnectionRow } from './provider-connection-repo.js';

export interface ProviderConnectionDeps {
  db: Db;
  providerConnectionRepo: ProviderConnectionRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  secretBox: SecretBox;
  config: Config;
  clock: Clock;
  changes: ChangeFeed;
  events: Events;
}

export const RESOURCE = 'provider_connection';

function notFound(): AppError {
  return new AppError('provider_connection_not_found', 'Provider connection not found');
}

export function archived(row: ProviderConnectionRow): AppError {
  return new AppError('connection_archived', 'The provider connection is archived and read-only', { current_status: row.status });
}

export async function get(
  { db, providerConnectionRepo }: ProviderConnectionDeps,
  actor: Actor,
  id: string,
  q: Queryable = db,
): Promise<ProviderConnectionRow> {
  const row = await providerConnectionRepo.findById(id, q);
  if (!row || !canSeeWorkspace(actor, row.workspace_id)) throw notFound();
  return row;
}

/**
 * A change to one connection: visible, its workspace writable (share-locked
 * first, as every area does), the row locked and not archived.
 */
export async function lockForChange(deps: ProviderConnectionDeps, actor: Actor, id: string, tx: Queryable): Promise<ProviderConnectionRow> {
  const seen = await get(deps, actor, id, tx);
  await deps.workspaces.requireWritable(actor, seen.workspace_id, tx);
  const row = await deps.providerConnectionRepo.findByIdForUpdate(id, tx);
  if (!row) throw notFound();
  if (row.status === 'ARCHIVED') throw archived(row);
  return row;
}

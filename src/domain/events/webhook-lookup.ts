/** How every webhook rule finds an endpoint (visible to the actor, locked for a change), and what the rules read and write through. */
import type { Config } from '../../config.js';
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { canSeeWorkspace, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import type { SecretBox } from '../security/secret-box.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { Events } from './outbox.js';
import type { WebhookEndpointRow, WebhookRepo } from './webhook-repo.js';

export interface WebhookDeps {
  db: Db;
  webhookRepo: WebhookRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  secretBox: SecretBox;
  events: Events;
  config: Config;
  clock: Clock;
}

export const RESOURCE = 'webhook_endpoint';

const notFound = () => new AppError('webhook_endpoint_not_found', 'Webhook endpoint not found');

export async function get({ db, webhookRepo }: WebhookDeps, actor: Actor, id: string, q: Queryable = db): Promise<WebhookEndpointRow> {
  const row = await webhookRepo.findEndpoint(id, q);
  if (!row || !canSeeWorkspace(actor, row.workspace_id)) throw notFound();
  return row;
}

/** A change to one endpoint: visible, its workspace writable, the row locked and not deleted. */
export async function lockForChange(deps: WebhookDeps, actor: Actor, id: string, tx: Queryable): Promise<WebhookEndpointRow> {
  const seen = await get(deps, actor, id, tx);
  await deps.workspaces.requireWritable(actor, seen.workspace_id, tx);
  const row = await deps.webhookRepo.findEndpointForUpdate(id, tx);
  if (!row || row.deleted_at) throw notFound();
  return row;
}

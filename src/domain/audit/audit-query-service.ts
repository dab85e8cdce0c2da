/** Reading the audit trail: a workspace's entries, for whoever may see the workspace. */
import type { Actor } from '../actor.js';
import type { Page, PageRequest, TimeRange } from '../pagination.js';
import type { AuditRepo, ListedAuditRow } from './audit-repo.js';

/** What reading the trail needs of the workspaces' service (a layer above, which writes through audit): its visibility check. */
type WorkspaceService = { get(actor: Actor, workspaceId: string): Promise<unknown> };

export interface AuditQuery extends PageRequest, TimeRange {
  action?: string | undefined;
  resourceType?: string | undefined;
  resourceId?: string | undefined;
  actorKeyId?: string | undefined;
  actorEmail?: string | undefined;
}

export function createAuditQueryService(deps: { auditRepo: AuditRepo; workspaces: WorkspaceService }) {
  return {
    async list(actor: Actor, workspaceId: string, query: AuditQuery): Promise<Page<ListedAuditRow>> {
      // Archived workspaces stay readable; another tenant's answers 404.
      await deps.workspaces.get(actor, workspaceId);
      return deps.auditRepo.list({
        workspaceId,
        limit: query.limit,
        after: query.after,
        action: query.action,
        resourceType: query.resourceType,
        resourceId: query.resourceId,
        actorKeyId: query.actorKeyId,
        actorEmail: query.actorEmail,
        since: query.since,
        until: query.until,
      });
    },
  };
}

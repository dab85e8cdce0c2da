/** Reading the audit trail: a workspace's entries, for whoever may see the workspace. */
import type { Actor } from '../actor.js';
import type { Page, PageRequest } from '../pagination.js';
import type { WorkspaceService } from '../workspaces/workspace-service.js';
import type { AuditRepo, AuditRow } from './audit-repo.js';

export interface AuditQuery extends PageRequest {
  action?: string | undefined;
  resourceType?: string | undefined;
  resourceId?: string | undefined;
  actorKeyId?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
}

export function createAuditQueryService(deps: { auditRepo: AuditRepo; workspaces: WorkspaceService }) {
  return {
    async list(actor: Actor, workspaceId: string, query: AuditQuery): Promise<Page<AuditRow>> {
      // Archived workspaces stay readable; another tenant's answers 404.
      await deps.workspaces.get(actor, workspaceId);
      return deps.auditRepo.list({
        workspaceId,
        limit: query.limit,
        cursor: query.cursor,
        action: query.action,
        resourceType: query.resourceType,
        resourceId: query.resourceId,
        actorKeyId: query.actorKeyId,
        since: query.since ? new Date(query.since) : undefined,
        until: query.until ? new Date(query.until) : undefined,
      });
    },
  };
}

export type AuditQueryService = ReturnType<typeof createAuditQueryService>;

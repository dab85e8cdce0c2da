import type { AuditLogDto } from '../../../generated/client/types.gen.js';
import type { ListedAuditRow } from '../../domain/audit/audit-repo.js';

export function toAuditLogDto(row: ListedAuditRow): AuditLogDto {
  return {
    id: row.id,
    // Listed per workspace, so never null here.
    workspaceId: row.workspace_id!,
    actorKeyId: row.actor_key_id,
    actorName: row.actor_name,
    actorEmail: row.actor_email,
    actorSubject: row.actor_subject,
    actorRole: row.actor_role,
    action: row.action,
    resourceType: row.resource_type,
    resourceId: row.resource_id,
    requestId: row.request_id,
    clientAddress: row.client_address,
    changes: row.changes,
    createdAt: row.created_at.toISOString(),
  };
}

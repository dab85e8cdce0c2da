import type { WorkspaceDto } from '../../../generated/client/types.gen.js';
import type { WorkspaceRow } from '../../domain/workspaces/workspace-repo.js';

export function toWorkspaceDto(row: WorkspaceRow): WorkspaceDto {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    metadata: row.metadata,
    allowUnmeteredPassthrough: row.allow_unmetered_passthrough,
    passthroughClasses: row.passthrough_classes,
    requestLog: row.request_log,
    currency: row.currency,
    timeZone: row.time_zone,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    ...(row.archived_at ? { archivedAt: row.archived_at.toISOString() } : {}),
  };
}

import type { Queryable } from '../../db/database.js';
import { paginate, whereInRange, type Page, type PageRequest, type TimeRange } from '../pagination.js';

export interface AuditRow {
  id: string;
  workspace_id: string | null;
  actor_key_id: string;
  action: string;
  resource_type: string;
  resource_id: string;
  request_id: string | null;
  client_address: string | null;
  changes: Record<string, unknown>;
  created_at: Date;
}

/** `since`/`until` bound the entry's time. */
export interface AuditFilter extends PageRequest, TimeRange {
  workspaceId: string;
  action?: string | undefined;
  resourceType?: string | undefined;
  resourceId?: string | undefined;
  actorKeyId?: string | undefined;
}

export function createAuditRepo(db: Queryable) {
  return {
    async insert(row: AuditRow, q: Queryable = db): Promise<void> {
      await q('audit_logs').insert({ ...row, changes: JSON.stringify(row.changes) });
    },

    /** Newest first (uuid v7 order), over the (workspace_id, id) index. */
    async list(filter: AuditFilter, q: Queryable = db): Promise<Page<AuditRow>> {
      const query = q('audit_logs').select('*').where({ workspace_id: filter.workspaceId });
      if (filter.action) query.where({ action: filter.action });
      if (filter.resourceType) query.where({ resource_type: filter.resourceType });
      if (filter.resourceId) query.where({ resource_id: filter.resourceId });
      if (filter.actorKeyId) query.where({ actor_key_id: filter.actorKeyId });
      whereInRange(query, 'created_at', filter);
      return paginate<AuditRow>(query, filter);
    },
  };
}

export type AuditRepo = ReturnType<typeof createAuditRepo>;

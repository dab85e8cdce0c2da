import type { Queryable } from '../../db/database.js';

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

export function createAuditRepo(db: Queryable) {
  return {
    async insert(row: AuditRow, q: Queryable = db): Promise<void> {
      await q('audit_logs').insert({ ...row, changes: JSON.stringify(row.changes) });
    },
  };
}

export type AuditRepo = ReturnType<typeof createAuditRepo>;

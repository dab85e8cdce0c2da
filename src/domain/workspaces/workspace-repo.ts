import type { Queryable } from '../../db/database.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';

export interface WorkspaceRow {
  id: string;
  name: string;
  status: 'ACTIVE' | 'ARCHIVED';
  metadata: Record<string, unknown>;
  allow_unmetered_passthrough: boolean;
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
}

export interface WorkspaceFilter extends PageRequest {
  status?: 'ACTIVE' | 'ARCHIVED' | undefined;
  /** null: every workspace; otherwise only these. */
  ids: ReadonlySet<string> | null;
}

export function createWorkspaceRepo(db: Queryable) {
  return {
    async insert(row: WorkspaceRow, q: Queryable = db): Promise<WorkspaceRow> {
      const [created] = await q('workspaces')
        .insert({ ...row, metadata: JSON.stringify(row.metadata) })
        .returning('*');
      return created as WorkspaceRow;
    },

    async findById(id: string, q: Queryable = db): Promise<WorkspaceRow | undefined> {
      return q('workspaces').where({ id }).first();
    },

    /** Locks the row for the rest of the transaction (archive vs. change races). */
    async findByIdForUpdate(id: string, q: Queryable): Promise<WorkspaceRow | undefined> {
      return q('workspaces').where({ id }).forUpdate().first();
    },

    /** Shares the row lock: many writers under one workspace, none racing its archive. */
    async findByIdForShare(id: string, q: Queryable): Promise<WorkspaceRow | undefined> {
      return q('workspaces').where({ id }).forShare().first();
    },

    async update(id: string, patch: Partial<WorkspaceRow>, q: Queryable = db): Promise<WorkspaceRow> {
      const values = { ...patch, ...(patch.metadata ? { metadata: JSON.stringify(patch.metadata) } : {}) };
      const [updated] = await q('workspaces').where({ id }).update(values).returning('*');
      return updated as WorkspaceRow;
    },

    async list(filter: WorkspaceFilter, q: Queryable = db): Promise<Page<WorkspaceRow>> {
      const query = q('workspaces').select('*');
      if (filter.status) query.where({ status: filter.status });
      if (filter.ids) query.whereIn('id', [...filter.ids]);
      return paginate<WorkspaceRow>(query, filter);
    },
  };
}

export type WorkspaceRepo = ReturnType<typeof createWorkspaceRepo>;

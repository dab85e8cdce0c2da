import type { Queryable } from '../../db/database.js';
import { table } from '../../db/table.js';
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
  const workspaces = table<WorkspaceRow>(db, 'workspaces', { json: ['metadata'] });
  return {
    insert: workspaces.insert,
    findById: workspaces.findById,
    /** Locks the row for the rest of the transaction (archive vs. change races). */
    findByIdForUpdate: workspaces.findByIdForUpdate,

    /** Shares the row lock: many writers under one workspace, none racing its archive. */
    async findByIdForShare(id: string, tx: Queryable): Promise<WorkspaceRow | undefined> {
      return tx('workspaces').where({ id }).forShare().first();
    },

    update: workspaces.updateById,

    async list(filter: WorkspaceFilter, q: Queryable = db): Promise<Page<WorkspaceRow>> {
      const query = q('workspaces').select('*');
      if (filter.status) query.where({ status: filter.status });
      if (filter.ids) query.whereIn('id', [...filter.ids]);
      return paginate<WorkspaceRow>(query, filter);
    },
  };
}

export type WorkspaceRepo = ReturnType<typeof createWorkspaceRepo>;

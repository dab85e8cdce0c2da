import type { Queryable } from '../../db/database.js';
import { table } from '../../db/table.js';
import type { PassthroughClass } from '../../protocols/passthrough.js';
import type { RequestLogPolicy } from './request-log-policy.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';

export interface WorkspaceRow {
  id: string;
  name: string;
  status: 'ACTIVE' | 'ARCHIVED';
  metadata: Record<string, unknown>;
  /** Deprecated: lets every passthrough class through. */
  allow_unmetered_passthrough: boolean;
  /** The classes of unmetered paths it lets through, in the contract's order (passthrough-classes.ts). */
  passthrough_classes: PassthroughClass[];
  /** Whether its gateway calls keep their request and answer (request-log-policy.ts); null: none set. */
  request_log: RequestLogPolicy | null;
  /** ISO 4217: the currency of its prices, costs and budget. */
  currency: string;
  /** An IANA name: whose days and months its budget counts (time-zone.ts). */
  time_zone: string;
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
  const workspaces = table<WorkspaceRow>(db, 'workspaces', { json: ['metadata', 'passthrough_classes', 'request_log'] });
  return {
    insert: workspaces.insert,
    findById: workspaces.findById,
    /** Locks the row for the rest of the transaction (archive vs. change races). */
    findByIdForUpdate: workspaces.findByIdForUpdate,

    /** Whether the workspace's price book holds any price (its currency is then fixed). */
    async hasPrices(id: string, tx: Queryable): Promise<boolean> {
      return (await tx('model_prices').where({ workspace_id: id }).first('id')) !== undefined;
    },

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

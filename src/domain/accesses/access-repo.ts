/** All SQL of workspace_users and workspace_accesses. */
import type { Knex } from 'knex';
import type { Queryable } from '../../db/database.js';
import { table } from '../../db/table.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';
import type { AccessRow, AccessStatus, AccessView, WorkspaceUserRow } from './access-types.js';

function viewQuery(q: Queryable): Knex.QueryBuilder {
  return q('workspace_accesses as a')
    .join('workspace_users as u', 'u.id', 'a.user_id')
    .select('a.*', 'u.external_user_id', 'u.email', 'u.name as user_name', 'u.created_at as user_created_at');
}

export interface AccessFilter extends PageRequest {
  workspaceId: string;
  status?: AccessStatus | undefined;
  planId?: string | undefined;
  externalUserId?: string | undefined;
  email?: string | undefined;
  /** newest (the default), or usage: the most units used in the period running at `at` first. */
  sort?: 'newest' | 'usage' | undefined;
  at?: Date | undefined;
}

/**
 * The list ranked by the units used (consumed and held) in the period running at `filter.at`, then newest first.
 * A page resumes after the last access seen, at the use it has now (keyset on (used, id)).
 */
async function byUsage(q: Queryable, query: Knex.QueryBuilder, filter: AccessFilter): Promise<Page<AccessView>> {
  const at = filter.at ?? new Date();
  const usedSql = `coalesce((select p.consumed_units + p.reserved_units from quota_periods p
    where p.workspace_access_id = a.id and p.period_start <= ? and p.period_end > ? order by p.period_start desc limit 1), 0)`;
  const ranked = q.from(
    query
      .clone()
      .select(q.raw(`${usedSql} as period_used`, [at, at]))
      .as('v'),
  );
  const limit = filter.limit ?? 20;
  if (filter.after) {
    const last = q.raw(`(select ${usedSql.replaceAll('a.id', 'x.id')} from workspace_accesses x where x.id = ?)`, [at, at, filter.after]);
    ranked.whereRaw('(v.period_used, v.id) < (?, ?)', [last, filter.after]);
  }
  const rows = (await ranked
    .orderBy([
      { column: 'v.period_used', order: 'desc' },
      { column: 'v.id', order: 'desc' },
    ])
    .limit(limit + 1)) as AccessView[];
  const items = rows.slice(0, limit);
  return { items, nextAfter: rows.length > limit ? items[items.length - 1]!.id : null };
}

export function createAccessRepo(db: Queryable) {
  const accesses = table<AccessRow>(db, 'workspace_accesses', { json: ['metadata'] });
  return {
    /** Inserts the user unless (workspace, externalUserId) exists; undefined when it did. */
    async insertUserIfAbsent(row: WorkspaceUserRow, q: Queryable = db): Promise<WorkspaceUserRow | undefined> {
      const rows = (await q('workspace_users')
        .insert({ ...row, metadata: JSON.stringify(row.metadata) })
        .onConflict(['workspace_id', 'external_user_id'])
        .ignore()
        .returning('*')) as WorkspaceUserRow[];
      return rows[0];
    },

    async findUserByExternalId(workspaceId: string, externalUserId: string, q: Queryable = db): Promise<WorkspaceUserRow | undefined> {
      return q('workspace_users').where({ workspace_id: workspaceId, external_user_id: externalUserId }).first();
    },

    insertAccess: accesses.insert,

    async findView(id: string, q: Queryable = db): Promise<AccessView | undefined> {
      return viewQuery(q).where('a.id', id).first();
    },

    async findViewByUser(userId: string, q: Queryable = db): Promise<AccessView | undefined> {
      return viewQuery(q).where('a.user_id', userId).first();
    },

    /** Locks the access row: every change of one access is serialised on it. */
    lock: accesses.findByIdForUpdate,
    update: accesses.updateById,

    async list(filter: AccessFilter, q: Queryable = db): Promise<Page<AccessView>> {
      const query = viewQuery(q).where('a.workspace_id', filter.workspaceId);
      if (filter.status) query.where('a.status', filter.status);
      if (filter.planId) query.where('a.plan_id', filter.planId);
      if (filter.externalUserId) query.where('u.external_user_id', filter.externalUserId);
      if (filter.email) query.whereRaw('lower(u.email) = lower(?)', [filter.email]);
      if (filter.sort === 'usage') return byUsage(q, query, filter);
      return paginate<AccessView>(query, filter, 'a.id');
    },

    /**
     * Accesses of a workspace (or all) that are due to expire at `now`: their
     * accessEndsAt passed, or their last period ended. Locked, skipping busy rows.
     */
    async dueForExpiry(now: Date, workspaceId: string | undefined, q: Queryable): Promise<AccessRow[]> {
      const query = q('workspace_accesses as a')
        .select('a.*')
        .whereIn('a.status', ['PENDING', 'ACTIVE', 'SUSPENDED'])
        .where(
          (w) =>
            void w
              .where('a.access_ends_at', '<=', now)
              .orWhere(
                (w2) =>
                  void w2
                    .whereNot('a.status', 'PENDING')
                    .whereRaw('(select max(p.period_end) from quota_periods p where p.workspace_access_id = a.id) <= ?', [now]),
              ),
        )
        .forUpdate()
        .skipLocked();
      if (workspaceId) query.where('a.workspace_id', workspaceId);
      return query;
    },
  };
}

export type AccessRepo = ReturnType<typeof createAccessRepo>;

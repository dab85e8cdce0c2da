import type { Queryable } from '../../db/database.js';
import { bindDeps } from '../bind.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';

interface ManagementKeyRow {
  id: string;
  name: string;
  key_hash: string;
  prefix: string;
  is_root: boolean;
  /** Checked against the role table on every operation: `owner` (a root key) or a workspace role; null: none. */
  role: string | null;
  created_at: Date;
  revoked_at: Date | null;
}

async function insert(db: Queryable, row: ManagementKeyRow, workspaceIds: string[], q: Queryable = db): Promise<void> {
  await q('management_keys').insert(row);
  if (workspaceIds.length) {
    await q('management_key_workspaces').insert(workspaceIds.map((workspace_id) => ({ management_key_id: row.id, workspace_id })));
  }
}

/** The active key with this hash and the workspaces it may see, in one query. */
async function findActiveByHash(
  db: Queryable,
  keyHash: string,
  q: Queryable = db,
): Promise<(ManagementKeyRow & { workspace_ids: string[] }) | undefined> {
  return q('management_keys as k')
    .leftJoin('management_key_workspaces as w', 'w.management_key_id', 'k.id')
    .where('k.key_hash', keyHash)
    .whereNull('k.revoked_at')
    .groupBy('k.id')
    .select('k.*', q.raw('coalesce(array_agg(w.workspace_id) filter (where w.workspace_id is not null), array[]::uuid[]) as workspace_ids'))
    .first();
}

/** Until the transaction ends, no other may insert a key: of processes starting at once, one creates the root key. */
async function lockAgainstInserts(_db: Queryable, tx: Queryable): Promise<void> {
  await tx.raw('lock table management_keys in exclusive mode');
}

async function hasRoot(db: Queryable, q: Queryable = db): Promise<boolean> {
  return Boolean(await q('management_keys').where({ is_root: true }).whereNull('revoked_at').first('id'));
}

export type ScopedKeyRow = ManagementKeyRow & { workspace_ids: string[] };

/** Every key with the workspaces it sees (none: a root key). */
function withScope(q: Queryable) {
  return q('management_keys as k')
    .leftJoin('management_key_workspaces as w', 'w.management_key_id', 'k.id')
    .groupBy('k.id')
    .select(
      'k.*',
      q.raw(
        'coalesce(array_agg(w.workspace_id order by w.workspace_id) filter (where w.workspace_id is not null), array[]::uuid[]) as workspace_ids',
      ),
    );
}

async function list(db: Queryable, q: Queryable = db): Promise<ScopedKeyRow[]> {
  return withScope(q).orderBy('k.id');
}

/** Newest first (uuid v7 order). */
async function listPage(db: Queryable, page: PageRequest, q: Queryable = db): Promise<Page<ScopedKeyRow>> {
  return paginate<ScopedKeyRow>(withScope(q), page, 'k.id');
}

async function findById(db: Queryable, id: string, q: Queryable = db): Promise<ScopedKeyRow | undefined> {
  return withScope(q).where('k.id', id).first();
}

async function rename(db: Queryable, id: string, name: string, q: Queryable = db): Promise<boolean> {
  return (await q('management_keys').where({ id }).update({ name })) > 0;
}

async function countActiveRoots(db: Queryable, q: Queryable = db): Promise<number> {
  const row = (await q('management_keys').where({ is_root: true }).whereNull('revoked_at').count('* as n').first()) as {
    n: string | number;
  };
  return Number(row.n);
}

async function revoke(db: Queryable, id: string, at: Date, q: Queryable = db): Promise<boolean> {
  return (await q('management_keys').where({ id }).whereNull('revoked_at').update({ revoked_at: at })) > 0;
}

export const createManagementKeyRepo = (db: Queryable) =>
  bindDeps(db, {
    insert,
    findActiveByHash,
    lockAgainstInserts,
    hasRoot,
    list,
    listPage,
    findById,
    rename,
    countActiveRoots,
    revoke,
  });

export type ManagementKeyRepo = ReturnType<typeof createManagementKeyRepo>;

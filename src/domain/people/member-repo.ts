/** The SQL of members. */
import type { Queryable } from '../../db/database.js';
import { isUniqueViolation, AppError } from '../../errors.js';
import { bindDeps } from '../bind.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';

export interface MemberRow {
  id: string;
  email: string;
  workspace_id: string | null;
  role: string;
  created_at: Date;
}

/** Every membership of this email: the installation's (owner) and each workspace's. */
async function membershipsOf(db: Queryable, email: string, q: Queryable = db): Promise<MemberRow[]> {
  return q('members').where({ email });
}

async function insert(db: Queryable, row: MemberRow, q: Queryable = db): Promise<void> {
  try {
    await q('members').insert(row);
  } catch (err) {
    if (isUniqueViolation(err)) throw new AppError('conflict', `${row.email} is a member already`, { param: 'email' });
    throw err;
  }
}

/** The membership inserted unless the email has one there already; whether it was. */
async function insertIfAbsent(db: Queryable, row: MemberRow, q: Queryable = db): Promise<boolean> {
  const inserted = await q('members').insert(row).onConflict().ignore().returning('id');
  return inserted.length === 1;
}

async function listOfWorkspace(db: Queryable, workspaceId: string, page: PageRequest, q: Queryable = db): Promise<Page<MemberRow>> {
  return paginate<MemberRow>(q('members').where({ workspace_id: workspaceId }).select('*'), page);
}

/** The installation's owners (memberships with no workspace), oldest first; `forUpdate`: locked until the transaction ends. */
async function owners(db: Queryable, q: Queryable = db, forUpdate = false): Promise<MemberRow[]> {
  const query = q('members').whereNull('workspace_id').where({ role: 'owner' }).orderBy('id');
  return forUpdate ? query.forUpdate() : query;
}

async function find(db: Queryable, id: string, q: Queryable = db): Promise<MemberRow | undefined> {
  return q('members').where({ id }).first<MemberRow | undefined>();
}

async function remove(db: Queryable, id: string, q: Queryable = db): Promise<boolean> {
  return (await q('members').where({ id }).delete()) === 1;
}

export function createMemberRepo(db: Queryable) {
  return bindDeps(db, { membershipsOf, insert, insertIfAbsent, listOfWorkspace, owners, find, remove });
}

export type MemberRepo = ReturnType<typeof createMemberRepo>;

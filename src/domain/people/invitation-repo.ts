/** The SQL of invitations. */
import type { Queryable } from '../../db/database.js';
import { bindDeps } from '../bind.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';

export interface InvitationRow {
  id: string;
  token_hash: string;
  email: string;
  workspace_id: string;
  role: string;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  revoked_at: Date | null;
}

async function insert(db: Queryable, row: InvitationRow, q: Queryable = db): Promise<void> {
  await q('invitations').insert(row);
}

/** The workspace's invitations neither accepted nor revoked (expired ones included: they say so), newest first. */
async function listPending(db: Queryable, workspaceId: string, page: PageRequest, q: Queryable = db): Promise<Page<InvitationRow>> {
  const query = q('invitations').where({ workspace_id: workspaceId }).whereNull('accepted_at').whereNull('revoked_at').select('*');
  return paginate<InvitationRow>(query, page);
}

async function find(db: Queryable, id: string, q: Queryable = db): Promise<InvitationRow | undefined> {
  return q('invitations').where({ id }).first<InvitationRow | undefined>();
}

async function findByTokenHash(db: Queryable, tokenHash: string, q: Queryable = db): Promise<InvitationRow | undefined> {
  return q('invitations').where({ token_hash: tokenHash }).forUpdate().first<InvitationRow | undefined>();
}

async function markAccepted(db: Queryable, id: string, at: Date, q: Queryable = db): Promise<void> {
  await q('invitations').where({ id }).update({ accepted_at: at });
}

async function revoke(db: Queryable, id: string, at: Date, q: Queryable = db): Promise<boolean> {
  return (await q('invitations').where({ id }).whereNull('accepted_at').whereNull('revoked_at').update({ revoked_at: at })) === 1;
}

export function createInvitationRepo(db: Queryable) {
  return bindDeps(db, { insert, listPending, find, findByTokenHash, markAccepted, revoke });
}

export type InvitationRepo = ReturnType<typeof createInvitationRepo>;

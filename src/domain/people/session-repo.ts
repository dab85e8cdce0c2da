/** The SQL of persons and their sessions. */
import type { Queryable } from '../../db/database.js';
import { bindDeps } from '../bind.js';
import { paginate, type Page, type PageRequest } from '../pagination.js';

interface PersonRow {
  id: string;
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
  created_at: Date;
  last_sign_in_at: Date;
}

interface SessionRow {
  id: string;
  token_hash: string;
  person_id: string;
  provider: string | null;
  is_owner: boolean;
  created_at: Date;
  last_seen_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  id_token_ciphertext: string | null;
  id_token_key_id: string | null;
}

/** A session with the person it is of. */
export type SessionWithPerson = SessionRow & { email: string | null; name: string | null; subject: string; issuer: string };

/** The person of this issuer and subject, made or updated (email and name as the provider says them now). */
async function upsertPerson(db: Queryable, person: PersonRow, q: Queryable = db): Promise<PersonRow> {
  const [row] = await q('persons')
    .insert(person)
    .onConflict(['issuer', 'subject'])
    .merge(['email', 'name', 'last_sign_in_at'])
    .returning<PersonRow[]>('*');
  return row!;
}

async function insertSession(db: Queryable, row: SessionRow, q: Queryable = db): Promise<void> {
  await q('sessions').insert(row);
}

/** The unrevoked session with this token hash, and its person. Expiry is the caller's to judge. */
async function findByTokenHash(db: Queryable, tokenHash: string, q: Queryable = db): Promise<SessionWithPerson | undefined> {
  return q('sessions as s')
    .join('persons as p', 'p.id', 's.person_id')
    .where('s.token_hash', tokenHash)
    .whereNull('s.revoked_at')
    .first<SessionWithPerson | undefined>('s.*', 'p.email', 'p.name', 'p.subject', 'p.issuer');
}

/** Marks the session used at `at`, unless a later use already did. */
async function touch(db: Queryable, id: string, at: Date, q: Queryable = db): Promise<void> {
  await q('sessions').where({ id }).where('last_seen_at', '<', at).update({ last_seen_at: at });
}

/** Revokes the session if it is not already; whether it was live. */
async function revoke(db: Queryable, id: string, at: Date, q: Queryable = db): Promise<SessionRow | undefined> {
  const [row] = await q('sessions').where({ id }).whereNull('revoked_at').update({ revoked_at: at }).returning<SessionRow[]>('*');
  return row;
}

/** The sessions that have not ended (not revoked, not past `now`, used since `idleSince`), newest first, with their persons. */
async function listLive(
  db: Queryable,
  live: { now: Date; idleSince: Date },
  page: PageRequest,
  q: Queryable = db,
): Promise<Page<SessionWithPerson>> {
  const query = q('sessions as s')
    .join('persons as p', 'p.id', 's.person_id')
    .whereNull('s.revoked_at')
    .where('s.expires_at', '>', live.now)
    .where('s.last_seen_at', '>', live.idleSince)
    .select('s.*', 'p.email', 'p.name', 'p.subject', 'p.issuer');
  return paginate<SessionWithPerson>(query, page, 's.id');
}

export function createSessionRepo(db: Queryable) {
  return bindDeps(db, { upsertPerson, insertSession, findByTokenHash, touch, revoke, listLive });
}

export type SessionRepo = ReturnType<typeof createSessionRepo>;

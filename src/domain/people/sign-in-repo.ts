/** The SQL of sign-ins under way (an OpenID Connect round trip) and of login links. */
import type { Queryable } from '../../db/database.js';
import { bindDeps } from '../bind.js';

interface SignInAttemptRow {
  id: string;
  provider: string;
  state: string;
  nonce: string;
  code_verifier_ciphertext: string;
  code_verifier_key_id: string;
  expires_at: Date;
}

async function insertAttempt(db: Queryable, row: SignInAttemptRow, q: Queryable = db): Promise<void> {
  await q('sign_in_attempts').insert(row);
}

/** The attempt with this id, deleted as it is read (used once); the expired ones go with it. */
async function takeAttempt(db: Queryable, id: string, now: Date, q: Queryable = db): Promise<SignInAttemptRow | undefined> {
  await q('sign_in_attempts').where('expires_at', '<=', now).delete();
  const [row] = await q('sign_in_attempts').where({ id }).delete().returning<SignInAttemptRow[]>('*');
  return row;
}

async function insertLink(db: Queryable, row: { id: string; token_hash: string; created_at: Date; expires_at: Date }, q: Queryable = db) {
  await q('login_links').insert({ ...row, used_at: null });
}

/** Marks the unused, unexpired link with this hash used; whether there was one. */
async function useLink(db: Queryable, tokenHash: string, now: Date, q: Queryable = db): Promise<boolean> {
  const used = await q('login_links')
    .where({ token_hash: tokenHash })
    .whereNull('used_at')
    .where('expires_at', '>', now)
    .update({ used_at: now });
  return used === 1;
}

export function createSignInRepo(db: Queryable) {
  return bindDeps(db, { insertAttempt, takeAttempt, insertLink, useLink });
}

export type SignInRepo = ReturnType<typeof createSignInRepo>;

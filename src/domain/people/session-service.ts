/**
 * People's sessions (docs/people.md): a random token in the browser's cookie, its keyed hash in the `sessions`
 * table. Every request reads the row (no cache), so a session revoked or expired is refused on its next request
 * on every process. A session ends when unused for the idle time, at its absolute end whatever its use, when its
 * person signs out, or when an owner revokes it. Its CSRF token is derived from its token under its own label:
 * nothing more to store, and knowing it tells nothing of the token.
 */
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { isUuid, newId } from '../../ids.js';
import { requireRoot, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import type { Page, PageRequest } from '../pagination.js';
import { constantTimeEqual, generateToken, type KeyHasher } from '../security/key-hash.js';
import type { SecretBox } from '../security/secret-box.js';
import type { SessionRepo, SessionWithPerson } from './session-repo.js';

export interface SessionDeps {
  db: Db;
  sessionRepo: SessionRepo;
  /** The keyed hash the token is stored as (the keys' own). */
  hasher: KeyHasher;
  /** The keyed hash, under another label, that is the session's CSRF token. */
  csrfHasher: KeyHasher;
  secretBox: SecretBox;
  audit: AuditService;
  clock: Clock;
  idleMs: number;
  maxMs: number;
}

/** Whom a provider (or a login link) vouched for. */
export interface PersonClaims {
  issuer: string;
  subject: string;
  email: string | null;
  name: string | null;
}

export interface StartedSession {
  /** The cookie's value: shown to the browser once, stored only as its hash. */
  token: string;
  sessionId: string;
  expiresAt: Date;
}

const sealedFor = (sessionId: string) => `session:${sessionId}`;

/** A session for the person (made or updated from the claims); `idToken` kept sealed for the provider's sign-out. */
async function start(
  deps: SessionDeps,
  input: { person: PersonClaims; provider: string | null; isOwner: boolean; idToken?: string | undefined },
): Promise<StartedSession> {
  const { db, sessionRepo, hasher, secretBox, clock, maxMs } = deps;
  const now = clock.now();
  const token = generateToken('');
  const sessionId = newId();
  const expiresAt = new Date(now.getTime() + maxMs);
  const sealed = input.idToken ? secretBox.seal(input.idToken, sealedFor(sessionId)) : undefined;
  await db.transaction(async (tx) => {
    const person = await sessionRepo.upsertPerson({ id: newId(), ...input.person, created_at: now, last_sign_in_at: now }, tx);
    await sessionRepo.insertSession(
      {
        id: sessionId,
        token_hash: hasher.hash(token),
        person_id: person.id,
        provider: input.provider,
        is_owner: input.isOwner,
        created_at: now,
        last_seen_at: now,
        expires_at: expiresAt,
        revoked_at: null,
        id_token_ciphertext: sealed?.ciphertext ?? null,
        id_token_key_id: sealed?.keyId ?? null,
      },
      tx,
    );
  });
  return { token, sessionId, expiresAt };
}

/** When a session unused since `lastSeen` ends for idleness. */
function idleEnd(deps: SessionDeps, lastSeen: Date): Date {
  return new Date(lastSeen.getTime() + deps.idleMs);
}

/**
 * The live session of a cookie's token, marked used now (at most once a minute, or a tenth of the idle time: a
 * write per request would cost more than the precision is worth); 401 when there is none.
 */
async function authenticate(deps: SessionDeps, token: string): Promise<SessionWithPerson> {
  const { sessionRepo, hasher, clock } = deps;
  const session = await sessionRepo.findByTokenHash(hasher.hash(token));
  if (!session) throw new AppError('invalid_session', 'The session is not valid (it was revoked or ended): sign in again');
  const now = clock.now();
  if (session.expires_at <= now || idleEnd(deps, session.last_seen_at) <= now) {
    throw new AppError('session_expired', 'The session has expired: sign in again');
  }
  if (now.getTime() - session.last_seen_at.getTime() >= Math.min(60_000, deps.idleMs / 10)) {
    await sessionRepo.touch(session.id, now);
    session.last_seen_at = now;
  }
  return session;
}

/** What the console needs of its session: who, until when, and the token to send with each change. */
function describe(deps: SessionDeps, token: string, session: SessionWithPerson) {
  const idle = idleEnd(deps, session.last_seen_at);
  return {
    sessionId: session.id,
    person: { email: session.email, name: session.name, subject: session.subject, issuer: session.issuer },
    owner: session.is_owner,
    provider: session.provider,
    csrfToken: csrfToken(deps, token),
    expiresAt: (idle < session.expires_at ? idle : session.expires_at).toISOString(),
  };
}

function csrfToken(deps: SessionDeps, token: string): string {
  return deps.csrfHasher.hash(token);
}

/** A state-changing request made with a session carries its CSRF token (X-CSRF-Token), or is refused 403. */
function checkCsrf(deps: SessionDeps, token: string, sent: string | undefined): void {
  if (!sent || !constantTimeEqual(sent, csrfToken(deps, token))) {
    throw new AppError('csrf_token_invalid', 'A change made with a session needs its CSRF token in the X-CSRF-Token header');
  }
}

/** Signs out: the session of this token revoked; its provider and ID token, for the provider's own sign-out. */
async function end(deps: SessionDeps, token: string): Promise<{ provider: string | null; idToken: string | undefined } | undefined> {
  const { sessionRepo, hasher, secretBox, clock } = deps;
  const session = await sessionRepo.findByTokenHash(hasher.hash(token));
  if (!session) return undefined;
  const revoked = await sessionRepo.revoke(session.id, clock.now());
  if (!revoked) return undefined;
  const idToken =
    revoked.id_token_ciphertext && revoked.id_token_key_id
      ? secretBox.open({ ciphertext: revoked.id_token_ciphertext, keyId: revoked.id_token_key_id }, sealedFor(revoked.id))
      : undefined;
  return { provider: revoked.provider, idToken };
}

/** The sessions that have not ended, newest first (owners only). */
async function list(deps: SessionDeps, actor: Actor, page: PageRequest): Promise<Page<SessionWithPerson>> {
  requireRoot(actor);
  const now = deps.clock.now();
  return deps.sessionRepo.listLive({ now, idleSince: new Date(now.getTime() - deps.idleMs) }, page);
}

/** Ends a session now (owners only); audited. */
async function revoke(deps: SessionDeps, actor: Actor, sessionId: string): Promise<void> {
  requireRoot(actor);
  if (!isUuid(sessionId)) throw new AppError('session_not_found', 'Session not found');
  await deps.db.transaction(async (tx) => {
    const revoked = await deps.sessionRepo.revoke(sessionId, deps.clock.now(), tx);
    if (!revoked) throw new AppError('session_not_found', 'Session not found');
    await deps.audit.record(actor, { action: 'session.revoked', resourceType: 'session', resourceId: sessionId, workspaceId: null }, tx);
  });
}

export function createSessionService(deps: SessionDeps) {
  return bindDeps(deps, { start, authenticate, describe, checkCsrf, end, list, revoke });
}

export type SessionService = ReturnType<typeof createSessionService>;

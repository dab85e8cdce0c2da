/**
 * Who may sign in, and the session they get (docs/people.md). A person a provider vouches for signs in when their
 * verified email is an owner's (NEXUS_OWNER_EMAILS, or an owner's membership) or a workspace member's; anyone else
 * is refused 403 `not_a_member`. With no
 * provider configured, `nexus login-link` prints a link, usable once within its minutes, that signs its bearer in
 * as the installation's owner: the way in that replaces pasting the root key.
 */
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { systemActor, type Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import { generateToken, type KeyHasher } from '../security/key-hash.js';
import type { InvitationService } from './invitation-service.js';
import type { MemberService } from './member-service.js';
import type { OidcSignIn } from './oidc-sign-in.js';
import type { SessionService, StartedSession } from './session-service.js';
import type { SignInRepo } from './sign-in-repo.js';

/** The issuer of the person a login link signs in: the installation's own owner, not any provider's. */
const LOGIN_LINK_ISSUER = 'nexus:login-link';
const LOGIN_LINK_PREFIX = 'nx-link-';

interface PeopleSignInDeps {
  oidc: OidcSignIn;
  sessions: SessionService;
  members: MemberService;
  invitations: InvitationService;
  signInRepo: SignInRepo;
  hasher: KeyHasher;
  clock: Clock;
  ownerEmails: readonly string[];
  loginLinkMs: number;
}

/** The provider's callback: the person checked against the owners, then their session begun. */
async function signInWithProvider(
  deps: PeopleSignInDeps,
  providerId: string,
  input: Parameters<OidcSignIn['finish']>[1] & { invitationToken?: string | undefined },
): Promise<StartedSession> {
  const { person, idToken, groups } = await deps.oidc.finish(providerId, input);
  // An invitation opened in this browser is accepted by the person signing in with its email.
  if (input.invitationToken) await deps.invitations.accept(input.invitationToken, person.email);
  if (person.email) await provisionByRules(deps, providerId, person.email, groups);
  const memberships = await deps.members.membershipsOf(person.email);
  const isOwner = memberships.owner || (person.email !== null && deps.ownerEmails.includes(person.email));
  if (!isOwner && memberships.roles.size === 0) {
    const who = person.email ?? 'this account (its provider vouched for no email)';
    throw new AppError('not_a_member', `${who} is not a member of this Nexus: ask an owner to add you`);
  }
  return deps.sessions.start({ person, provider: providerId, isOwner, idToken });
}

/** The memberships the provider's rules give this person (by a group of theirs, or their email's domain). */
async function provisionByRules(deps: PeopleSignInDeps, providerId: string, email: string, groups: readonly string[]): Promise<void> {
  const domain = email.slice(email.lastIndexOf('@') + 1);
  const grants = deps.oidc
    .roleMappingsOf(providerId)
    .filter(
      (m) => (m.group !== undefined && groups.includes(m.group)) || (m.emailDomain !== undefined && m.emailDomain.toLowerCase() === domain),
    )
    .map((m) => ({ workspaceId: m.workspaceId?.toLowerCase() ?? null, role: m.role }));
  if (grants.length) await deps.members.provision(systemActor(`sign-in:${providerId}`), email, grants);
}

/** A one-time link's token (to print once; only its hash is kept) and when it expires. */
async function createLoginLink(deps: PeopleSignInDeps): Promise<{ token: string; expiresAt: Date }> {
  const now = deps.clock.now();
  const token = generateToken(LOGIN_LINK_PREFIX);
  const expiresAt = new Date(now.getTime() + deps.loginLinkMs);
  await deps.signInRepo.insertLink({ id: newId(), token_hash: deps.hasher.hash(token), created_at: now, expires_at: expiresAt });
  return { token, expiresAt };
}

/** The link used (once, before it expires): a session as the installation's owner. */
async function redeemLoginLink(deps: PeopleSignInDeps, token: string): Promise<StartedSession> {
  const used = token.startsWith(LOGIN_LINK_PREFIX) && (await deps.signInRepo.useLink(deps.hasher.hash(token), deps.clock.now()));
  if (!used)
    throw new AppError('login_link_invalid', 'This sign-in link is not valid: it expired or was used. Run `nexus login-link` for another');
  return deps.sessions.start({
    person: { issuer: LOGIN_LINK_ISSUER, subject: 'owner', email: null, name: 'Owner (sign-in link)' },
    provider: null,
    isOwner: true,
  });
}

export function createPeopleSignIn(deps: PeopleSignInDeps) {
  return bindDeps(deps, { signInWithProvider, createLoginLink, redeemLoginLink });
}

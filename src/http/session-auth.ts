/**
 * Who calls the Admin API: a Management Key (Authorization: Bearer), or a person's session (its cookie). A key
 * wins when both come. A session's request that changes state (any method but GET and HEAD) must carry the
 * session's CSRF token in X-CSRF-Token: a page of another site can make the browser send the cookie (SameSite=Lax
 * stops most such requests; the token stops the rest), never read the token. Requests made with a key need none.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config.js';
import type { ManagementKeyService, Principal } from '../domain/management-keys/management-key-service.js';
import type { MemberService, WorkspaceRole } from '../domain/people/member-service.js';
import type { SessionWithPerson } from '../domain/people/session-repo.js';
import type { SessionService } from '../domain/people/session-service.js';
import type { Actor } from '../domain/actor.js';
import { AppError } from '../errors.js';
import { neededRoles, rolesFor } from './roles.js';
import { bearerOf } from '../web/error-response.js';

type CookieConfig = Pick<Config, 'sessionCookieSecure'>;

/** The session's cookie: `__Host-` (Secure, Path=/, no Domain: only this origin may set or read it), or its development fallback. */
export function sessionCookieName(config: CookieConfig): string {
  return config.sessionCookieSecure ? '__Host-nexus_session' : 'nexus_session';
}

/** The short-lived cookie of a sign-in under way (the browser that began it is the one that may finish it). */
export function signInCookieName(config: CookieConfig): string {
  return config.sessionCookieSecure ? '__Host-nexus_sign_in' : 'nexus_sign_in';
}

/** A Set-Cookie value: HttpOnly, SameSite=Lax, Path=/, Secure unless the development fallback is on. */
export function cookieHeader(config: CookieConfig, name: string, value: string, maxAgeSeconds: number): string {
  const secure = config.sessionCookieSecure ? '; Secure' : '';
  return `${name}=${value}; Path=/; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}; HttpOnly; SameSite=Lax${secure}`;
}

/** The value of one cookie of the request's Cookie header. */
export function cookieOf(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim() || undefined;
  }
  return undefined;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Who calls: a key's principal, or a person's, whose role is checked in each workspace the request reaches. */
export type AdminPrincipal = Principal & Pick<Actor, 'roleCheck' | 'person' | 'roleIn'>;

interface AuthDeps {
  config: CookieConfig & Pick<Config, 'ownerEmails'>;
  managementKeys: ManagementKeyService;
  sessions: SessionService;
  members: MemberService;
}

/**
 * The principal of a credential with a role in each of its workspaces (a person's memberships, a key's role) for
 * this operation (src/http/roles.ts): it sees those workspaces, and is refused 403 `role_forbidden`, naming the
 * roles needed, where its role may not call the operation.
 */
function rolePrincipal(
  base: Pick<AdminPrincipal, 'keyId' | 'person'>,
  roles: ReadonlyMap<string, WorkspaceRole>,
  operationId: string | undefined,
): AdminPrincipal {
  const allowed = rolesFor(operationId);
  const needed = `${operationId ?? 'this request'} needs the role ${neededRoles(allowed)}`;
  if (![...roles.values()].some((role) => allowed.includes(role))) {
    throw new AppError('role_forbidden', `${needed}; yours: ${[...new Set(roles.values())].join(', ')}`);
  }
  return {
    ...base,
    isRoot: false,
    workspaceIds: new Set(roles.keys()),
    roleIn: (workspaceId) => (workspaceId && roles.get(workspaceId)) || null,
    roleCheck: (workspaceId) => {
      const role = roles.get(workspaceId);
      if (role && !allowed.includes(role)) throw new AppError('role_forbidden', `${needed}; yours in this workspace: ${role}`);
    },
  };
}

/**
 * A session's principal: an owner sees every workspace, as the root key does; a member, their workspaces with their
 * role in each. Memberships are read on each request: one removed counts at once.
 */
async function sessionPrincipal(deps: AuthDeps, session: SessionWithPerson, operationId: string | undefined): Promise<AdminPrincipal> {
  const keyId = `session:${session.id}`;
  const person = { id: session.person_id, email: session.email };
  const memberships = await deps.members.membershipsOf(session.email);
  const linkOwner = session.provider === null && session.is_owner;
  const configOwner = session.email !== null && deps.config.ownerEmails.includes(session.email);
  if (linkOwner || configOwner || memberships.owner) return { keyId, isRoot: true, workspaceIds: null, person, roleIn: () => 'owner' };
  if (memberships.roles.size === 0) throw new AppError('not_a_member', 'You are no longer a member of any workspace of this Nexus');
  return rolePrincipal({ keyId, person }, memberships.roles, operationId);
}

/** A key's principal: with a workspace role, the role table applies in each of its workspaces; an owner's or none, its scope alone. */
function keyPrincipal(principal: Principal, operationId: string | undefined): AdminPrincipal {
  const role = principal.keyRole;
  if (!role) return principal;
  if (role === 'owner' || principal.workspaceIds === null) return { ...principal, roleIn: () => role };
  const roles = new Map([...principal.workspaceIds].map((workspaceId) => [workspaceId, role as WorkspaceRole]));
  return rolePrincipal({ keyId: principal.keyId }, roles, operationId);
}

export function createAdminAuthentication(deps: AuthDeps) {
  const cookie = sessionCookieName(deps.config);
  return {
    /** The caller's principal, or a 401 (or 403 for a session's change without its CSRF token, or a role that may not). */
    async authenticate(req: IncomingMessage, operationId: string | undefined): Promise<AdminPrincipal> {
      const token = req.headers.authorization ? undefined : cookieOf(req, cookie);
      if (token === undefined)
        return keyPrincipal(await deps.managementKeys.authenticate(bearerOf(req.headers.authorization)), operationId);
      const session = await deps.sessions.authenticate(token);
      if (!SAFE_METHODS.has(req.method ?? 'GET')) {
        const sent = req.headers['x-csrf-token'];
        deps.sessions.checkCsrf(token, typeof sent === 'string' ? sent : undefined);
      }
      return sessionPrincipal(deps, session, operationId);
    },
  };
}

export type AdminAuthentication = ReturnType<typeof createAdminAuthentication>;

/** The cookie cleared (a refused or ended session's), so the browser stops sending it. */
export function clearCookie(res: ServerResponse, config: CookieConfig, name: string): void {
  const set = res.getHeader('Set-Cookie');
  const values = Array.isArray(set) ? set : set ? [String(set)] : [];
  res.setHeader('Set-Cookie', [...values, cookieHeader(config, name, '', 0)]);
}

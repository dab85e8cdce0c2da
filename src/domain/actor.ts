/**
 * Who is calling the Admin API, as services see it: the Management Key's id and
 * scope, and what the audit trail records about the request.
 */
import { AppError, type ErrorCode } from '../errors.js';

export interface Actor {
  /** Management key id; 'root' for the key given in NEXUS_MANAGEMENT_KEY. */
  keyId: string;
  isRoot: boolean;
  /** The workspaces a scoped key may see; null for a root key (all). */
  workspaceIds: ReadonlySet<string> | null;
  requestId: string;
  clientAddress: string | null;
  /**
   * A person's session: throws 403 `role_forbidden` when their role in the workspace may not make this request
   * (src/http/roles.ts). Absent for keys, whose scope is `workspaceIds` alone.
   */
  roleCheck?: ((workspaceId: string) => void) | undefined;
  /** A person's session: the person (the audit names them). Absent for keys and Nexus's own work. */
  person?: ActorPerson | undefined;
  /** The role the request acts with in a workspace (null: the installation), as the audit records it; absent: none. */
  roleIn?: ((workspaceId: string | null) => string | null) | undefined;
}

/** The person of a session, as the audit names them. */
interface ActorPerson {
  id: string;
  email: string | null;
}

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A system actor for work that no request started (sweepers, webhooks, CLI). */
export function systemActor(keyId: string, requestId = 'system'): Actor {
  return { keyId, isRoot: true, workspaceIds: null, requestId, clientAddress: null };
}

/** Whether the actor may see the workspace; a person who is a member with a role the request does not allow is refused 403. */
export function canSeeWorkspace(actor: Actor, workspaceId: string): boolean {
  if (actor.workspaceIds !== null && !actor.workspaceIds.has(workspaceId)) return false;
  actor.roleCheck?.(workspaceId);
  return true;
}

/**
 * Throws the resource's not-found error when the actor may not see its workspace:
 * another tenant's resources are indistinguishable from missing ones.
 */
export function assertVisible(actor: Actor, workspaceId: string, notFound: ErrorCode, what: string): void {
  if (!canSeeWorkspace(actor, workspaceId)) throw new AppError(notFound, `${what} not found`);
}

export function requireRoot(actor: Actor): void {
  if (!actor.isRoot) throw new AppError('root_key_required', 'This operation needs the root Management Key');
}

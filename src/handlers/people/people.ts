import type {
  CreateInvitationData,
  CreateInvitationResponses,
  InvitationDto,
  ListInvitationsData,
  ListInvitationsResponses,
  RevokeInvitationData,
  RevokeInvitationResponses,
  AddMemberData,
  AddMemberResponses,
  ListMembersData,
  ListMembersResponses,
  MemberDto,
  RemoveMemberData,
  RemoveMemberResponses,
  ListSessionsData,
  ListSessionsResponses,
  RevokeSessionData,
  RevokeSessionResponses,
  SessionDto,
  CallerDto,
  GetCallerData,
  GetCallerResponses,
  AddOwnerData,
  AddOwnerResponses,
  ListOwnersData,
  ListOwnersResponses,
  OwnerDto,
  RemoveOwnerData,
  RemoveOwnerResponses,
} from '../../../generated/client/types.gen.js';
import type { InvitationRow } from '../../domain/people/invitation-repo.js';
import type { MemberRow } from '../../domain/people/member-repo.js';
import type { Owner, WorkspaceRole } from '../../domain/people/member-service.js';
import type { SessionWithPerson } from '../../domain/people/session-repo.js';
import type { Services } from '../../domain/services.js';
import { created, handler, noContent, ok, page, type HandlerMap } from '../../http/handler.js';
import { operationsOf } from '../../http/roles.js';
import { listQuery } from '../../http/wire.js';
import type { Actor } from '../../domain/actor.js';

/** A session as the wire shows it: never its token or its ID token. */
function toSessionDto(row: SessionWithPerson): SessionDto {
  return {
    id: row.id,
    person: { issuer: row.issuer, subject: row.subject, email: row.email, name: row.name },
    provider: row.provider,
    owner: row.is_owner,
    createdAt: row.created_at.toISOString(),
    lastSeenAt: row.last_seen_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
  };
}

function toMemberDto(row: MemberRow): MemberDto {
  return {
    id: row.id,
    email: row.email,
    workspaceId: row.workspace_id!,
    role: row.role as WorkspaceRole,
    createdAt: row.created_at.toISOString(),
  };
}

/** The caller and what the role table lets it call: everything for an owner, else by its role in each workspace. */
function callerOf(actor: Actor): CallerDto {
  const base = { credential: actor.keyId, email: actor.person?.email ?? null, owner: actor.isRoot };
  if (actor.isRoot || actor.workspaceIds === null) return { ...base, workspaces: [] };
  const workspaces = [...actor.workspaceIds].sort().map((workspaceId) => {
    const role = actor.roleIn?.(workspaceId) ?? null;
    return { workspaceId, role, operations: operationsOf(role) };
  });
  return { ...base, workspaces };
}

function toOwnerDto(owner: Owner): OwnerDto {
  return { id: owner.id, email: owner.email, configured: owner.id === null, createdAt: owner.createdAt?.toISOString() ?? null };
}

function toInvitationDto(row: InvitationRow): InvitationDto {
  return {
    id: row.id,
    email: row.email,
    workspaceId: row.workspace_id,
    role: row.role as WorkspaceRole,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
  };
}

export function peopleHandlers({ people }: Services): HandlerMap {
  return {
    getCaller: handler<GetCallerData, GetCallerResponses>(async ({ actor }) => ok(callerOf(actor))),
    listOwners: handler<ListOwnersData, ListOwnersResponses>(async ({ actor }) =>
      ok((await people.members.listOwners(actor)).map(toOwnerDto)),
    ),
    addOwner: handler<AddOwnerData, AddOwnerResponses>(async ({ actor, body }) => {
      const row = await people.members.addOwner(actor, body.email);
      return created(toOwnerDto({ id: row.id, email: row.email, createdAt: row.created_at }));
    }),
    removeOwner: handler<RemoveOwnerData, RemoveOwnerResponses>(async ({ actor, path }) => {
      await people.members.removeOwner(actor, path.memberId);
      return noContent();
    }),
    createInvitation: handler<CreateInvitationData, CreateInvitationResponses>(async ({ actor, path, body, publicUrl }) => {
      const { invitation, token } = await people.invitations.create(actor, path.workspaceId, body);
      return created({ ...toInvitationDto(invitation), url: `${publicUrl}/auth/invitation?token=${token}` });
    }),
    listInvitations: handler<ListInvitationsData, ListInvitationsResponses>(async ({ actor, path, query }) => {
      const result = await people.invitations.list(actor, path.workspaceId, listQuery(query ?? {}));
      return page(result.items.map(toInvitationDto), result.nextAfter);
    }),
    revokeInvitation: handler<RevokeInvitationData, RevokeInvitationResponses>(async ({ actor, path }) => {
      await people.invitations.revoke(actor, path.invitationId);
      return noContent();
    }),
    listMembers: handler<ListMembersData, ListMembersResponses>(async ({ actor, path, query }) => {
      const result = await people.members.list(actor, path.workspaceId, listQuery(query ?? {}));
      return page(result.items.map(toMemberDto), result.nextAfter);
    }),
    addMember: handler<AddMemberData, AddMemberResponses>(async ({ actor, path, body }) =>
      created(toMemberDto(await people.members.add(actor, path.workspaceId, body))),
    ),
    removeMember: handler<RemoveMemberData, RemoveMemberResponses>(async ({ actor, path }) => {
      await people.members.remove(actor, path.memberId);
      return noContent();
    }),
    listSessions: handler<ListSessionsData, ListSessionsResponses>(async ({ actor, query }) => {
      const result = await people.sessions.list(actor, listQuery(query ?? {}));
      return page(result.items.map(toSessionDto), result.nextAfter);
    }),
    revokeSession: handler<RevokeSessionData, RevokeSessionResponses>(async ({ actor, path }) => {
      await people.sessions.revoke(actor, path.sessionId);
      return noContent();
    }),
  };
}

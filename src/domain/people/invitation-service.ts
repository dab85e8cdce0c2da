/**
 * Invitations (docs/people.md): a member added by a link that expires. An admin invites an email with a role; the
 * link (shown once) is sent to the person; opened, then followed by a sign-in with that email (verified), it makes
 * them a member. Used once; an expired, revoked or used one is refused.
 */
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { isUuid, newId } from '../../ids.js';
import { assertVisible, systemActor, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import type { Page, PageRequest } from '../pagination.js';
import { generateToken, type KeyHasher } from '../security/key-hash.js';
import type { WorkspaceRepo } from '../workspaces/workspace-repo.js';
import type { InvitationRepo, InvitationRow } from './invitation-repo.js';
import type { MemberRepo } from './member-repo.js';
import type { WorkspaceRole } from './member-service.js';

const INVITATION_PREFIX = 'nx-invite-';

interface InvitationDeps {
  db: Db;
  invitationRepo: InvitationRepo;
  memberRepo: MemberRepo;
  workspaceRepo: WorkspaceRepo;
  audit: AuditService;
  hasher: KeyHasher;
  clock: Clock;
  invitationMs: number;
}

/** An invitation made; its token, to put in the link shown once. */
async function create(
  deps: InvitationDeps,
  actor: Actor,
  workspaceId: string,
  input: { email: string; role: WorkspaceRole },
): Promise<{ invitation: InvitationRow; token: string }> {
  assertVisible(actor, workspaceId, 'workspace_not_found', 'Workspace');
  return deps.db.transaction(async (tx) => {
    const workspace = await deps.workspaceRepo.findByIdForShare(workspaceId, tx);
    if (!workspace) throw new AppError('workspace_not_found', 'Workspace not found');
    if (workspace.status === 'ARCHIVED') {
      throw new AppError('workspace_archived', `Workspace ${workspaceId} is archived and read-only`, { current_status: workspace.status });
    }
    const now = deps.clock.now();
    const token = generateToken(INVITATION_PREFIX);
    const invitation: InvitationRow = {
      id: newId(),
      token_hash: deps.hasher.hash(token),
      email: input.email.toLowerCase(),
      workspace_id: workspaceId,
      role: input.role,
      created_at: now,
      expires_at: new Date(now.getTime() + deps.invitationMs),
      accepted_at: null,
      revoked_at: null,
    };
    await deps.invitationRepo.insert(invitation, tx);
    const changes = { email: invitation.email, role: invitation.role };
    await deps.audit.record(
      actor,
      { action: 'invitation.created', resourceType: 'invitation', resourceId: invitation.id, workspaceId, changes },
      tx,
    );
    return { invitation, token };
  });
}

async function list(deps: InvitationDeps, actor: Actor, workspaceId: string, page: PageRequest): Promise<Page<InvitationRow>> {
  assertVisible(actor, workspaceId, 'workspace_not_found', 'Workspace');
  return deps.invitationRepo.listPending(workspaceId, page);
}

async function revoke(deps: InvitationDeps, actor: Actor, invitationId: string): Promise<void> {
  if (!isUuid(invitationId)) throw new AppError('invitation_not_found', 'Invitation not found');
  await deps.db.transaction(async (tx) => {
    const row = await deps.invitationRepo.find(invitationId, tx);
    if (!row) throw new AppError('invitation_not_found', 'Invitation not found');
    assertVisible(actor, row.workspace_id, 'invitation_not_found', 'Invitation');
    if (!(await deps.invitationRepo.revoke(invitationId, deps.clock.now(), tx)))
      throw new AppError('invitation_not_found', 'Invitation not found');
    await deps.audit.record(
      actor,
      { action: 'invitation.revoked', resourceType: 'invitation', resourceId: invitationId, workspaceId: row.workspace_id },
      tx,
    );
  });
}

/** The invitation of this token accepted by the person signed in with `email`: they are a member from now on. */
async function accept(deps: InvitationDeps, token: string, email: string | null): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const row = token.startsWith(INVITATION_PREFIX) ? await deps.invitationRepo.findByTokenHash(deps.hasher.hash(token), tx) : undefined;
    if (!row || row.accepted_at || row.revoked_at)
      throw new AppError('invitation_invalid', 'This invitation is not valid: it was used or revoked');
    const now = deps.clock.now();
    if (row.expires_at <= now) throw new AppError('invitation_expired', 'This invitation has expired: ask for another');
    if (email !== row.email) {
      throw new AppError('invitation_invalid', 'This invitation is for another email than the one you signed in with');
    }
    await deps.invitationRepo.markAccepted(row.id, now, tx);
    const member = { id: newId(), email, workspace_id: row.workspace_id, role: row.role, created_at: now };
    if (await deps.memberRepo.insertIfAbsent(member, tx)) {
      await deps.audit.record(
        systemActor(`invitation:${row.id}`),
        {
          action: 'member.added',
          resourceType: 'member',
          resourceId: member.id,
          workspaceId: row.workspace_id,
          changes: { email, role: row.role },
        },
        tx,
      );
    }
  });
}

export function createInvitationService(deps: InvitationDeps) {
  return bindDeps(deps, { create, list, revoke, accept });
}

export type InvitationService = ReturnType<typeof createInvitationService>;

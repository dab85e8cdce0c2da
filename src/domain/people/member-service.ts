/**
 * Members and roles (docs/people.md): who of the people a provider vouches for may do what. A membership names a
 * verified email and a workspace with one role (admin, developer, billing, support, viewer); an owner is a member
 * of the installation. Memberships are read on every request of a session, so one removed takes effect on the
 * person's next request, on every process.
 */
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { isUuid, newId } from '../../ids.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import type { AuditService } from '../audit/audit-service.js';
import { bindDeps } from '../bind.js';
import type { Page, PageRequest } from '../pagination.js';
import type { WorkspaceRepo } from '../workspaces/workspace-repo.js';
import type { MemberRepo, MemberRow } from './member-repo.js';

/** A person's role in a workspace. */
export const WORKSPACE_ROLES = ['admin', 'developer', 'billing', 'support', 'viewer'] as const;
export type WorkspaceRole = (typeof WORKSPACE_ROLES)[number];

interface MemberDeps {
  db: Db;
  memberRepo: MemberRepo;
  workspaceRepo: WorkspaceRepo;
  audit: AuditService;
  clock: Clock;
}

/** What a person is, by their verified email: an owner, and their role in each workspace. */
interface Memberships {
  owner: boolean;
  roles: ReadonlyMap<string, WorkspaceRole>;
}

async function membershipsOf(deps: MemberDeps, email: string | null): Promise<Memberships> {
  if (!email) return { owner: false, roles: new Map() };
  const rows = await deps.memberRepo.membershipsOf(email);
  const roles = new Map<string, WorkspaceRole>();
  for (const row of rows) if (row.workspace_id) roles.set(row.workspace_id, row.role as WorkspaceRole);
  return { owner: rows.some((r) => r.workspace_id === null && r.role === 'owner'), roles };
}

async function list(deps: MemberDeps, actor: Actor, workspaceId: string, page: PageRequest): Promise<Page<MemberRow>> {
  assertVisible(actor, workspaceId, 'workspace_not_found', 'Workspace');
  return deps.memberRepo.listOfWorkspace(workspaceId, page);
}

/** A person made a member of the workspace with a role (before or after they first sign in); audited. */
async function add(deps: MemberDeps, actor: Actor, workspaceId: string, input: { email: string; role: WorkspaceRole }): Promise<MemberRow> {
  assertVisible(actor, workspaceId, 'workspace_not_found', 'Workspace');
  return deps.db.transaction(async (tx) => {
    const workspace = await deps.workspaceRepo.findByIdForShare(workspaceId, tx);
    if (!workspace) throw new AppError('workspace_not_found', 'Workspace not found');
    if (workspace.status === 'ARCHIVED') {
      throw new AppError('workspace_archived', `Workspace ${workspaceId} is archived and read-only`, { current_status: workspace.status });
    }
    const row: MemberRow = {
      id: newId(),
      email: input.email.toLowerCase(),
      workspace_id: workspaceId,
      role: input.role,
      created_at: deps.clock.now(),
    };
    await deps.memberRepo.insert(row, tx);
    await deps.audit.record(
      actor,
      { action: 'member.added', resourceType: 'member', resourceId: row.id, workspaceId, changes: { email: row.email, role: row.role } },
      tx,
    );
    return row;
  });
}

/** The membership ended: the person's next request in that workspace is refused; audited. */
async function remove(deps: MemberDeps, actor: Actor, memberId: string): Promise<void> {
  if (!isUuid(memberId)) throw new AppError('member_not_found', 'Member not found');
  await deps.db.transaction(async (tx) => {
    const row = await deps.memberRepo.find(memberId, tx);
    if (!row?.workspace_id) throw new AppError('member_not_found', 'Member not found');
    assertVisible(actor, row.workspace_id, 'member_not_found', 'Member');
    await deps.memberRepo.remove(memberId, tx);
    await deps.audit.record(
      actor,
      {
        action: 'member.removed',
        resourceType: 'member',
        resourceId: memberId,
        workspaceId: row.workspace_id,
        changes: { email: row.email },
      },
      tx,
    );
  });
}

/**
 * Memberships given at sign-in by the provider's rules (a group, an email domain): each made unless the email has
 * one in that workspace (or as owner) already, which stays as it is; audited. A rule naming a workspace that is
 * not there, or is archived, gives nothing.
 */
async function provision(
  deps: MemberDeps,
  actor: Actor,
  email: string,
  grants: readonly { workspaceId: string | null; role: string }[],
): Promise<void> {
  for (const grant of grants) {
    await deps.db.transaction(async (tx) => {
      if (grant.workspaceId) {
        const workspace = await deps.workspaceRepo.findByIdForShare(grant.workspaceId, tx);
        if (!workspace || workspace.status === 'ARCHIVED') return;
      }
      const row: MemberRow = { id: newId(), email, workspace_id: grant.workspaceId, role: grant.role, created_at: deps.clock.now() };
      if (!(await deps.memberRepo.insertIfAbsent(row, tx))) return;
      const changes = { email, role: grant.role };
      await deps.audit.record(
        actor,
        { action: 'member.provisioned', resourceType: 'member', resourceId: row.id, workspaceId: grant.workspaceId, changes },
        tx,
      );
    });
  }
}

export function createMemberService(deps: MemberDeps) {
  return bindDeps(deps, { membershipsOf, list, add, remove, provision });
}

export type MemberService = ReturnType<typeof createMemberService>;

/**
 * Members and roles (docs/people.md): who of the people a provider vouches for may do what. A membership names a
 * verified email and a workspace with one role (admin, developer, billing, support, viewer); an owner is a member
 * of the installation. Memberships are read on every request of a session, so one removed takes effect on the
 * person's next request, on every process.
 */
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { isUuid, newId } from '../../ids.js';
import { assertVisible, requireRoot, type Actor, type Clock } from '../actor.js';
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
  /** NEXUS_OWNER_EMAILS: owners by the configuration, in lower case (not removable through the API). */
  ownerEmails: readonly string[];
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

/** An owner as listed: one made through the API (or at sign-in) has a membership's id; one of NEXUS_OWNER_EMAILS has none. */
export interface Owner {
  id: string | null;
  email: string;
  createdAt: Date | null;
}

/** The installation's owners: those of the configuration, then those made through the API or at sign-in. */
async function listOwners(deps: MemberDeps, actor: Actor): Promise<Owner[]> {
  requireRoot(actor);
  const stored = await deps.memberRepo.owners();
  const configured = deps.ownerEmails.filter((email) => !stored.some((row) => row.email === email));
  return [
    ...configured.map((email) => ({ id: null, email, createdAt: null })),
    ...stored.map((row) => ({ id: row.id, email: row.email, createdAt: row.created_at })),
  ];
}

/** A person made an owner of the installation (every workspace, every operation) by their email; audited. */
async function addOwner(deps: MemberDeps, actor: Actor, email: string): Promise<MemberRow> {
  requireRoot(actor);
  return deps.db.transaction(async (tx) => {
    const row: MemberRow = { id: newId(), email: email.toLowerCase(), workspace_id: null, role: 'owner', created_at: deps.clock.now() };
    await deps.memberRepo.insert(row, tx);
    await deps.audit.record(
      actor,
      { action: 'owner.added', resourceType: 'member', resourceId: row.id, workspaceId: null, changes: { email: row.email } },
      tx,
    );
    return row;
  });
}

/**
 * An owner made through the API no longer one; audited. The last owner stays (409 `last_owner`): without one, no
 * person could manage the installation. The owners are locked first, so two removals at once cannot both pass.
 */
async function removeOwner(deps: MemberDeps, actor: Actor, memberId: string): Promise<void> {
  requireRoot(actor);
  if (!isUuid(memberId)) throw new AppError('member_not_found', 'Owner not found');
  await deps.db.transaction(async (tx) => {
    const owners = await deps.memberRepo.owners(tx, true);
    const row = owners.find((owner) => owner.id === memberId);
    if (!row) throw new AppError('member_not_found', 'Owner not found');
    const remaining = new Set([...owners.filter((owner) => owner.id !== memberId).map((owner) => owner.email), ...deps.ownerEmails]);
    if (remaining.size === 0) {
      throw new AppError('last_owner', `${row.email} is the last owner: make another owner before removing them`);
    }
    await deps.memberRepo.remove(memberId, tx);
    await deps.audit.record(
      actor,
      { action: 'owner.removed', resourceType: 'member', resourceId: memberId, workspaceId: null, changes: { email: row.email } },
      tx,
    );
  });
}

export function createMemberService(deps: MemberDeps) {
  return bindDeps(deps, { membershipsOf, list, add, remove, provision, listOwners, addOwner, removeOwner });
}

export type MemberService = ReturnType<typeof createMemberService>;

/**
 * An access's status changes (the machine is access-state.ts): an administrator's
 * activation and suspension, billing's transitions and resumption, and the expiry,
 * applied lazily on every touch of an access and by the sweep.
 */
import type { Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { systemActor, type Actor } from '../actor.js';
import type { AccessChangeReason } from '../events/event-catalogue.js';
import { activePlanOf, lockVisible, openFirstPeriod, view, type AccessDeps } from './access-common.js';
import {
  BILLING_REASON_PREFIX,
  canTransition,
  expiredWhileSuspended,
  heldSuspensionReason,
  isExpiryDue,
  suspensionHolder,
} from './access-state.js';
import type { AccessRow, AccessStatus, AccessView } from './access-types.js';

const EXPIRY_ACTOR = 'system:access-expiry';
const STATUS_ACTION: Record<AccessStatus, string> = {
  PENDING: 'access.pending',
  ACTIVE: 'access.activated',
  SUSPENDED: 'access.suspended',
  EXPIRED: 'access.expired',
  REVOKED: 'access.revoked',
};

/** Who changed an access's status, as access.status_changed says it: the expiry sweep, billing, or an administrator. */
function changeReasonOf(actor: Actor, reason: string | undefined): AccessChangeReason {
  if (actor.keyId === EXPIRY_ACTOR) return 'expiry';
  if (reason?.startsWith(BILLING_REASON_PREFIX)) return 'billing';
  return 'admin';
}

export async function setStatus(
  { accessRepo, audit, clock, changes, events }: AccessDeps,
  actor: Actor,
  access: AccessRow,
  to: AccessStatus,
  reason: string | undefined,
  tx: Queryable,
): Promise<void> {
  // Remembered so that a renewal restores the suspension, and knows whose it was.
  if (access.status === 'SUSPENDED' && to === 'EXPIRED') reason = expiredWhileSuspended(reason ?? 'expired', access.status_reason);
  await accessRepo.update(access.id, { status: to, status_reason: reason ?? null, updated_at: clock.now() }, tx);
  await changes.announce({ kind: 'access', id: access.id }, tx);
  await audit.record(
    actor,
    {
      action: STATUS_ACTION[to],
      resourceType: 'workspace_access',
      resourceId: access.id,
      workspaceId: access.workspace_id,
      changes: { from: access.status, status: to, ...(reason ? { reason } : {}) },
    },
    tx,
  );
  // A suspension changing hands (billing's becoming the administrator's) is no change of status.
  if (access.status !== to) {
    await events.emit(tx, access.workspace_id, 'access.status_changed', {
      workspaceAccessId: access.id,
      from: access.status,
      to,
      reason: changeReasonOf(actor, reason),
    });
  }
  access.status = to;
  access.status_reason = reason ?? null;
}

/** Applies a due expiry to a locked access (lazily, on every touch of it). */
export async function expireIfDue(deps: AccessDeps, access: AccessRow, tx: Queryable): Promise<void> {
  const now = deps.clock.now();
  const last = await deps.quotaRepo.latestPeriod(access.id, tx);
  if (isExpiryDue(access, last?.period_end, now)) {
    const cause = access.access_ends_at && access.access_ends_at <= now ? 'access_ended' : 'period_ended';
    await setStatus(deps, systemActor(EXPIRY_ACTOR), access, 'EXPIRED', cause, tx);
  }
}

/**
 * What a renewal makes of an access that expired while suspended: SUSPENDED again, with
 * its suspension's own reason (a billing suspension stays billing's to lift); else ACTIVE.
 */
export function restoredByRenewal(access: AccessRow): [AccessStatus, string] {
  const suspension = access.status === 'EXPIRED' ? heldSuspensionReason(access) : null;
  return suspension === null ? ['ACTIVE', 'renewed'] : ['SUSPENDED', suspension || 'renewed'];
}

/** To ACTIVE needs a period covering now; a PENDING access gets its first one. */
async function prepareActivation(deps: AccessDeps, actor: Actor, access: AccessRow, tx: Queryable): Promise<void> {
  const now = deps.clock.now();
  if (access.access_ends_at && access.access_ends_at <= now) {
    throw new AppError('illegal_transition', 'The access has ended (accessEndsAt passed)', { current_status: access.status });
  }
  const current = await deps.quotaRepo.currentPeriod(access.id, now, tx);
  if (current) return;
  if (access.status !== 'PENDING') {
    throw new AppError('illegal_transition', 'The access has no quota period covering now; renew it instead', {
      current_status: access.status,
    });
  }
  const plan = await activePlanOf(deps, actor, access.workspace_id, access.plan_id, tx);
  await openFirstPeriod(deps, access, plan, tx);
}

export async function transitionInTx(
  deps: AccessDeps,
  actor: Actor,
  accessId: string,
  to: AccessStatus,
  reason: string | undefined,
  tx: Queryable,
): Promise<AccessRow> {
  const access = await lockVisible(deps, actor, accessId, tx);
  await expireIfDue(deps, access, tx);
  if (access.status === to) return access;
  if (!canTransition(access.status, to)) {
    throw new AppError('illegal_transition', `A ${access.status} access cannot become ${to}`, { current_status: access.status });
  }
  if (to === 'ACTIVE') await prepareActivation(deps, actor, access, tx);
  await setStatus(deps, actor, access, to, reason, tx);
  return access;
}

/**
 * Billing's way to ACTIVE: it lifts a suspension billing made, never an administrator's
 * (only activateWorkspaceAccess lifts that). An access that expired while an administrator's
 * suspension held it becomes SUSPENDED again once a period covers now, as a renewal makes it.
 * Returns the status the access is left in.
 */
export async function resumeForBillingInTx(
  deps: AccessDeps,
  actor: Actor,
  accessId: string,
  reason: string,
  tx: Queryable,
): Promise<AccessStatus> {
  const access = await lockVisible(deps, actor, accessId, tx);
  await expireIfDue(deps, access, tx);
  if (suspensionHolder(access) !== 'admin') return (await transitionInTx(deps, actor, accessId, 'ACTIVE', reason, tx)).status;
  const now = deps.clock.now();
  const ended = access.access_ends_at !== null && access.access_ends_at <= now;
  if (access.status === 'EXPIRED' && !ended && (await deps.quotaRepo.currentPeriod(access.id, now, tx))) {
    await setStatus(deps, actor, access, ...restoredByRenewal(access), tx);
  }
  return access.status;
}

export async function activate(deps: AccessDeps, actor: Actor, accessId: string): Promise<AccessView> {
  return deps.db.transaction(async (tx) => {
    const access = await lockVisible(deps, actor, accessId, tx);
    await deps.workspaces.requireWritable(actor, access.workspace_id, tx);
    await transitionInTx(deps, actor, accessId, 'ACTIVE', undefined, tx);
    return view(deps, accessId, tx);
  });
}

export async function suspend(deps: AccessDeps, actor: Actor, accessId: string): Promise<AccessView> {
  return deps.db.transaction(async (tx) => {
    const access = await lockVisible(deps, actor, accessId, tx);
    await deps.workspaces.requireWritable(actor, access.workspace_id, tx);
    const suspended = await transitionInTx(deps, actor, accessId, 'SUSPENDED', undefined, tx);
    // Suspending what billing suspended makes the suspension the administrator's: billing's recovery no longer lifts it.
    if (suspensionHolder(suspended) === 'billing') await setStatus(deps, actor, suspended, 'SUSPENDED', undefined, tx);
    return view(deps, accessId, tx);
  });
}

/** The expiry sweep: accesses whose end or last period has passed become EXPIRED. */
export async function expireDue(deps: AccessDeps, workspaceId?: string): Promise<number> {
  return deps.db.transaction(async (tx) => {
    const due = await deps.accessRepo.dueForExpiry(deps.clock.now(), workspaceId, tx);
    for (const access of due) await expireIfDue(deps, access, tx);
    return due.length;
  });
}

/**
 * The workspace access state machine (README "Workspace access states").
 *
 *   PENDING   -> ACTIVE | EXPIRED | REVOKED
 *   ACTIVE    -> SUSPENDED | EXPIRED | REVOKED
 *   SUSPENDED -> ACTIVE | EXPIRED | REVOKED
 *   EXPIRED   -> ACTIVE (only with a quota period covering now) | REVOKED
 *   REVOKED   -> (terminal)
 *
 * Staying in the same state is a no-op, not a transition.
 */
import type { AccessStatus } from './access-types.js';

const allowed: Record<AccessStatus, readonly AccessStatus[]> = {
  PENDING: ['ACTIVE', 'EXPIRED', 'REVOKED'],
  ACTIVE: ['SUSPENDED', 'EXPIRED', 'REVOKED'],
  SUSPENDED: ['ACTIVE', 'EXPIRED', 'REVOKED'],
  EXPIRED: ['ACTIVE', 'REVOKED'],
  REVOKED: [],
};

export function canTransition(from: AccessStatus, to: AccessStatus): boolean {
  return allowed[from].includes(to);
}

/**
 * Whether an access is due to expire at `now`: its accessEndsAt has passed, or
 * (once it has had a period) its last period has ended without a renewal.
 */
export function isExpiryDue(
  access: { status: AccessStatus; access_ends_at: Date | null },
  lastPeriodEnd: Date | undefined,
  now: Date,
): boolean {
  if (!canTransition(access.status, 'EXPIRED')) return false;
  if (access.access_ends_at && access.access_ends_at <= now) return true;
  return access.status !== 'PENDING' && lastPeriodEnd !== undefined && lastPeriodEnd <= now;
}

/**
 * Who holds a suspension is read from status_reason. Billing's transitions carry
 * 'billing:<subscription status>'; any other suspension is an administrator's
 * (suspendWorkspaceAccess). An access that expires while SUSPENDED keeps its
 * suspension's reason after WHILE_SUSPENDED, so that a later renewal (manual or
 * billed) knows whose suspension to restore.
 */
export const BILLING_REASON_PREFIX = 'billing:';
const WHILE_SUSPENDED = '_while_suspended';

export type SuspensionHolder = 'billing' | 'admin';

/** The status_reason of an access that expires (for `cause`) while SUSPENDED for `suspensionReason`. */
export function expiredWhileSuspended(cause: string, suspensionReason: string | null): string {
  return `${cause}${WHILE_SUSPENDED}${suspensionReason ? `:${suspensionReason}` : ''}`;
}

/** The reason of the suspension that holds the access ('' for one without a reason); null: none holds it. */
export function heldSuspensionReason(access: { status: AccessStatus; status_reason: string | null }): string | null {
  const reason = access.status_reason ?? '';
  if (access.status === 'SUSPENDED') return reason;
  const at = reason.indexOf(WHILE_SUSPENDED);
  if (access.status !== 'EXPIRED' || at < 0) return null;
  return reason.slice(at + WHILE_SUSPENDED.length).replace(/^:/, '');
}

/** Whose suspension holds the access (SUSPENDED, or EXPIRED while suspended); null: none. */
export function suspensionHolder(access: { status: AccessStatus; status_reason: string | null }): SuspensionHolder | null {
  const reason = heldSuspensionReason(access);
  if (reason === null) return null;
  return reason.startsWith(BILLING_REASON_PREFIX) ? 'billing' : 'admin';
}

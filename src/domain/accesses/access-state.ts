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

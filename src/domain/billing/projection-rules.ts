/**
 * The rules of projections that read no table: which access status a projection asks for, which
 * state is newer, what a state changes, and how a billed period is named (projection.ts applies them).
 */
import type { AccessStatusTarget } from './access-port.js';
import type { ExternalSubscriptionRow } from './billing-repo.js';
import type { SubscriptionState } from './billing-types.js';

export const BILLING_ACTOR = 'system:billing';

/** The projection's columns a subscription state sets. */
export type ProjectionValues = Pick<
  ExternalSubscriptionRow,
  | 'external_customer_id'
  | 'status'
  | 'plan_id'
  | 'external_product_id'
  | 'external_price_id'
  | 'current_period_start'
  | 'current_period_end'
  | 'cancel_at_period_end'
  | 'canceled_at'
  | 'ended_at'
>;

const RANK: Record<AccessStatusTarget, number> = { ACTIVE: 3, SUSPENDED: 2, EXPIRED: 1, REVOKED: 0 };

function same(a: unknown, b: unknown): boolean {
  if (a instanceof Date || b instanceof Date) {
    return a instanceof Date && b instanceof Date ? a.getTime() === b.getTime() : a === b;
  }
  return a === b;
}

export function isNotOlder(state: { sourceUpdatedAt: Date; sourceTiebreak: string }, row: ExternalSubscriptionRow): boolean {
  const a = state.sourceUpdatedAt.getTime();
  const b = row.source_updated_at.getTime();
  return a > b || (a === b && state.sourceTiebreak >= row.source_tiebreak);
}

export function projectionValues(state: SubscriptionState, planId: string | null): ProjectionValues {
  return {
    external_customer_id: state.externalCustomerId,
    status: state.status,
    plan_id: planId,
    external_product_id: state.externalProductId,
    external_price_id: state.externalPriceId,
    current_period_start: state.currentPeriodStart,
    current_period_end: state.currentPeriodEnd,
    cancel_at_period_end: state.cancelAtPeriodEnd,
    canceled_at: state.canceledAt,
    ended_at: state.endedAt,
  };
}

/** The columns `values` changes on `row`, each from and to (dates as ISO text). */
export function changedColumns(row: ExternalSubscriptionRow, values: ProjectionValues): Record<string, { from: unknown; to: unknown }> {
  const changes: Record<string, { from: unknown; to: unknown }> = {};
  for (const [key, value] of Object.entries(values)) {
    const before = row[key as keyof ProjectionValues];
    if (!same(before, value))
      changes[key] = {
        from: before instanceof Date ? before.toISOString() : before,
        to: value instanceof Date ? value.toISOString() : value,
      };
  }
  return changes;
}

/** The access status one projection asks for at `now`; null: it asks for nothing. */
export function desiredAccessStatus(p: ExternalSubscriptionRow, now: Date, graceMs: number): AccessStatusTarget | null {
  switch (p.status) {
    case 'active':
    case 'trialing':
      if (p.cancel_at_period_end && p.current_period_end && p.current_period_end <= now) return 'EXPIRED';
      return 'ACTIVE';
    case 'past_due': {
      const since = p.past_due_since ?? p.source_updated_at;
      return since.getTime() + graceMs > now.getTime() ? 'ACTIVE' : 'SUSPENDED';
    }
    case 'unpaid':
    case 'paused':
      return 'SUSPENDED';
    case 'canceled': {
      const end = p.ended_at ?? p.current_period_end;
      return !end || end <= now ? 'EXPIRED' : 'ACTIVE';
    }
    case 'incomplete':
    case 'incomplete_expired':
    default:
      return null;
  }
}

/** The best status the projections ask for at `now`, and the projection that asks for it; null: none asks. */
export function bestAccessStatus(
  projections: ExternalSubscriptionRow[],
  now: Date,
  graceMs: number,
): { desired: AccessStatusTarget; because: ExternalSubscriptionRow } | null {
  let best: { desired: AccessStatusTarget; because: ExternalSubscriptionRow } | null = null;
  for (const p of projections) {
    const wanted = desiredAccessStatus(p, now, graceMs);
    if (wanted && (!best || RANK[wanted] > RANK[best.desired])) best = { desired: wanted, because: p };
  }
  return best;
}

/** What every period key of one provider subscription starts with. */
export function subscriptionKeyPrefix(provider: string, subscriptionId: string): string {
  return `${provider.toLowerCase()}:${subscriptionId}:`;
}

export function periodKeyOf(provider: string, subscriptionId: string, periodStart: Date): string {
  return `${subscriptionKeyPrefix(provider, subscriptionId)}${periodStart.toISOString()}`;
}

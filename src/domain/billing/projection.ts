/**
 * External subscription projections and what they drive.
 *
 * A subscription state (re-read from the provider, taken from an event payload, or
 * reported by an APP_SYNC backend) is applied to its projection only when it is not
 * older than the stored one (source time, then a tiebreak), so out-of-order delivery
 * never regresses it. Whatever its age, a state that shows a paid period grants that
 * period's quota once: a unique row in billing_period_grants is written in the same
 * transaction as the grant. The access then follows the best of its projections:
 *
 *   active, trialing      ACTIVE (EXPIRED once a period set to cancel at its end has ended)
 *   past_due              ACTIVE during the grace (NEXUS_BILLING_PAST_DUE_GRACE_HOURS), then SUSPENDED
 *   unpaid, paused        SUSPENDED
 *   canceled              EXPIRED once it has ended
 *   incomplete(_expired)  no change
 *
 * Billing lifts only the suspensions it made: one an administrator made stays until the
 * administrator activates the access (resumeForBillingInTx).
 */
import type { Db, Queryable } from '../../db/database.js';
import { isUuid, newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import { systemActor, type Actor, type Clock } from '../actor.js';
import type { Events } from '../events/outbox.js';
import { BILLING_REASON_PREFIX } from '../accesses/access-state.js';
import { isSettledRefusal, type AccessPort, type AccessStatusTarget } from './access-port.js';
import type { BillingConnectionRow, BillingRepo, ExternalSubscriptionRow } from './billing-repo.js';
import { GRANTING_STATUSES, type SubscriptionState } from './billing-types.js';

export const BILLING_ACTOR = 'system:billing';

export interface ApplyResult {
  outcome: 'applied' | 'stale' | 'ignored';
  ignoredReason?: string;
  projectionId?: string;
  /** Projection fields this state changed (`created` for a new projection). */
  changes: Record<string, { from: unknown; to: unknown }>;
  /** What happened to the access: grants, plan changes, transitions. */
  effects: string[];
}

type ProjectionValues = Pick<
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

function isNotOlder(state: { sourceUpdatedAt: Date; sourceTiebreak: string }, row: ExternalSubscriptionRow): boolean {
  const a = state.sourceUpdatedAt.getTime();
  const b = row.source_updated_at.getTime();
  return a > b || (a === b && state.sourceTiebreak >= row.source_tiebreak);
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

/** What every period key of one provider subscription starts with. */
function subscriptionKeyPrefix(provider: string, subscriptionId: string): string {
  return `${provider.toLowerCase()}:${subscriptionId}:`;
}

export function periodKeyOf(provider: string, subscriptionId: string, periodStart: Date): string {
  return `${subscriptionKeyPrefix(provider, subscriptionId)}${periodStart.toISOString()}`;
}

export function createProjector(deps: {
  db: Db;
  repo: BillingRepo;
  accessPort: AccessPort;
  clock: Clock;
  /** How long past_due keeps an access ACTIVE. */
  graceMs: number;
  logger: Logger;
  events: Events;
}) {
  const { db, repo, accessPort, clock, events } = deps;

  /** Grants a period's quota unless its unique grant row exists already. */
  async function grantOnce(
    actor: Actor,
    conn: BillingConnectionRow,
    accessId: string,
    input: {
      planId: string | null;
      periodStart: Date;
      periodEnd: Date;
      periodKey: string;
      supersedeBilledKeyPrefixes?: string[] | undefined;
    },
    tx: Queryable,
  ): Promise<string | null> {
    // A grant refused before (an overlap) is tried again: what it overlapped may have ended since.
    const fresh = await repo.insertPeriodGrant(
      {
        id: newId(),
        workspace_id: conn.workspace_id,
        workspace_access_id: accessId,
        billing_connection_id: conn.id,
        period_key: input.periodKey,
        plan_id: input.planId,
        period_start: input.periodStart,
        period_end: input.periodEnd,
        quota_period_id: null,
        outcome: 'pending',
        created_at: clock.now(),
      },
      tx,
    );
    const row = fresh ?? (await repo.findRefusedPeriodGrantForUpdate(accessId, input.periodKey, tx));
    if (!row) return null;
    try {
      const result = await tx.transaction((sp) =>
        accessPort.grantPeriod(
          actor,
          accessId,
          {
            planId: input.planId,
            periodStart: input.periodStart,
            periodEnd: input.periodEnd,
            externalPeriodKey: input.periodKey,
            supersedeBilledKeyPrefixes: input.supersedeBilledKeyPrefixes,
          },
          sp,
        ),
      );
      await repo.updatePeriodGrant(row.id, { quota_period_id: result.periodId, outcome: result.created ? 'granted' : 'existing' }, tx);
      return `period_granted:${input.periodKey}`;
    } catch (err) {
      if (!isSettledRefusal(err)) throw err;
      await repo.updatePeriodGrant(row.id, { outcome: `refused:${err.code}` }, tx);
      deps.logger.warn({ msg: 'billing period grant refused', accessId, periodKey: input.periodKey, code: err.code });
      return `period_refused:${err.code}`;
    }
  }

  /** Moves the access to the best status its projections ask for. */
  async function enforceAccess(actor: Actor, accessId: string, now: Date, tx: Queryable): Promise<string[]> {
    const access = await repo.findAccess(accessId, tx);
    if (!access || access.status === 'REVOKED') return [];
    const projections = await repo.projectionsOf(accessId, tx);
    let desired: AccessStatusTarget | null = null;
    let because: ExternalSubscriptionRow | null = null;
    for (const p of projections) {
      const wanted = desiredAccessStatus(p, now, deps.graceMs);
      if (wanted && (!desired || RANK[wanted] > RANK[desired])) {
        desired = wanted;
        because = p;
      }
    }
    if (!desired || desired === access.status) return [];
    if (!accessPort.canTransition(access.status, desired)) return [`transition_skipped:${access.status}->${desired}`];
    try {
      const reason = `${BILLING_REASON_PREFIX}${because!.status}`;
      const reached = await tx.transaction((sp) => accessPort.transition(actor, accessId, desired, reason, sp));
      // Short of ACTIVE: an administrator's suspension holds the access, billing does not lift it
      // (unchanged is no effect, so a reconciliation that finds it so again changes nothing).
      return reached === access.status ? [] : [`access:${access.status}->${reached}`];
    } catch (err) {
      if (!isSettledRefusal(err)) throw err;
      return [`transition_refused:${access.status}->${desired}:${err.code}`];
    }
  }

  async function apply(
    conn: BillingConnectionRow,
    state: SubscriptionState,
    ctx: {
      actor: Actor;
      accessIdHint?: string | null;
      /** APP_SYNC reports name their plan and their period's identity themselves. */
      planId?: string;
      periodKey?: string;
    },
    tx: Queryable,
  ): Promise<ApplyResult> {
    // An archived workspace is read-only: no state applies to it (webhooks, reconciliation, reports).
    // The share lock makes an archive wait for this commit.
    if (await repo.workspaceArchivedForShare(conn.workspace_id, tx)) {
      return { outcome: 'ignored', ignoredReason: 'workspace_archived', changes: {}, effects: [] };
    }
    const now = clock.now();
    let row = await repo.findProjectionForUpdate(conn.id, state.externalSubscriptionId, tx);
    const accessId = row?.workspace_access_id ?? state.accessId ?? ctx.accessIdHint ?? null;
    if (!accessId || !isUuid(accessId)) return { outcome: 'ignored', ignoredReason: 'unknown_customer', changes: {}, effects: [] };
    const access = await repo.findAccess(accessId, tx);
    if (!access || access.workspace_id !== conn.workspace_id) {
      return { outcome: 'ignored', ignoredReason: 'unknown_customer', changes: {}, effects: [] };
    }

    const mapping = await repo.matchMapping(conn.id, state.externalProductId, state.externalPriceId, tx);
    const statePlanId =
      ctx.planId ??
      mapping?.plan_id ??
      (row && row.external_price_id === state.externalPriceId && row.external_product_id === state.externalProductId ? row.plan_id : null);
    const values: ProjectionValues = {
      external_customer_id: state.externalCustomerId,
      status: state.status,
      plan_id: statePlanId,
      external_product_id: state.externalProductId,
      external_price_id: state.externalPriceId,
      current_period_start: state.currentPeriodStart,
      current_period_end: state.currentPeriodEnd,
      cancel_at_period_end: state.cancelAtPeriodEnd,
      canceled_at: state.canceledAt,
      ended_at: state.endedAt,
    };

    let outcome: ApplyResult['outcome'] = 'stale';
    let changes: ApplyResult['changes'] = {};
    let planChanged = false;
    if (!row) {
      const inserted = await repo.insertProjection(
        {
          id: newId(),
          workspace_id: conn.workspace_id,
          billing_connection_id: conn.id,
          workspace_access_id: accessId,
          provider: conn.provider,
          external_subscription_id: state.externalSubscriptionId,
          ...values,
          past_due_since: state.status === 'past_due' ? state.sourceUpdatedAt : null,
          source_updated_at: state.sourceUpdatedAt,
          source_tiebreak: state.sourceTiebreak,
          created_at: now,
          updated_at: now,
        },
        tx,
      );
      if (inserted) {
        row = inserted;
        outcome = 'applied';
        changes = { created: { from: null, to: state.status } };
      } else {
        row = await repo.findProjectionForUpdate(conn.id, state.externalSubscriptionId, tx);
      }
    }
    if (outcome !== 'applied' && row && isNotOlder(state, row)) {
      for (const [key, value] of Object.entries(values)) {
        const before = row[key as keyof ProjectionValues];
        if (!same(before, value))
          changes[key] = {
            from: before instanceof Date ? before.toISOString() : before,
            to: value instanceof Date ? value.toISOString() : value,
          };
      }
      const pastDueSince = state.status === 'past_due' ? (row.status === 'past_due' ? row.past_due_since : state.sourceUpdatedAt) : null;
      planChanged = 'plan_id' in changes && values.plan_id !== null;
      row = await repo.updateProjection(
        row.id,
        {
          ...values,
          past_due_since: pastDueSince,
          source_updated_at: state.sourceUpdatedAt,
          source_tiebreak: state.sourceTiebreak,
          ...(Object.keys(changes).length ? { updated_at: now } : {}),
        },
        tx,
      );
      outcome = 'applied';
    }

    const statusChange = (changes['created'] ?? changes['status']) as { from: string | null } | undefined;
    if (outcome === 'applied' && row && (statusChange || planChanged)) {
      await events.emit(tx, conn.workspace_id, 'billing.subscription_changed', {
        workspaceAccessId: accessId,
        billingConnectionId: conn.id,
        externalSubscriptionId: state.externalSubscriptionId,
        from: statusChange ? statusChange.from : row.status,
        to: row.status,
      });
    }

    const effects: string[] = [];
    if (planChanged && row && row.plan_id && access.plan_id !== row.plan_id) {
      const planId = row.plan_id;
      try {
        await tx.transaction((sp) => accessPort.changePlan(ctx.actor, accessId, planId, now, sp));
        effects.push(`plan_changed:${planId}`);
      } catch (err) {
        if (!isSettledRefusal(err)) throw err;
        effects.push(`plan_change_refused:${err.code}`);
      }
    }
    // A paid period is granted whatever the state's age: the provider did open it.
    if (GRANTING_STATUSES.has(state.status) && state.currentPeriodStart && state.currentPeriodEnd) {
      // APP_SYNC reports name their periods themselves: an overlap among them is the reporter's to fix.
      const supersede = ctx.periodKey
        ? undefined
        : [
            subscriptionKeyPrefix(conn.provider, state.externalSubscriptionId),
            ...(await repo.endedProjectionsOf(accessId, tx))
              .filter((p) => p.external_subscription_id !== state.externalSubscriptionId)
              .map((p) => subscriptionKeyPrefix(p.provider, p.external_subscription_id)),
          ];
      const granted = await grantOnce(
        ctx.actor,
        conn,
        accessId,
        {
          planId: statePlanId,
          periodStart: state.currentPeriodStart,
          periodEnd: state.currentPeriodEnd,
          periodKey: ctx.periodKey ?? periodKeyOf(conn.provider, state.externalSubscriptionId, state.currentPeriodStart),
          // The new period replaces the rest of the running one of its own subscription (the provider
          // restarted the cycle: a trial ended early, an interval change) or of a canceled one.
          supersedeBilledKeyPrefixes: supersede,
        },
        tx,
      );
      if (granted) effects.push(granted);
    }
    effects.push(...(await enforceAccess(ctx.actor, accessId, now, tx)));
    return { outcome, projectionId: row?.id, changes, effects };
  }

  return {
    apply,
    grantOnce,
    enforceAccess,

    /**
     * Time-driven rules (grace expiry, a period set to cancel at its end that has ended):
     * run periodically, and by tests with a fixed clock. An archived workspace is read-only:
     * its accesses are left as they are (checked again under the share lock apply takes, as
     * the workspace may be archived between the listing and the transaction).
     */
    async tick(now: Date = clock.now()): Promise<number> {
      const actor = systemActor(BILLING_ACTOR, `tick:${now.toISOString()}`);
      let changed = 0;
      for (const { accessId, workspaceId } of await repo.timeSensitiveAccesses()) {
        const effects = await db.transaction(async (tx) =>
          (await repo.workspaceArchivedForShare(workspaceId, tx)) ? [] : enforceAccess(actor, accessId, now, tx),
        );
        if (effects.some((e) => e.startsWith('access:'))) changed++;
      }
      return changed;
    },
  };
}

export type Projector = ReturnType<typeof createProjector>;

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
import type { Queryable } from '../../db/database.js';
import { isUuid, newId } from '../../ids.js';
import type { Actor } from '../actor.js';
import { bindDeps } from '../bind.js';
import { isSettledRefusal } from './access-port.js';
import type { AccessRef, BillingConnectionRow, ExternalSubscriptionRow } from './billing-repo.js';
import { GRANTING_STATUSES, type SubscriptionState } from './billing-types.js';
import { enforceAccess, grantOnce, tick, type ProjectorDeps } from './projection-effects.js';
import {
  changedColumns,
  isNotOlder,
  periodKeyOf,
  projectionValues,
  subscriptionKeyPrefix,
  type ProjectionValues,
} from './projection-rules.js';

interface ApplyResult {
  outcome: 'applied' | 'stale' | 'ignored';
  ignoredReason?: string;
  projectionId?: string;
  /** Projection fields this state changed (`created` for a new projection). */
  changes: Record<string, { from: unknown; to: unknown }>;
  /** What happened to the access: grants, plan changes, transitions. */
  effects: string[];
}

interface ApplyContext {
  actor: Actor;
  accessIdHint?: string | null;
  /** APP_SYNC reports name their plan and their period's identity themselves. */
  planId?: string;
  periodKey?: string;
}

/** What writing a state did to its projection. */
interface Written {
  row: ExternalSubscriptionRow | undefined;
  outcome: 'applied' | 'stale';
  changes: ApplyResult['changes'];
  planChanged: boolean;
}

const ignored = (reason: string): ApplyResult => ({ outcome: 'ignored', ignoredReason: reason, changes: {}, effects: [] });

/** The access the state is about: the projection's, the state's, or the hint's, if it is of the connection's workspace. */
async function accessOf(
  { repo }: ProjectorDeps,
  conn: BillingConnectionRow,
  accessId: string | null,
  tx: Queryable,
): Promise<AccessRef | null> {
  if (!accessId || !isUuid(accessId)) return null;
  const access = await repo.findAccess(accessId, tx);
  return access && access.workspace_id === conn.workspace_id ? access : null;
}

/** The plan the state sells: the report's, the mapping's, else the projection's while its product and price stay. */
async function planOf(
  { repo }: ProjectorDeps,
  conn: BillingConnectionRow,
  state: SubscriptionState,
  ctx: ApplyContext,
  row: ExternalSubscriptionRow | undefined,
  tx: Queryable,
): Promise<string | null> {
  const mapping = await repo.matchMapping(conn.id, state.externalProductId, state.externalPriceId, tx);
  return (
    ctx.planId ??
    mapping?.plan_id ??
    (row && row.external_price_id === state.externalPriceId && row.external_product_id === state.externalProductId ? row.plan_id : null)
  );
}

/** A state not older than the stored one overwrites it; the first one inserts the projection. */
async function writeProjection(
  { repo }: ProjectorDeps,
  conn: BillingConnectionRow,
  accessId: string,
  state: SubscriptionState,
  values: ProjectionValues,
  row: ExternalSubscriptionRow | undefined,
  now: Date,
  tx: Queryable,
): Promise<Written> {
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
    if (inserted) return { row: inserted, outcome: 'applied', changes: { created: { from: null, to: state.status } }, planChanged: false };
    row = await repo.findProjectionForUpdate(conn.id, state.externalSubscriptionId, tx);
  }
  if (!row || !isNotOlder(state, row)) return { row, outcome: 'stale', changes: {}, planChanged: false };
  const changes = changedColumns(row, values);
  const pastDueSince = state.status === 'past_due' ? (row.status === 'past_due' ? row.past_due_since : state.sourceUpdatedAt) : null;
  const updated = await repo.updateProjection(
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
  return { row: updated, outcome: 'applied', changes, planChanged: 'plan_id' in changes && values.plan_id !== null };
}

/** billing.subscription_changed, when the state changed the projection's status or plan. */
async function announceChange(
  { events }: ProjectorDeps,
  conn: BillingConnectionRow,
  accessId: string,
  state: SubscriptionState,
  { row, outcome, changes, planChanged }: Written,
  tx: Queryable,
): Promise<void> {
  const statusChange = (changes['created'] ?? changes['status']) as { from: string | null } | undefined;
  if (outcome !== 'applied' || !row || !(statusChange || planChanged)) return;
  await events.emit(tx, conn.workspace_id, 'billing.subscription_changed', {
    workspaceAccessId: accessId,
    billingConnectionId: conn.id,
    externalSubscriptionId: state.externalSubscriptionId,
    from: statusChange ? statusChange.from : row.status,
    to: row.status,
  });
}

/** The access moves to the projection's new plan, from `now`. */
async function followPlan(
  { accessPort }: ProjectorDeps,
  actor: Actor,
  access: AccessRef,
  { row, planChanged }: Written,
  now: Date,
  tx: Queryable,
): Promise<string[]> {
  if (!planChanged || !row?.plan_id || access.plan_id === row.plan_id) return [];
  const planId = row.plan_id;
  try {
    await tx.transaction((sp) => accessPort.changePlan(actor, access.id, planId, now, sp));
    return [`plan_changed:${planId}`];
  } catch (err) {
    if (!isSettledRefusal(err)) throw err;
    return [`plan_change_refused:${err.code}`];
  }
}

/** A paid period is granted whatever the state's age: the provider did open it. */
async function grantPaidPeriod(
  deps: ProjectorDeps,
  conn: BillingConnectionRow,
  accessId: string,
  state: SubscriptionState,
  ctx: ApplyContext,
  planId: string | null,
  tx: Queryable,
): Promise<string[]> {
  const { currentPeriodStart, currentPeriodEnd } = state;
  if (!GRANTING_STATUSES.has(state.status) || !currentPeriodStart || !currentPeriodEnd) return [];
  // APP_SYNC reports name their periods themselves: an overlap among them is the reporter's to fix.
  const supersede = ctx.periodKey
    ? undefined
    : [
        subscriptionKeyPrefix(conn.provider, state.externalSubscriptionId),
        ...(await deps.repo.endedProjectionsOf(accessId, tx))
          .filter((p) => p.external_subscription_id !== state.externalSubscriptionId)
          .map((p) => subscriptionKeyPrefix(p.provider, p.external_subscription_id)),
      ];
  const granted = await grantOnce(
    deps,
    ctx.actor,
    conn,
    accessId,
    {
      planId,
      periodStart: currentPeriodStart,
      periodEnd: currentPeriodEnd,
      periodKey: ctx.periodKey ?? periodKeyOf(conn.provider, state.externalSubscriptionId, currentPeriodStart),
      // The new period replaces the rest of the running one of its own subscription (the provider
      // restarted the cycle: a trial ended early, an interval change) or of a canceled one.
      supersedeBilledKeyPrefixes: supersede,
    },
    tx,
  );
  return granted ? [granted] : [];
}

/** Applies one subscription state to its projection, then to the access the projection drives. */
async function apply(
  deps: ProjectorDeps,
  conn: BillingConnectionRow,
  state: SubscriptionState,
  ctx: ApplyContext,
  tx: Queryable,
): Promise<ApplyResult> {
  const { repo, clock } = deps;
  // An archived workspace is read-only: no state applies to it (webhooks, reconciliation, reports).
  // The share lock makes an archive wait for this commit.
  if (await repo.workspaceArchivedForShare(conn.workspace_id, tx)) return ignored('workspace_archived');
  const now = clock.now();
  const row = await repo.findProjectionForUpdate(conn.id, state.externalSubscriptionId, tx);
  const access = await accessOf(deps, conn, row?.workspace_access_id ?? state.accessId ?? ctx.accessIdHint ?? null, tx);
  if (!access) return ignored('unknown_customer');
  const planId = await planOf(deps, conn, state, ctx, row, tx);
  const written = await writeProjection(deps, conn, access.id, state, projectionValues(state, planId), row, now, tx);
  await announceChange(deps, conn, access.id, state, written, tx);
  const effects = [
    ...(await followPlan(deps, ctx.actor, access, written, now, tx)),
    ...(await grantPaidPeriod(deps, conn, access.id, state, ctx, planId, tx)),
    ...(await enforceAccess(deps, ctx.actor, access.id, now, tx)),
  ];
  return { outcome: written.outcome, projectionId: written.row?.id, changes: written.changes, effects };
}

export const createProjector = (deps: ProjectorDeps) => bindDeps(deps, { apply, grantOnce, enforceAccess, tick });

export type Projector = ReturnType<typeof createProjector>;

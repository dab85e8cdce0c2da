/**
 * Workspace users and their accesses: provisioning (idempotent on the external
 * user id), the status machine (access-state.ts), quota periods (provision,
 * renewal, billing grants, plan changes) and the quota snapshot. The *InTx
 * functions take the caller's transaction so billing can compose them.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, systemActor, type Actor, type Clock } from '../actor.js';
import type { AccessChangeReason } from '../events/event-catalogue.js';
import type { Events } from '../events/outbox.js';
import type { AuditService } from '../audit/audit-service.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import type { InferenceKeyService, IssuedKey, IssueKeyInput } from '../inference-keys/inference-key-service.js';
import type { Page, PageRequest } from '../pagination.js';
import type { PlanService } from '../plans/plan-service.js';
import type { PlanRow } from '../plans/plan-types.js';
import { addInterval, splitPeriodForPlanChange } from '../quota/quota-math.js';
import type { QuotaRepo } from '../quota/quota-repo.js';
import type { QuotaService } from '../quota/quota-service.js';
import { limitsOf, type RateService } from '../rate-limits/rate-service.js';
import type { QuotaPeriodRow, QuotaSnapshot } from '../quota/quota-types.js';
import { assertMetadataSize, type WorkspaceService } from '../workspaces/workspace-service.js';
import {
  BILLING_REASON_PREFIX,
  canTransition,
  expiredWhileSuspended,
  heldSuspensionReason,
  isExpiryDue,
  suspensionHolder,
} from './access-state.js';
import type { AccessFilter, AccessRepo } from './access-repo.js';
import type { AccessRow, AccessStatus, AccessView, WorkspaceUserRow } from './access-types.js';

export interface ProvisionInput {
  externalUserId: string;
  email: string;
  name?: string | undefined;
  planId: string;
  metadata?: Record<string, unknown> | undefined;
  issueInferenceKey?: boolean | undefined;
}

export interface ProvisionResult {
  user: WorkspaceUserRow;
  access: AccessView;
  /** False when the user already existed (a repeat). */
  created: boolean;
  key: IssuedKey | null;
  currentPeriod: QuotaPeriodRow | undefined;
}

export interface GrantPeriodInput {
  planId?: string | undefined;
  periodStart: Date;
  periodEnd: Date;
  source: 'renewal' | 'billing';
  externalPeriodKey?: string | undefined;
  /**
   * Billing: a billed period replaces what is left of the unbilled ones it overlaps (the
   * period opened at provisioning, a manual renewal): one that started before it ends where
   * it starts; the first that starts within it is taken over (takeOverPeriod).
   */
  supersedeUnbilled?: boolean;
  /**
   * Billing: key prefixes of the subscriptions whose billed period still running at periodStart
   * ends there: the new period's own subscription (its provider restarted the cycle: a trial
   * ended early, a change of billing interval, `billing_cycle_anchor=now`) and subscriptions of
   * the access that were canceled (a new subscription replaces one that ended early).
   */
  supersedeBilledKeyPrefixes?: string[] | undefined;
}

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

/** The earliest unbilled period among these (a billed one never overlaps another billed one). */
function firstUnbilled(periods: QuotaPeriodRow[]): QuotaPeriodRow | undefined {
  return periods.filter((p) => p.source !== 'billing').sort((a, b) => a.period_start.getTime() - b.period_start.getTime())[0];
}

export function createAccessService(deps: {
  db: Db;
  accessRepo: AccessRepo;
  quotaRepo: QuotaRepo;
  quota: QuotaService;
  rates: RateService;
  plans: PlanService;
  inferenceKeys: InferenceKeyService;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
  changes: ChangeFeed;
  events: Events;
}) {
  const { db, accessRepo, quotaRepo, quota, rates, plans, inferenceKeys, workspaces, audit, clock, changes, events } = deps;

  async function view(accessId: string, q: Queryable): Promise<AccessView> {
    const found = await accessRepo.findView(accessId, q);
    if (!found) throw new AppError('access_not_found', 'Workspace access not found');
    return found;
  }

  /** Locks the access for the rest of the transaction, after the visibility check. */
  async function lockVisible(actor: Actor, accessId: string, tx: Queryable): Promise<AccessRow> {
    const access = await accessRepo.lock(accessId, tx);
    if (!access) throw new AppError('access_not_found', 'Workspace access not found');
    assertVisible(actor, access.workspace_id, 'access_not_found', 'Workspace access');
    return access;
  }

  /** A plan of the access's workspace that new periods may use. */
  async function activePlanOf(actor: Actor, workspaceId: string, planId: string, tx: Queryable): Promise<PlanRow> {
    const plan = await plans.loadPlan(actor, planId, tx).catch((err: unknown) => {
      if (err instanceof AppError && err.code === 'plan_not_found')
        throw new AppError('plan_not_found', 'Plan not found', { param: 'planId' });
      throw err;
    });
    if (plan.workspace_id !== workspaceId) throw new AppError('plan_not_found', 'Plan not found in this workspace', { param: 'planId' });
    if (plan.status !== 'ACTIVE') {
      throw new AppError('plan_not_active', 'The plan is not ACTIVE; publish it first', { param: 'planId', current_status: plan.status });
    }
    return plan;
  }

  async function inForce(plan: PlanRow, at: Date, tx: Queryable) {
    const found = await plans.strategyInForce(plan.id, at, tx);
    if (!found) {
      throw new AppError('strategy_not_in_force', `Plan '${plan.key}' has no quota strategy in force at ${at.toISOString()}`, {
        param: 'planId',
      });
    }
    return found.strategy;
  }

  async function setStatus(actor: Actor, access: AccessRow, to: AccessStatus, reason: string | undefined, tx: Queryable): Promise<void> {
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
  async function expireIfDue(access: AccessRow, tx: Queryable): Promise<void> {
    const now = clock.now();
    const last = await quotaRepo.latestPeriod(access.id, tx);
    if (isExpiryDue(access, last?.period_end, now)) {
      const cause = access.access_ends_at && access.access_ends_at <= now ? 'access_ended' : 'period_ended';
      await setStatus(systemActor(EXPIRY_ACTOR), access, 'EXPIRED', cause, tx);
    }
  }

  async function insertPeriod(
    access: { id: string; workspace_id: string },
    values: Pick<QuotaPeriodRow, 'plan_id' | 'quota_strategy_id' | 'period_start' | 'period_end' | 'granted_units' | 'source'> & {
      external_period_key?: string | null;
      cycle_start?: Date;
    },
    tx: Queryable,
  ): Promise<QuotaPeriodRow> {
    return quotaRepo.insertPeriod(
      {
        id: newId(),
        workspace_id: access.workspace_id,
        workspace_access_id: access.id,
        reserved_units: 0n,
        consumed_units: 0n,
        created_at: clock.now(),
        ...values,
        external_period_key: values.external_period_key ?? null,
        cycle_start: values.cycle_start ?? values.period_start,
      },
      tx,
    );
  }

  /** Opens the first period [now, now + resetInterval) from the plan's strategy in force now. */
  async function openFirstPeriod(access: AccessRow, plan: PlanRow, tx: Queryable): Promise<QuotaPeriodRow> {
    const now = clock.now();
    const strategy = await inForce(plan, now, tx);
    return insertPeriod(
      access,
      {
        plan_id: plan.id,
        quota_strategy_id: strategy.id,
        period_start: now,
        period_end: addInterval(now, strategy.reset_interval),
        granted_units: strategy.quota_units,
        source: 'provision',
      },
      tx,
    );
  }

  /**
   * What a renewal makes of an access that expired while suspended: SUSPENDED again, with
   * its suspension's own reason (a billing suspension stays billing's to lift); else ACTIVE.
   */
  function restoredByRenewal(access: AccessRow): [AccessStatus, string] {
    const suspension = access.status === 'EXPIRED' ? heldSuspensionReason(access) : null;
    return suspension === null ? ['ACTIVE', 'renewed'] : ['SUSPENDED', suspension || 'renewed'];
  }

  async function transitionInTx(
    actor: Actor,
    accessId: string,
    to: AccessStatus,
    reason: string | undefined,
    tx: Queryable,
  ): Promise<AccessRow> {
    const access = await lockVisible(actor, accessId, tx);
    await expireIfDue(access, tx);
    if (access.status === to) return access;
    if (!canTransition(access.status, to)) {
      throw new AppError('illegal_transition', `A ${access.status} access cannot become ${to}`, { current_status: access.status });
    }
    if (to === 'ACTIVE') {
      const now = clock.now();
      if (access.access_ends_at && access.access_ends_at <= now) {
        throw new AppError('illegal_transition', 'The access has ended (accessEndsAt passed)', { current_status: access.status });
      }
      const current = await quotaRepo.currentPeriod(access.id, now, tx);
      if (!current) {
        if (access.status !== 'PENDING') {
          throw new AppError('illegal_transition', 'The access has no quota period covering now; renew it instead', {
            current_status: access.status,
          });
        }
        const plan = await activePlanOf(actor, access.workspace_id, access.plan_id, tx);
        await openFirstPeriod(access, plan, tx);
      }
    }
    await setStatus(actor, access, to, reason, tx);
    return access;
  }

  /**
   * Billing's way to ACTIVE: it lifts a suspension billing made, never an administrator's
   * (only activateWorkspaceAccess lifts that). An access that expired while an administrator's
   * suspension held it becomes SUSPENDED again once a period covers now, as a renewal makes it.
   * Returns the status the access is left in.
   */
  async function resumeForBillingInTx(actor: Actor, accessId: string, reason: string, tx: Queryable): Promise<AccessStatus> {
    const access = await lockVisible(actor, accessId, tx);
    await expireIfDue(access, tx);
    if (suspensionHolder(access) !== 'admin') return (await transitionInTx(actor, accessId, 'ACTIVE', reason, tx)).status;
    const now = clock.now();
    const ended = access.access_ends_at !== null && access.access_ends_at <= now;
    if (access.status === 'EXPIRED' && !ended && (await quotaRepo.currentPeriod(access.id, now, tx))) {
      await setStatus(actor, access, ...restoredByRenewal(access), tx);
    }
    return access.status;
  }

  /**
   * A billed period takes over an unbilled one that starts within it (the period opened
   * at provisioning, when the billed period started earlier or in the same second): the
   * row itself becomes the billed period, so what it consumed counts against the billed
   * grant and the calls in flight on its leases settle there (docs/decisions.md "External billing").
   */
  async function takeOverPeriod(
    unbilled: QuotaPeriodRow,
    values: Pick<QuotaPeriodRow, 'plan_id' | 'quota_strategy_id' | 'period_start' | 'period_end' | 'granted_units' | 'external_period_key'>,
    tx: Queryable,
  ): Promise<QuotaPeriodRow> {
    return quotaRepo.updatePeriod(unbilled.id, { ...values, source: 'billing', cycle_start: values.period_start }, tx);
  }

  async function grantPeriodInTx(
    actor: Actor,
    accessId: string,
    input: GrantPeriodInput,
    tx: Queryable,
  ): Promise<{ periodId: string; created: boolean }> {
    const access = await lockVisible(actor, accessId, tx);
    if (access.status === 'REVOKED') {
      throw new AppError('illegal_transition', 'A REVOKED access gets no new periods', { current_status: access.status });
    }
    const { periodStart, periodEnd } = input;
    if (!(periodEnd > periodStart)) throw new AppError('invalid_parameter', 'periodEnd must be after periodStart', { param: 'periodEnd' });
    const planId = input.planId ?? access.plan_id;

    if (input.externalPeriodKey) {
      const byKey = await quotaRepo.findPeriodByExternalKey(access.id, input.externalPeriodKey, tx);
      if (byKey) return { periodId: byKey.id, created: false };
    }
    const same = await quotaRepo.findPeriodByStart(access.id, periodStart, tx);
    if (same && same.period_end.getTime() === periodEnd.getTime() && same.plan_id === planId) {
      return { periodId: same.id, created: false };
    }
    if (input.supersedeUnbilled) await quotaRepo.endUnbilledPeriodsAt(access.id, periodStart, tx);
    for (const prefix of input.supersedeBilledKeyPrefixes ?? []) await quotaRepo.endBilledPeriodsAt(access.id, periodStart, prefix, tx);
    const overlapping = await quotaRepo.overlapping(access.id, periodStart, periodEnd, tx);
    // What is left overlapping of an unbilled period starts at or after periodStart: the first is taken over.
    const takenOver = input.supersedeUnbilled ? firstUnbilled(overlapping) : undefined;
    const others = overlapping.filter((p) => p !== takenOver);
    if (others.length > 0) {
      const other = others[0]!;
      throw new AppError('period_overlap', `The period overlaps [${other.period_start.toISOString()}, ${other.period_end.toISOString()})`, {
        param: 'periodStart',
      });
    }
    const plan = await activePlanOf(actor, access.workspace_id, planId, tx);
    const strategy = await inForce(plan, periodStart, tx);
    const values = {
      plan_id: plan.id,
      quota_strategy_id: strategy.id,
      period_start: periodStart,
      period_end: periodEnd,
      granted_units: strategy.quota_units,
      external_period_key: input.externalPeriodKey ?? null,
    };
    const period = takenOver
      ? await takeOverPeriod(takenOver, values, tx)
      : await insertPeriod(access, { ...values, source: input.source }, tx);
    await changes.announce({ kind: 'access', id: access.id }, tx);
    const latest = await quotaRepo.latestPeriod(access.id, tx);
    if (plan.id !== access.plan_id && latest?.id === period.id) {
      await accessRepo.update(access.id, { plan_id: plan.id, updated_at: clock.now() }, tx);
    }
    await audit.record(
      actor,
      {
        action: 'access.period_granted',
        resourceType: 'workspace_access',
        resourceId: access.id,
        workspaceId: access.workspace_id,
        changes: {
          periodId: period.id,
          planId: plan.id,
          quotaStrategyId: strategy.id,
          periodStart: periodStart.toISOString(),
          periodEnd: periodEnd.toISOString(),
          grantedUnits: strategy.quota_units,
          source: input.source,
          ...(input.externalPeriodKey ? { externalPeriodKey: input.externalPeriodKey } : {}),
          ...(takenOver
            ? {
                tookOverPeriod: {
                  source: takenOver.source,
                  periodStart: takenOver.period_start.toISOString(),
                  periodEnd: takenOver.period_end.toISOString(),
                  grantedUnits: takenOver.granted_units,
                  consumedUnits: period.consumed_units,
                  reservedUnits: period.reserved_units,
                },
              }
            : {}),
        },
      },
      tx,
    );
    return { periodId: period.id, created: true };
  }

  /**
   * When a plan change may take effect (docs/decisions.md "Changing plan"), else 400
   * invalid_parameter on effectiveAt: not before the access starts; in a period, only
   * one that has not ended; outside every period, only in a gap that is not over, i.e.
   * no later period has started by now (the gap still running, one to come, or an access
   * with no period yet). A gap that is over would leave the periods after it on the old
   * plan while the access names the new one. (A past instant in the gap still running
   * changes nothing that `now` would not: the default effectiveAt, read before the
   * access's lock was taken, is such an instant.)
   */
  async function assertEffectiveAt(access: AccessRow, period: QuotaPeriodRow | undefined, effectiveAt: Date, now: Date, tx: Queryable) {
    if (effectiveAt < access.access_starts_at) {
      throw new AppError('invalid_parameter', `effectiveAt lies before the access starts (${access.access_starts_at.toISOString()})`, {
        param: 'effectiveAt',
      });
    }
    if (period) {
      if (period.period_end <= now) {
        throw new AppError('invalid_parameter', 'effectiveAt lies in a quota period that has already ended', { param: 'effectiveAt' });
      }
      return;
    }
    const later = await quotaRepo.firstPeriodAfter(access.id, effectiveAt, tx);
    if (later && later.period_start <= now) {
      throw new AppError(
        'invalid_parameter',
        `effectiveAt lies in the past outside any quota period (a later period started at ${later.period_start.toISOString()})`,
        { param: 'effectiveAt' },
      );
    }
  }

  /**
   * Moves the access to another plan at `effectiveAt` (docs/decisions.md
   * "Changing plan"): the period covering effectiveAt is split there; the old
   * part keeps the old plan's prorated share (never less than what it used),
   * the new part [effectiveAt, periodEnd) gets the new plan's prorated share
   * minus what was used beyond the old share. The old part remembers its share
   * and that carry, so what its holds (a lease's unused units, a call's unused
   * bound) give back later returns to the new part (quotaRepo.giveBackCarry).
   * effectiveAt may not precede the access's start, nor lie in a period or a gap
   * between periods that is already over (assertEffectiveAt).
   */
  async function changePlanInTx(actor: Actor, accessId: string, planId: string, effectiveAt: Date, tx: Queryable): Promise<AccessRow> {
    const access = await lockVisible(actor, accessId, tx);
    await expireIfDue(access, tx);
    if (access.status === 'REVOKED') {
      throw new AppError('illegal_transition', 'A REVOKED access cannot change plan', { current_status: access.status });
    }
    const plan = await activePlanOf(actor, access.workspace_id, planId, tx);
    const now = clock.now();
    const period = await quotaRepo.currentPeriod(access.id, effectiveAt, tx);
    // Already on that plan: the access, and the period running at effectiveAt (a renewal or a change
    // scheduled later may have moved the access's plan while this period is still on the old one).
    if (plan.id === access.plan_id && (!period || period.plan_id === plan.id)) return access;
    await assertEffectiveAt(access, period, effectiveAt, now, tx);
    let split: Record<string, unknown> = {};
    if (period) {
      const strategy = await inForce(plan, effectiveAt, tx);
      // A part an earlier change split off still owes what it was charged for the part before it
      // (that part's carried_units): the split reckons in gross terms (grant and use with that debt), so
      // switching back and forth never forgives it. The part before is locked first, as giveBackCarry does.
      const debt = await quotaRepo.carriedInto(period, tx);
      const locked = (await quotaRepo.findPeriodForUpdate(period.id, tx))!;
      const used = locked.consumed_units + locked.reserved_units;
      const result = splitPeriodForPlanChange({
        cycleStart: locked.cycle_start,
        periodStart: locked.period_start,
        periodEnd: locked.period_end,
        effectiveAt,
        oldGranted: locked.granted_units + debt,
        oldUsed: used + debt,
        newQuotaUnits: strategy.quota_units,
      });
      if (effectiveAt.getTime() === locked.period_start.getTime()) {
        // The whole period moves to the new plan: nothing of the old one was owed (but the debt stays).
        const granted = result.newGranted + used;
        await quotaRepo.updatePeriod(locked.id, { plan_id: plan.id, quota_strategy_id: strategy.id, granted_units: granted }, tx);
        split = { periodId: locked.id, grantedUnits: granted };
      } else {
        // Stored net of the debt, as the part's own grant and share (giveBackCarry compares them with its own use).
        await quotaRepo.updatePeriod(
          locked.id,
          {
            period_end: effectiveAt,
            granted_units: result.oldGranted - debt,
            share_units: result.oldShare - debt,
            carried_units: result.carried,
          },
          tx,
        );
        const next = await insertPeriod(
          access,
          {
            plan_id: plan.id,
            quota_strategy_id: strategy.id,
            period_start: effectiveAt,
            period_end: locked.period_end,
            granted_units: result.newGranted,
            source: 'plan_change',
            cycle_start: locked.cycle_start,
          },
          tx,
        );
        split = {
          endedPeriodId: locked.id,
          endedPeriodGrantedUnits: result.oldGranted - debt,
          newPeriodId: next.id,
          newPeriodGrantedUnits: result.newGranted,
          carriedUnits: result.carried,
        };
      }
    }
    await accessRepo.update(access.id, { plan_id: plan.id, updated_at: now }, tx);
    await changes.announce({ kind: 'access', id: access.id }, tx);
    await audit.record(
      actor,
      {
        action: 'access.plan_changed',
        resourceType: 'workspace_access',
        resourceId: access.id,
        workspaceId: access.workspace_id,
        changes: { fromPlanId: access.plan_id, planId: plan.id, effectiveAt: effectiveAt.toISOString(), ...split },
      },
      tx,
    );
    access.plan_id = plan.id;
    return access;
  }

  /** The expiry sweep: accesses whose end or last period has passed become EXPIRED. */
  async function expireDue(workspaceId?: string): Promise<number> {
    return db.transaction(async (tx) => {
      const due = await accessRepo.dueForExpiry(clock.now(), workspaceId, tx);
      for (const access of due) await expireIfDue(access, tx);
      return due.length;
    });
  }

  return {
    transitionInTx,
    resumeForBillingInTx,
    grantPeriodInTx,
    changePlanInTx,

    async provision(actor: Actor, workspaceId: string, input: ProvisionInput): Promise<ProvisionResult> {
      assertMetadataSize(input.metadata);
      return db.transaction(async (tx) => {
        await workspaces.requireWritable(actor, workspaceId, tx);
        // A repeat ignores planId (docs/decisions.md), so only a new user's plan is checked.
        const known = await accessRepo.findUserByExternalId(workspaceId, input.externalUserId, tx);
        const plan = known ? null : await activePlanOf(actor, workspaceId, input.planId, tx);
        const now = clock.now();
        const inserted = known
          ? null
          : await accessRepo.insertUserIfAbsent(
              {
                id: newId(),
                workspace_id: workspaceId,
                external_user_id: input.externalUserId,
                email: input.email,
                name: input.name ?? null,
                metadata: input.metadata ?? {},
                created_at: now,
              },
              tx,
            );
        let user: WorkspaceUserRow;
        let access: AccessView;
        if (!inserted || !plan) {
          // A repeat: the same user and access, nothing granted again (a new user always has its plan).
          user = (await accessRepo.findUserByExternalId(workspaceId, input.externalUserId, tx))!;
          const locked = (await accessRepo.lock((await accessRepo.findViewByUser(user.id, tx))!.id, tx))!;
          await expireIfDue(locked, tx);
          access = (await accessRepo.findViewByUser(user.id, tx))!;
        } else {
          user = inserted;
          const row = await accessRepo.insertAccess(
            {
              id: newId(),
              workspace_id: workspaceId,
              user_id: user.id,
              plan_id: plan.id,
              status: 'ACTIVE',
              access_starts_at: now,
              access_ends_at: null,
              metadata: input.metadata ?? {},
              status_reason: null,
              created_at: now,
              updated_at: now,
            },
            tx,
          );
          const period = await openFirstPeriod(row, plan, tx);
          await audit.record(
            actor,
            {
              action: 'access.provisioned',
              resourceType: 'workspace_access',
              resourceId: row.id,
              workspaceId,
              changes: {
                userId: user.id,
                externalUserId: input.externalUserId,
                planId: plan.id,
                periodId: period.id,
                grantedUnits: period.granted_units,
              },
            },
            tx,
          );
          access = await view(row.id, tx);
        }
        let key: IssuedKey | null = null;
        if (input.issueInferenceKey) {
          if (access.status === 'REVOKED') {
            throw new AppError('illegal_transition', 'A REVOKED access gets no new keys', { current_status: access.status });
          }
          key = await inferenceKeys.issueInTx(actor, access, {}, tx);
        }
        const currentPeriod = await quotaRepo.currentPeriod(access.id, clock.now(), tx);
        return { user, access, created: Boolean(inserted), key, currentPeriod };
      });
    },

    /** Expires what is due in the workspace, then lists (filters: status, plan, externalUserId). */
    async list(actor: Actor, workspaceId: string, filter: Omit<AccessFilter, 'workspaceId'>): Promise<Page<AccessView>> {
      await workspaces.get(actor, workspaceId);
      await expireDue(workspaceId);
      return accessRepo.list({ ...filter, workspaceId });
    },

    async get(actor: Actor, accessId: string): Promise<AccessView> {
      const found = await view(accessId, db);
      assertVisible(actor, found.workspace_id, 'access_not_found', 'Workspace access');
      const last = await quotaRepo.latestPeriod(accessId);
      if (!isExpiryDue(found, last?.period_end, clock.now())) return found;
      // Due: apply the expiry under the row lock, then read again.
      return db.transaction(async (tx) => {
        await expireIfDue(await lockVisible(actor, accessId, tx), tx);
        return view(accessId, tx);
      });
    },

    async activate(actor: Actor, accessId: string): Promise<AccessView> {
      return db.transaction(async (tx) => {
        const access = await lockVisible(actor, accessId, tx);
        await workspaces.requireWritable(actor, access.workspace_id, tx);
        await transitionInTx(actor, accessId, 'ACTIVE', undefined, tx);
        return view(accessId, tx);
      });
    },

    async suspend(actor: Actor, accessId: string): Promise<AccessView> {
      return db.transaction(async (tx) => {
        const access = await lockVisible(actor, accessId, tx);
        await workspaces.requireWritable(actor, access.workspace_id, tx);
        const suspended = await transitionInTx(actor, accessId, 'SUSPENDED', undefined, tx);
        // Suspending what billing suspended makes the suspension the administrator's: billing's recovery no longer lifts it.
        if (suspensionHolder(suspended) === 'billing') await setStatus(actor, suspended, 'SUSPENDED', undefined, tx);
        return view(accessId, tx);
      });
    },

    /**
     * The next period [periodStart, periodEnd) from the plan's strategy in force
     * at periodStart. The same period again is a no-op; an overlapping one is
     * refused. PENDING and EXPIRED accesses with a period still to come become ACTIVE.
     */
    async renew(actor: Actor, accessId: string, input: { planId: string; periodStart: Date; periodEnd: Date }): Promise<AccessView> {
      return db.transaction(async (tx) => {
        const access = await lockVisible(actor, accessId, tx);
        await workspaces.requireWritable(actor, access.workspace_id, tx);
        await expireIfDue(access, tx);
        if (access.status === 'REVOKED') {
          throw new AppError('illegal_transition', 'A REVOKED access cannot be renewed', { current_status: access.status });
        }
        await grantPeriodInTx(actor, accessId, { ...input, source: 'renewal' }, tx);
        const now = clock.now();
        const last = await quotaRepo.latestPeriod(accessId, tx);
        const ended = access.access_ends_at !== null && access.access_ends_at <= now;
        if ((access.status === 'EXPIRED' || access.status === 'PENDING') && last && last.period_end > now && !ended) {
          await setStatus(actor, access, ...restoredByRenewal(access), tx);
        }
        return view(accessId, tx);
      });
    },

    async changePlan(actor: Actor, accessId: string, input: { planId: string; effectiveAt?: Date | undefined }): Promise<AccessView> {
      return db.transaction(async (tx) => {
        const access = await lockVisible(actor, accessId, tx);
        await workspaces.requireWritable(actor, access.workspace_id, tx);
        await changePlanInTx(actor, accessId, input.planId, input.effectiveAt ?? clock.now(), tx);
        return view(accessId, tx);
      });
    },

    async quotaSnapshot(actor: Actor, accessId: string): Promise<QuotaSnapshot> {
      const access = await view(accessId, db);
      assertVisible(actor, access.workspace_id, 'access_not_found', 'Workspace access');
      const now = clock.now();
      const snapshot = await quota.snapshot(accessId, now);
      if (!snapshot) throw new AppError('quota_period_not_found', 'The access has no quota period covering now');
      // The limits of the access's plan (the one new calls run on), where they stand now.
      const plan = await plans.loadPlan(actor, access.plan_id);
      const state = await rates.state(accessId, limitsOf(plan), now);
      return state ? { ...snapshot, rateLimits: state } : snapshot;
    },

    async issueKey(actor: Actor, accessId: string, input: IssueKeyInput): Promise<IssuedKey> {
      return db.transaction(async (tx) => {
        const access = await lockVisible(actor, accessId, tx);
        await workspaces.requireWritable(actor, access.workspace_id, tx);
        if (access.status === 'REVOKED') {
          throw new AppError('illegal_transition', 'A REVOKED access gets no new keys', { current_status: access.status });
        }
        return inferenceKeys.issueInTx(actor, access, input, tx);
      });
    },

    async listKeys(actor: Actor, accessId: string, page: PageRequest) {
      const access = await view(accessId, db);
      assertVisible(actor, access.workspace_id, 'access_not_found', 'Workspace access');
      return inferenceKeys.list(accessId, page);
    },

    getKey: (actor: Actor, keyId: string) => inferenceKeys.get(actor, keyId),

    async revokeKey(actor: Actor, accessId: string, keyId: string): Promise<void> {
      await db.transaction(async (tx) => {
        const access = await lockVisible(actor, accessId, tx);
        await workspaces.requireWritable(actor, access.workspace_id, tx);
        await inferenceKeys.revokeInTx(actor, access, keyId, tx);
      });
    },

    expireDue,
  };
}

export type AccessService = ReturnType<typeof createAccessService>;

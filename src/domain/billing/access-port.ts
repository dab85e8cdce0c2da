/**
 * What billing asks of the accesses area, in one place: the transitions, plan
 * changes and period grants that a subscription's state drives, each inside the
 * caller's transaction (composed with the projection write).
 */
import type { Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import type { Actor } from '../actor.js';
import type { AccessService } from '../accesses/access-service.js';
import { canTransition as canMove } from '../accesses/access-state.js';
import type { AccessStatus } from '../accesses/access-types.js';
import { bindDeps } from '../bind.js';
import type { AccessRef } from './billing-repo.js';

export type AccessStatusTarget = 'ACTIVE' | 'SUSPENDED' | 'EXPIRED' | 'REVOKED';

interface GrantInput {
  planId: string | null;
  periodStart: Date;
  periodEnd: Date;
  externalPeriodKey: string;
  /** Provider subscriptions' key prefixes: their billed period still running at periodStart ends there. */
  supersedeBilledKeyPrefixes?: string[] | undefined;
}

function canTransition(_accesses: AccessService, from: AccessRef['status'], to: AccessStatusTarget): boolean {
  return from === to || canMove(from, to);
}

/**
 * Returns the status the access is left in. To ACTIVE, billing lifts only a suspension it
 * made itself (reason 'billing:...'): an administrator's suspension stays (resumeForBillingInTx).
 */
async function transition(
  accesses: AccessService,
  actor: Actor,
  accessId: string,
  to: AccessStatusTarget,
  reason: string,
  tx: Queryable,
): Promise<AccessStatus> {
  if (to === 'ACTIVE') return accesses.resumeForBillingInTx(actor, accessId, reason, tx);
  return (await accesses.transitionInTx(actor, accessId, to, reason, tx)).status;
}

async function changePlan(
  accesses: AccessService,
  actor: Actor,
  accessId: string,
  planId: string,
  effectiveAt: Date,
  tx: Queryable,
): Promise<void> {
  await accesses.changePlanInTx(actor, accessId, planId, effectiveAt, tx);
}

/**
 * A billed period replaces what is left of the unbilled ones it overlaps (see supersedeUnbilled).
 * Billed periods never overlap each other: a new period that starts within the running one of
 * its own subscription (a restarted cycle) or of a canceled one ends that one there; any other
 * overlap (two live subscriptions) is refused by the accesses area ('period_overlap').
 */
async function grantPeriod(
  accesses: AccessService,
  actor: Actor,
  accessId: string,
  input: GrantInput,
  tx: Queryable,
): Promise<{ periodId: string; created: boolean }> {
  return accesses.grantPeriodInTx(
    actor,
    accessId,
    {
      ...(input.planId ? { planId: input.planId } : {}),
      periodStart: input.periodStart,
      periodEnd: input.periodEnd,
      source: 'billing',
      externalPeriodKey: input.externalPeriodKey,
      supersedeUnbilled: true,
      supersedeBilledKeyPrefixes: input.supersedeBilledKeyPrefixes,
    },
    tx,
  );
}

export const createAccessPort = (accesses: AccessService) => bindDeps(accesses, { canTransition, transition, changePlan, grantPeriod });

export type AccessPort = ReturnType<typeof createAccessPort>;

/**
 * Refusals of the accesses area that retrying the same state cannot change (the access's
 * state machine, an overlapping period). Others (a plan not published, no strategy in
 * force) are configuration the operator can fix: the event fails and can be replayed.
 */
export function isSettledRefusal(err: unknown): err is AppError {
  return err instanceof AppError && ['illegal_transition', 'period_overlap', 'invalid_parameter'].includes(err.code);
}

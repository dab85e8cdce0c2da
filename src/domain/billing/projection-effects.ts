/**
 * What projections drive on their access: a paid period's quota granted once, and the access
 * moved to the best status its projections ask for (after each state applied, and by the
 * periodic pass as time alone moves it: a grace ending, a period set to cancel ending).
 */
import type { Db, Queryable } from '../../db/database.js';
import { newId } from '../../ids.js';
import type { Logger } from '../../observability/logger.js';
import { systemActor, type Actor, type Clock } from '../actor.js';
import { BILLING_REASON_PREFIX } from '../accesses/access-state.js';
import type { Events } from '../events/outbox.js';
import { isSettledRefusal, type AccessPort } from './access-port.js';
import type { BillingConnectionRow, BillingRepo } from './billing-repo.js';
import { BILLING_ACTOR, bestAccessStatus } from './projection-rules.js';

/** What the projector reads and writes through. */
export interface ProjectorDeps {
  db: Db;
  repo: BillingRepo;
  accessPort: AccessPort;
  clock: Clock;
  /** How long past_due keeps an access ACTIVE. */
  graceMs: number;
  logger: Logger;
  events: Events;
}

interface PeriodToGrant {
  planId: string | null;
  periodStart: Date;
  periodEnd: Date;
  periodKey: string;
  supersedeBilledKeyPrefixes?: string[] | undefined;
}

/** Grants a period's quota unless its unique grant row exists already. */
export async function grantOnce(
  { repo, accessPort, clock, logger }: ProjectorDeps,
  actor: Actor,
  conn: BillingConnectionRow,
  accessId: string,
  input: PeriodToGrant,
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
    logger.warn({ msg: 'billing period grant refused', accessId, periodKey: input.periodKey, code: err.code });
    return `period_refused:${err.code}`;
  }
}

/** Moves the access to the best status its projections ask for. */
export async function enforceAccess(
  { repo, accessPort, graceMs }: ProjectorDeps,
  actor: Actor,
  accessId: string,
  now: Date,
  tx: Queryable,
): Promise<string[]> {
  const access = await repo.findAccess(accessId, tx);
  if (!access || access.status === 'REVOKED') return [];
  const best = bestAccessStatus(await repo.projectionsOf(accessId, tx), now, graceMs);
  if (!best || best.desired === access.status) return [];
  const { desired, because } = best;
  if (!accessPort.canTransition(access.status, desired)) return [`transition_skipped:${access.status}->${desired}`];
  try {
    const reason = `${BILLING_REASON_PREFIX}${because.status}`;
    const reached = await tx.transaction((sp) => accessPort.transition(actor, accessId, desired, reason, sp));
    // Short of ACTIVE: an administrator's suspension holds the access, billing does not lift it
    // (unchanged is no effect, so a reconciliation that finds it so again changes nothing).
    return reached === access.status ? [] : [`access:${access.status}->${reached}`];
  } catch (err) {
    if (!isSettledRefusal(err)) throw err;
    return [`transition_refused:${access.status}->${desired}:${err.code}`];
  }
}

/**
 * Time-driven rules (grace expiry, a period set to cancel at its end that has ended):
 * run periodically, and by tests with a fixed clock. An archived workspace is read-only:
 * its accesses are left as they are (checked again under the share lock apply takes, as
 * the workspace may be archived between the listing and the transaction).
 */
export async function tick(deps: ProjectorDeps, now: Date = deps.clock.now()): Promise<number> {
  const { db, repo } = deps;
  const actor = systemActor(BILLING_ACTOR, `tick:${now.toISOString()}`);
  let changed = 0;
  for (const { accessId, workspaceId } of await repo.timeSensitiveAccesses()) {
    const effects = await db.transaction(async (tx) =>
      (await repo.workspaceArchivedForShare(workspaceId, tx)) ? [] : enforceAccess(deps, actor, accessId, now, tx),
    );
    if (effects.some((e) => e.startsWith('access:'))) changed++;
  }
  return changed;
}

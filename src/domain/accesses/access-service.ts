/**
 * Workspace users and their accesses: provisioning (idempotent on the external
 * user id, access-provision.ts), the status machine (access-state.ts, access-status.ts),
 * quota periods (renewal and billing grants in access-periods.ts, plan changes in
 * access-plan-change.ts, the periods themselves in quota/period-ledger.ts), and here the
 * reads, the quota snapshot and the access's keys. The *InTx functions take the caller's
 * transaction so billing can compose them. createAccessService binds them all.
 */
import { AppError } from '../../errors.js';
import { assertVisible, type Actor } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { IssuedKey, IssueKeyInput } from '../inference-keys/inference-key-service.js';
import type { Page, PageRequest } from '../pagination.js';
import { limitsOf } from '../rate-limits/rate-service.js';
import type { QuotaSnapshot } from '../quota/quota-types.js';
import { lockVisible, view, type AccessDeps } from './access-common.js';
import { grantPeriodInTx, grantUnits as grantUnitsInPeriod, renew } from './access-periods.js';
import { changePlan, changePlanInTx } from './access-plan-change.js';
import { provision } from './access-provision.js';
import type { AccessFilter } from './access-repo.js';
import { isExpiryDue } from './access-state.js';
import { activate, expireDue, expireIfDue, resumeForBillingInTx, suspend, transitionInTx } from './access-status.js';
import type { AccessView } from './access-types.js';

export type { ProvisionResult } from './access-provision.js';

/** Expires what is due in the workspace, then lists (filters: status, plan, externalUserId, email; sort). */
async function list(
  deps: AccessDeps,
  actor: Actor,
  workspaceId: string,
  filter: Omit<AccessFilter, 'workspaceId'>,
): Promise<Page<AccessView>> {
  await deps.workspaces.get(actor, workspaceId);
  await expireDue(deps, workspaceId);
  return deps.accessRepo.list({ ...filter, workspaceId, at: deps.clock.now() });
}

async function get(deps: AccessDeps, actor: Actor, accessId: string): Promise<AccessView> {
  const { db, quotaRepo, clock } = deps;
  const found = await view(deps, accessId, db);
  assertVisible(actor, found.workspace_id, 'access_not_found', 'Workspace access');
  const last = await quotaRepo.latestPeriod(accessId);
  if (!isExpiryDue(found, last?.period_end, clock.now())) return found;
  // Due: apply the expiry under the row lock, then read again.
  return db.transaction(async (tx) => {
    await expireIfDue(deps, await lockVisible(deps, actor, accessId, tx), tx);
    return view(deps, accessId, tx);
  });
}

async function quotaSnapshot(deps: AccessDeps, actor: Actor, accessId: string): Promise<QuotaSnapshot> {
  const { db, quota, plans, rates, clock } = deps;
  const access = await view(deps, accessId, db);
  assertVisible(actor, access.workspace_id, 'access_not_found', 'Workspace access');
  const now = clock.now();
  const snapshot = await quota.snapshot(accessId, now);
  if (!snapshot) throw new AppError('quota_period_not_found', 'The access has no quota period covering now');
  // The limits of the access's plan (the one new calls run on), where they stand now.
  const plan = await plans.loadPlan(actor, access.plan_id);
  const state = await rates.state(accessId, limitsOf(plan), now);
  return state ? { ...snapshot, rateLimits: state } : snapshot;
}

/** A top-up of the period running now; the snapshot after it. */
async function grantUnits(deps: AccessDeps, actor: Actor, accessId: string, input: { units: bigint; reason?: string | undefined }) {
  await grantUnitsInPeriod(deps, actor, accessId, input);
  return quotaSnapshot(deps, actor, accessId);
}

async function issueKey(deps: AccessDeps, actor: Actor, accessId: string, input: IssueKeyInput): Promise<IssuedKey> {
  return deps.db.transaction(async (tx) => {
    const access = await lockVisible(deps, actor, accessId, tx);
    await deps.workspaces.requireWritable(actor, access.workspace_id, tx);
    if (access.status === 'REVOKED') {
      throw new AppError('illegal_transition', 'A REVOKED access gets no new keys', { current_status: access.status });
    }
    return deps.inferenceKeys.issueInTx(actor, access, input, tx);
  });
}

async function listKeys(deps: AccessDeps, actor: Actor, accessId: string, page: PageRequest) {
  const access = await view(deps, accessId, deps.db);
  assertVisible(actor, access.workspace_id, 'access_not_found', 'Workspace access');
  return deps.inferenceKeys.list(accessId, page);
}

function getKey({ inferenceKeys }: AccessDeps, actor: Actor, keyId: string) {
  return inferenceKeys.get(actor, keyId);
}

async function revokeKey(deps: AccessDeps, actor: Actor, accessId: string, keyId: string): Promise<void> {
  await deps.db.transaction(async (tx) => {
    const access = await lockVisible(deps, actor, accessId, tx);
    await deps.workspaces.requireWritable(actor, access.workspace_id, tx);
    await deps.inferenceKeys.revokeInTx(actor, access, keyId, tx);
  });
}

export const createAccessService = (deps: AccessDeps) =>
  bindDeps(deps, {
    transitionInTx,
    resumeForBillingInTx,
    grantPeriodInTx,
    changePlanInTx,
    provision,
    list,
    get,
    activate,
    suspend,
    renew,
    changePlan,
    quotaSnapshot,
    grantUnits,
    issueKey,
    listKeys,
    getKey,
    revokeKey,
    expireDue,
  });

export type AccessService = ReturnType<typeof createAccessService>;

/**
 * Provisioning a workspace user and its access, idempotent on the external user id: a
 * new user gets an ACTIVE access on its plan with the first period open; a repeat
 * returns the same user and access, granting nothing again.
 */
import type { Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import type { Actor } from '../actor.js';
import type { IssuedKey } from '../inference-keys/inference-key-service.js';
import type { PlanRow } from '../plans/plan-types.js';
import type { QuotaPeriodRow } from '../quota/quota-types.js';
import { assertMetadataSize } from '../workspaces/workspace-service.js';
import { activePlanOf, openFirstPeriod, view, type AccessDeps } from './access-common.js';
import { expireIfDue } from './access-status.js';
import type { AccessView, WorkspaceUserRow } from './access-types.js';

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

/** A repeat: the same user and access, nothing granted again (its due expiry applied). */
async function existing(deps: AccessDeps, workspaceId: string, externalUserId: string, tx: Queryable) {
  const { accessRepo } = deps;
  const user = (await accessRepo.findUserByExternalId(workspaceId, externalUserId, tx))!;
  const locked = (await accessRepo.lock((await accessRepo.findViewByUser(user.id, tx))!.id, tx))!;
  await expireIfDue(deps, locked, tx);
  return { user, access: (await accessRepo.findViewByUser(user.id, tx))! };
}

/** A new user's ACTIVE access on its plan, with its first period open. */
async function newAccess(
  deps: AccessDeps,
  actor: Actor,
  user: WorkspaceUserRow,
  plan: PlanRow,
  input: ProvisionInput,
  now: Date,
  tx: Queryable,
): Promise<AccessView> {
  const row = await deps.accessRepo.insertAccess(
    {
      id: newId(),
      workspace_id: user.workspace_id,
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
  const period = await openFirstPeriod(deps, row, plan, tx);
  await deps.audit.record(
    actor,
    {
      action: 'access.provisioned',
      resourceType: 'workspace_access',
      resourceId: row.id,
      workspaceId: user.workspace_id,
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
  return view(deps, row.id, tx);
}

async function keyOnProvision(deps: AccessDeps, actor: Actor, access: AccessView, tx: Queryable): Promise<IssuedKey> {
  if (access.status === 'REVOKED') {
    throw new AppError('illegal_transition', 'A REVOKED access gets no new keys', { current_status: access.status });
  }
  return deps.inferenceKeys.issueInTx(actor, access, {}, tx);
}

export async function provision(deps: AccessDeps, actor: Actor, workspaceId: string, input: ProvisionInput): Promise<ProvisionResult> {
  const { accessRepo, clock } = deps;
  assertMetadataSize(input.metadata);
  return deps.db.transaction(async (tx) => {
    await deps.workspaces.requireWritable(actor, workspaceId, tx);
    // A repeat ignores planId (docs/decisions.md), so only a new user's plan is checked.
    const known = await accessRepo.findUserByExternalId(workspaceId, input.externalUserId, tx);
    const plan = known ? null : await activePlanOf(deps, actor, workspaceId, input.planId, tx);
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
    // A new user always has its plan.
    const { user, access } =
      !inserted || !plan
        ? await existing(deps, workspaceId, input.externalUserId, tx)
        : { user: inserted, access: await newAccess(deps, actor, inserted, plan, input, now, tx) };
    const key = input.issueInferenceKey ? await keyOnProvision(deps, actor, access, tx) : null;
    const currentPeriod = await deps.quotaRepo.currentPeriod(access.id, clock.now(), tx);
    return { user, access, created: Boolean(inserted), key, currentPeriod };
  });
}

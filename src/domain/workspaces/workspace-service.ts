import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { assertVisible, requireRoot, type Actor, type Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { AuditService } from '../audit/audit-service.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import type { Page, PageRequest } from '../pagination.js';
import { assertCurrency, DEFAULT_CURRENCY } from './currency.js';
import { assertTimeZone, DEFAULT_TIME_ZONE } from './time-zone.js';
import { passthroughClassesOf, sameClasses } from './passthrough-classes.js';
import { requestLogPolicyOf, samePolicy, type RequestLogPolicyInput } from './request-log-policy.js';
import type { WorkspaceRepo, WorkspaceRow } from './workspace-repo.js';

const METADATA_MAX_BYTES = 16 * 1024;

interface CreateWorkspaceInput {
  name: string;
  metadata?: Record<string, unknown> | undefined;
  /** Deprecated: every passthrough class. */
  allowUnmeteredPassthrough?: boolean | undefined;
  /** The classes of unmetered paths its gateway calls may take (passthrough-classes.ts). */
  passthroughClasses?: string[] | undefined;
  currency?: string | undefined;
  timeZone?: string | undefined;
}

type UpdateWorkspaceInput = Partial<CreateWorkspaceInput> & {
  /** Its request log policy (request-log-policy.ts); null removes it. */
  requestLog?: RequestLogPolicyInput | null | undefined;
};

export function assertMetadataSize(metadata: unknown, param = 'metadata'): void {
  if (metadata !== undefined && Buffer.byteLength(JSON.stringify(metadata)) > METADATA_MAX_BYTES) {
    throw new AppError('invalid_parameter', `metadata must serialize to at most ${METADATA_MAX_BYTES} bytes`, { param });
  }
}

/** What the workspace rules read and write through. */
export interface WorkspaceDeps {
  db: Db;
  workspaceRepo: WorkspaceRepo;
  audit: AuditService;
  clock: Clock;
  changes: ChangeFeed;
  /**
   * Makes the workspace's day rollups again in the zone (a known IANA name) from its hourly rollups, in the
   * transaction that changes its zone (the recording's SQL, src/domain/recording/rollup-sql.ts).
   */
  rebuildDayRollups: (workspaceId: string, zone: string, tx: Queryable) => Promise<void>;
}

async function get({ db, workspaceRepo }: WorkspaceDeps, actor: Actor, id: string, q: Queryable = db): Promise<WorkspaceRow> {
  assertVisible(actor, id, 'workspace_not_found', 'Workspace');
  const row = await workspaceRepo.findById(id, q);
  if (!row) throw new AppError('workspace_not_found', 'Workspace not found');
  return row;
}

function refuseArchived(row: WorkspaceRow): WorkspaceRow {
  if (row.status === 'ARCHIVED') {
    throw new AppError('workspace_archived', 'The workspace is archived and read-only', { current_status: row.status });
  }
  return row;
}

/**
 * For every change under a workspace, in any area: inside the caller's
 * transaction, the workspace must be visible and ACTIVE, and stays so until commit.
 */
async function requireWritable({ workspaceRepo }: WorkspaceDeps, actor: Actor, id: string, tx: Queryable): Promise<WorkspaceRow> {
  assertVisible(actor, id, 'workspace_not_found', 'Workspace');
  const row = await workspaceRepo.findByIdForShare(id, tx);
  if (!row) throw new AppError('workspace_not_found', 'Workspace not found');
  return refuseArchived(row);
}

/**
 * The same check, without a transaction, before a change calls the outside world
 * (a billing provider, an upstream): such a call cannot be taken back and never runs
 * inside a transaction, so a request refused after it would leave something there.
 * The transaction that records the change checks again (requireWritable).
 */
async function requireWritableBeforeCall(deps: WorkspaceDeps, actor: Actor, id: string): Promise<WorkspaceRow> {
  return refuseArchived(await get(deps, actor, id));
}

async function create({ db, workspaceRepo, audit, clock }: WorkspaceDeps, actor: Actor, dto: CreateWorkspaceInput): Promise<WorkspaceRow> {
  requireRoot(actor);
  assertMetadataSize(dto.metadata);
  if (dto.currency !== undefined) assertCurrency(dto.currency, 'currency');
  if (dto.timeZone !== undefined) assertTimeZone(dto.timeZone, 'timeZone');
  const classes = passthroughClassesOf(dto.passthroughClasses ?? []);
  const now = clock.now();
  return db.transaction(async (tx) => {
    const row = await workspaceRepo.insert(
      {
        id: newId(),
        name: dto.name,
        status: 'ACTIVE',
        metadata: dto.metadata ?? {},
        allow_unmetered_passthrough: dto.allowUnmeteredPassthrough ?? false,
        passthrough_classes: classes,
        request_log: null,
        currency: dto.currency ?? DEFAULT_CURRENCY,
        time_zone: dto.timeZone ?? DEFAULT_TIME_ZONE,
        created_at: now,
        updated_at: now,
        archived_at: null,
      },
      tx,
    );
    await audit.record(
      actor,
      { action: 'workspace.created', resourceType: 'workspace', resourceId: row.id, workspaceId: row.id, changes: { ...dto } },
      tx,
    );
    return row;
  });
}

async function list(
  { workspaceRepo }: WorkspaceDeps,
  actor: Actor,
  page: PageRequest & { status?: 'ACTIVE' | 'ARCHIVED' },
): Promise<Page<WorkspaceRow>> {
  return workspaceRepo.list({ ...page, ids: actor.workspaceIds });
}

async function update(deps: WorkspaceDeps, actor: Actor, id: string, dto: UpdateWorkspaceInput): Promise<WorkspaceRow> {
  const { db, workspaceRepo, audit, clock, changes } = deps;
  assertMetadataSize(dto.metadata);
  if (dto.currency !== undefined) assertCurrency(dto.currency, 'currency');
  if (dto.timeZone !== undefined) assertTimeZone(dto.timeZone, 'timeZone');
  const classes = dto.passthroughClasses === undefined ? undefined : passthroughClassesOf(dto.passthroughClasses);
  const requestLog = dto.requestLog === undefined ? undefined : requestLogPolicyOf(dto.requestLog);
  return db.transaction(async (tx) => {
    assertVisible(actor, id, 'workspace_not_found', 'Workspace');
    const current = await workspaceRepo.findByIdForUpdate(id, tx);
    if (!current) throw new AppError('workspace_not_found', 'Workspace not found');
    refuseArchived(current);
    const patch: Partial<WorkspaceRow> = { updated_at: clock.now() };
    if (dto.name !== undefined) patch.name = dto.name;
    if (dto.metadata !== undefined) patch.metadata = dto.metadata;
    // What its gateway calls may take changes: every process applies it to the next call (the change feed).
    let gatewayChanged = false;
    if (dto.allowUnmeteredPassthrough !== undefined && dto.allowUnmeteredPassthrough !== current.allow_unmetered_passthrough) {
      patch.allow_unmetered_passthrough = dto.allowUnmeteredPassthrough;
      gatewayChanged = true;
    }
    if (classes && !sameClasses(classes, current.passthrough_classes)) {
      patch.passthrough_classes = classes;
      gatewayChanged = true;
    }
    if (requestLog !== undefined && !samePolicy(requestLog, current.request_log)) {
      patch.request_log = requestLog;
      gatewayChanged = true;
    }
    if (dto.currency !== undefined && dto.currency !== current.currency) {
      // Prices, costs and budgets are all in the one currency: it is chosen before the first price.
      if (await workspaceRepo.hasPrices(id, tx)) {
        throw new AppError('conflict', 'The workspace has prices in its currency; its currency cannot change', { param: 'currency' });
      }
      patch.currency = dto.currency;
    }
    if (dto.timeZone !== undefined && dto.timeZone !== current.time_zone) {
      patch.time_zone = dto.timeZone;
      // The summaries by day read the days of the workspace's zone (usage_day_rollups): its days are cut again.
      await deps.rebuildDayRollups(id, dto.timeZone, tx);
    }
    const row = await workspaceRepo.update(id, patch, tx);
    if (gatewayChanged) await changes.announce({ kind: 'workspace', id }, tx);
    await audit.record(
      actor,
      { action: 'workspace.updated', resourceType: 'workspace', resourceId: id, workspaceId: id, changes: { ...dto } },
      tx,
    );
    return row;
  });
}

async function archive({ db, workspaceRepo, audit, clock, changes }: WorkspaceDeps, actor: Actor, id: string): Promise<void> {
  // Another tenant's workspace looks missing, as everywhere; a scoped key's own is refused as root-only.
  assertVisible(actor, id, 'workspace_not_found', 'Workspace');
  requireRoot(actor);
  await db.transaction(async (tx) => {
    const current = await workspaceRepo.findByIdForUpdate(id, tx);
    if (!current) throw new AppError('workspace_not_found', 'Workspace not found');
    if (current.status === 'ARCHIVED') return;
    const now = clock.now();
    await workspaceRepo.update(id, { status: 'ARCHIVED', archived_at: now, updated_at: now }, tx);
    await changes.announce({ kind: 'workspace', id }, tx);
    await audit.record(
      actor,
      { action: 'workspace.archived', resourceType: 'workspace', resourceId: id, workspaceId: id, changes: { status: 'ARCHIVED' } },
      tx,
    );
  });
}

export const createWorkspaceService = (deps: WorkspaceDeps) =>
  bindDeps(deps, { get, requireWritable, requireWritableBeforeCall, create, list, update, archive });

export type WorkspaceService = ReturnType<typeof createWorkspaceService>;

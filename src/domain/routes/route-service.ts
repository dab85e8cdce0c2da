/**
 * Routes: create, read, update, archive, and their health (docs/routes.md). A route's targets are checked
 * when it is written: connections of its workspace, not archived, whose request bodies share a shape, each
 * able to serve every model the route maps. Every change writes its audit entry and announces the route to
 * the gateway processes (the change feed) in the same transaction.
 */
import type { Db, Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { newId } from '../../ids.js';
import { canSeeWorkspace, type Actor, type Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { AuditService } from '../audit/audit-service.js';
import type { ChangeFeed } from '../changes/change-feed.js';
import type { Page, PageRequest } from '../pagination.js';
import { protocolOf } from '../../protocols/index.js';
import type { ProviderConnectionRepo, ProviderConnectionRow } from '../provider-connections/provider-connection-repo.js';
import { requestLogPolicyOf, type RequestLogPolicyInput } from '../workspaces/request-log-policy.js';
import { assertMetadataSize, type WorkspaceService } from '../workspaces/workspace-service.js';
import { windowFigures, type WindowFigures } from '../provider-connections/connection-health-repo.js';
import type { AttemptFigures, RouteRepo } from './route-repo.js';
import {
  DEFAULT_BREAKER,
  DEFAULT_RETRY,
  DEFAULT_RETRY_ON,
  type BreakerRow,
  type BreakerSettings,
  type RetrySettings,
  type RouteHealth,
  type RouteRow,
  type RouteStrategy,
  type RouteTarget,
  type TargetHealth,
} from './route-types.js';

const RESOURCE = 'route';

interface RouteTargetInput {
  providerConnectionId: string;
  weight?: number | undefined;
  modelMap?: Record<string, string> | undefined;
  attempts?: number | undefined;
  timeoutMs?: number | undefined;
  firstTokenTimeoutMs?: number | undefined;
}

interface CreateRouteInput {
  name: string;
  strategy?: RouteStrategy | undefined;
  targets: RouteTargetInput[];
  retryOn?: number[] | undefined;
  retry?: Partial<RetrySettings> | undefined;
  breaker?: Partial<BreakerSettings> | undefined;
  tryWhenAllOpen?: boolean | undefined;
  metadata?: Record<string, unknown> | undefined;
}

type UpdateRouteInput = Partial<CreateRouteInput> & {
  /** Its request log policy (request-log-policy.ts); null removes it. */
  requestLog?: RequestLogPolicyInput | null | undefined;
};

function notFound(): AppError {
  return new AppError('gateway_route_not_found', 'Route not found', { param: 'routeId' });
}

/** Defined fields only: the contract's optional fields may arrive as undefined. */
function defined<T extends object>(value: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(value ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function targetOf(input: RouteTargetInput): RouteTarget {
  return {
    providerConnectionId: input.providerConnectionId,
    weight: input.weight ?? 1,
    ...(input.modelMap && Object.keys(input.modelMap).length ? { modelMap: input.modelMap } : {}),
    attempts: input.attempts ?? 1,
    ...(input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {}),
    ...(input.firstTokenTimeoutMs !== undefined ? { firstTokenTimeoutMs: input.firstTokenTimeoutMs } : {}),
  };
}

/**
 * The rules of a target list, given each target's connection as found (undefined: none the actor may see
 * in the route's workspace). Throws the first fault, naming its field.
 */
function checkTargets(targets: RouteTarget[], workspaceId: string, found: (ProviderConnectionRow | undefined)[]): void {
  if (!targets.length) throw new AppError('invalid_parameter', 'A route needs at least one target', { param: 'targets' });
  const seen = new Set<string>();
  targets.forEach((target, i) => {
    const field = `targets[${i}]`;
    if (!Number.isInteger(target.weight) || target.weight < 1)
      throw new AppError('invalid_parameter', 'weight must be a positive integer', { param: `${field}.weight` });
    if (seen.has(target.providerConnectionId))
      throw new AppError('invalid_parameter', 'A connection may be a route target once', { param: `${field}.providerConnectionId` });
    seen.add(target.providerConnectionId);
    const row = found[i];
    // A route (or anything else) given as a target is no connection of the workspace: 404 as another tenant's is.
    if (!row || row.workspace_id !== workspaceId)
      throw new AppError('provider_connection_not_found', "No provider connection with that id in the route's workspace", {
        param: `${field}.providerConnectionId`,
      });
    if (row.status === 'ARCHIVED')
      throw new AppError('connection_archived', 'An archived connection cannot be a route target', {
        param: `${field}.providerConnectionId`,
        current_status: row.status,
      });
  });
  // The request bodies each target takes (its protocol's bodyShape: `openai` and `azure-openai` take the same, an
  // Azure target sent the same body at its v1 path, its model mapped to a deployment; the others only their own).
  const shapes = new Set(found.map((row) => protocolOf(row!.protocol_profile).bodyShape));
  if (shapes.size > 1) {
    throw new AppError(
      'route_targets_incompatible',
      `A route's targets must take the same request bodies; these speak ${[...new Set(found.map((r) => r!.protocol_profile))].join(', ')}`,
      { param: 'targets' },
    );
  }
  // A target whose models are deployments (Azure: its protocol's namesDeployments) is sent a deployment: every model
  // the route maps must name one in its own map.
  const mapped = new Set(targets.flatMap((t) => Object.keys(t.modelMap ?? {})));
  targets.forEach((target, i) => {
    const protocol = protocolOf(found[i]!.protocol_profile);
    if (!protocol.namesDeployments) return;
    const map = target.modelMap ?? {};
    const missing = [...mapped].find((model) => map[model] === undefined);
    if (!Object.keys(map).length || missing !== undefined) {
      throw new AppError(
        'route_model_unserved',
        missing !== undefined
          ? `The model '${missing}' is mapped on another target, but this ${protocol.title} target names no deployment for it`
          : `This ${protocol.title} target needs a modelMap naming the deployment of each model it serves`,
        { param: `targets[${i}].modelMap` },
      );
    }
  });
}

/** What the route rules read and write through. */
export interface RouteDeps {
  db: Db;
  routeRepo: RouteRepo;
  providerConnectionRepo: ProviderConnectionRepo;
  workspaces: WorkspaceService;
  audit: AuditService;
  clock: Clock;
  changes: ChangeFeed;
}

async function get({ db, routeRepo }: RouteDeps, actor: Actor, id: string, q: Queryable = db): Promise<RouteRow> {
  const row = await routeRepo.findById(id, q);
  if (!row || !canSeeWorkspace(actor, row.workspace_id)) throw notFound();
  return row;
}

async function checked(
  { providerConnectionRepo }: RouteDeps,
  inputs: RouteTargetInput[],
  workspaceId: string,
  q: Queryable,
): Promise<RouteTarget[]> {
  const targets = inputs.map(targetOf);
  const found = await Promise.all(targets.map((t) => providerConnectionRepo.findById(t.providerConnectionId, q)));
  checkTargets(targets, workspaceId, found);
  return targets;
}

async function create(deps: RouteDeps, actor: Actor, workspaceId: string, dto: CreateRouteInput): Promise<RouteRow> {
  const { db, routeRepo, workspaces, audit, clock, changes } = deps;
  assertMetadataSize(dto.metadata);
  await workspaces.get(actor, workspaceId);
  return db.transaction(async (tx) => {
    await workspaces.requireWritable(actor, workspaceId, tx);
    const targets = await checked(deps, dto.targets, workspaceId, tx);
    const now = clock.now();
    const id = newId();
    const row = await routeRepo.insert(
      {
        id,
        workspace_id: workspaceId,
        name: dto.name,
        strategy: dto.strategy ?? 'fallback',
        status: 'ACTIVE',
        targets,
        retry_on: dto.retryOn ?? [...DEFAULT_RETRY_ON],
        retry: { ...DEFAULT_RETRY, ...defined(dto.retry) },
        breaker: { ...DEFAULT_BREAKER, ...defined(dto.breaker) },
        try_when_all_open: dto.tryWhenAllOpen ?? true,
        metadata: dto.metadata ?? {},
        request_log: null,
        created_at: now,
        updated_at: now,
        archived_at: null,
      },
      tx,
    );
    await changes.announce({ kind: 'route', id }, tx);
    await audit.record(actor, { action: 'route.created', resourceType: RESOURCE, resourceId: id, workspaceId, changes: { ...dto } }, tx);
    return row;
  });
}

async function list({ workspaces, routeRepo }: RouteDeps, actor: Actor, workspaceId: string, page: PageRequest): Promise<Page<RouteRow>> {
  await workspaces.get(actor, workspaceId);
  return routeRepo.list({ ...page, workspaceId });
}

/** The patch an update makes of the route as it stands (targets checked anew). */
async function patchOf(deps: RouteDeps, current: RouteRow, dto: UpdateRouteInput, tx: Queryable): Promise<Partial<RouteRow>> {
  const patch: Partial<RouteRow> = { updated_at: deps.clock.now() };
  if (dto.name !== undefined) patch.name = dto.name;
  if (dto.strategy !== undefined) patch.strategy = dto.strategy;
  if (dto.targets !== undefined) patch.targets = await checked(deps, dto.targets, current.workspace_id, tx);
  if (dto.retryOn !== undefined) patch.retry_on = dto.retryOn;
  if (dto.retry !== undefined) patch.retry = { ...current.retry, ...defined(dto.retry) };
  if (dto.breaker !== undefined) patch.breaker = { ...current.breaker, ...defined(dto.breaker) };
  if (dto.tryWhenAllOpen !== undefined) patch.try_when_all_open = dto.tryWhenAllOpen;
  if (dto.metadata !== undefined) patch.metadata = dto.metadata;
  if (dto.requestLog !== undefined) patch.request_log = requestLogPolicyOf(dto.requestLog);
  return patch;
}

async function update(deps: RouteDeps, actor: Actor, id: string, dto: UpdateRouteInput): Promise<RouteRow> {
  const { db, routeRepo, workspaces, audit, changes } = deps;
  assertMetadataSize(dto.metadata);
  await get(deps, actor, id);
  return db.transaction(async (tx) => {
    const seen = await get(deps, actor, id, tx);
    await workspaces.requireWritable(actor, seen.workspace_id, tx);
    const current = (await routeRepo.findByIdForUpdate(id, tx))!;
    if (current.status === 'ARCHIVED')
      throw new AppError('route_archived', 'The route is archived and read-only', { current_status: current.status });
    const row = await routeRepo.update(id, await patchOf(deps, current, dto, tx), tx);
    await changes.announce({ kind: 'route', id }, tx);
    await audit.record(
      actor,
      { action: 'route.updated', resourceType: RESOURCE, resourceId: id, workspaceId: row.workspace_id, changes: { ...dto } },
      tx,
    );
    return row;
  });
}

/** ARCHIVED: gone from the gateway, readable here. Idempotent. */
async function archive(deps: RouteDeps, actor: Actor, id: string): Promise<void> {
  const { db, routeRepo, workspaces, audit, clock, changes } = deps;
  await db.transaction(async (tx) => {
    const seen = await get(deps, actor, id, tx);
    if (seen.status === 'ARCHIVED') return;
    await workspaces.requireWritable(actor, seen.workspace_id, tx);
    const current = await routeRepo.findByIdForUpdate(id, tx);
    if (!current || current.status === 'ARCHIVED') return;
    const now = clock.now();
    await routeRepo.update(id, { status: 'ARCHIVED', archived_at: now, updated_at: now }, tx);
    await changes.announce({ kind: 'route', id }, tx);
    await audit.record(
      actor,
      {
        action: 'route.archived',
        resourceType: RESOURCE,
        resourceId: id,
        workspaceId: current.workspace_id,
        changes: { status: 'ARCHIVED' },
      },
      tx,
    );
  });
}

/** One target's health: the breaker's last error where it is newer than the figures' (another process saw it). */
function targetHealth(
  cid: string,
  status: string | undefined,
  breaker: BreakerRow | undefined,
  f: AttemptFigures | undefined,
  windows: WindowFigures[],
): TargetHealth {
  const lastErrorAt = f?.last_error_at ? new Date(f.last_error_at) : null;
  const breakerErrorAt = breaker?.last_failure_at ?? null;
  const breakerNewer = breaker && breakerErrorAt && (!lastErrorAt || breakerErrorAt > lastErrorAt);
  return {
    providerConnectionId: cid,
    connectionStatus: (status ?? 'ARCHIVED') as 'ACTIVE' | 'SUSPENDED' | 'ARCHIVED',
    breakerState: breaker?.state ?? 'closed',
    retryAt: breaker?.state === 'open' ? breaker.retry_at : null,
    callsLastMinute: f?.calls_minute ?? 0,
    errorsLastMinute: f?.errors_minute ?? 0,
    callsLastHour: f?.calls_hour ?? 0,
    errorsLastHour: f?.errors_hour ?? 0,
    p50LatencyMs: windows.find((w) => w.window === '1h')!.latency?.[0] ?? null,
    lastError: breakerNewer ? breaker.last_error : (f?.last_error ?? null),
    lastErrorAt: breakerNewer ? breakerErrorAt : lastErrorAt,
    windows,
  };
}

/**
 * Each target's breaker (as every process reads it), connection status, attempts of the last minute and hour, and the
 * route's attempts on it over 5 minutes, an hour and a day as a connection's health counts them (one computation).
 */
async function health(deps: RouteDeps, actor: Actor, id: string): Promise<RouteHealth> {
  const { routeRepo, clock } = deps;
  const route = await get(deps, actor, id);
  const now = clock.now();
  const ids = route.targets.map((t) => t.providerConnectionId);
  const [breakers, statuses, figures, windows] = await Promise.all([
    routeRepo.breakers(id),
    routeRepo.connectionStatuses(ids),
    routeRepo.attemptFigures(id, now),
    windowFigures(deps.db, { routeId: id, connectionIds: [...new Set(ids)] }, now),
  ]);
  const breakerOf = new Map(breakers.map((b) => [b.provider_connection_id, b]));
  const figuresOf = new Map(figures.map((f) => [f.provider_connection_id, f]));
  return {
    route,
    checkedAt: now,
    targets: ids.map((cid) => targetHealth(cid, statuses.get(cid), breakerOf.get(cid), figuresOf.get(cid), windows.get(cid)!)),
  };
}

export const createRouteService = (deps: RouteDeps) => bindDeps(deps, { get, create, list, update, archive, health });

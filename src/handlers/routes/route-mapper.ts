import type { RouteDto, RouteHealthDto, RouteTargetDto } from '../../../generated/client/types.gen.js';
import type { RouteHealth, RouteRow, RouteTarget } from '../../domain/routes/route-types.js';
import { toHealthWindowDto } from '../provider-connections/provider-connection-mapper.js';

function toTargetDto(target: RouteTarget): RouteTargetDto {
  return {
    providerConnectionId: target.providerConnectionId,
    weight: target.weight,
    attempts: target.attempts,
    ...(target.modelMap ? { modelMap: target.modelMap } : {}),
    ...(target.timeoutMs !== undefined ? { timeoutMs: target.timeoutMs } : {}),
    ...(target.firstTokenTimeoutMs !== undefined ? { firstTokenTimeoutMs: target.firstTokenTimeoutMs } : {}),
  };
}

/** `{publicUrl}/providers/{id}`: called as a connection's gatewayBaseUrl is. */
export function toRouteDto(row: RouteRow, publicUrl: string): RouteDto {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    gatewayBaseUrl: `${publicUrl.replace(/\/+$/, '')}/providers/${row.id}`,
    strategy: row.strategy,
    status: row.status,
    targets: row.targets.map(toTargetDto),
    retryOn: row.retry_on,
    retry: row.retry,
    breaker: row.breaker,
    tryWhenAllOpen: row.try_when_all_open,
    metadata: row.metadata,
    requestLog: row.request_log,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    ...(row.archived_at ? { archivedAt: row.archived_at.toISOString() } : {}),
  };
}

export function toRouteHealthDto(health: RouteHealth): RouteHealthDto {
  return {
    routeId: health.route.id,
    status: health.route.status,
    checkedAt: health.checkedAt.toISOString(),
    targets: health.targets.map((t) => ({
      providerConnectionId: t.providerConnectionId,
      connectionStatus: t.connectionStatus,
      breakerState: t.breakerState,
      ...(t.retryAt ? { retryAt: t.retryAt.toISOString() } : {}),
      callsLastMinute: t.callsLastMinute,
      errorsLastMinute: t.errorsLastMinute,
      callsLastHour: t.callsLastHour,
      errorsLastHour: t.errorsLastHour,
      ...(t.p50LatencyMs !== null ? { p50LatencyMs: t.p50LatencyMs } : {}),
      ...(t.lastError ? { lastError: t.lastError } : {}),
      ...(t.lastErrorAt ? { lastErrorAt: t.lastErrorAt.toISOString() } : {}),
      windows: t.windows.map(toHealthWindowDto),
    })),
  };
}

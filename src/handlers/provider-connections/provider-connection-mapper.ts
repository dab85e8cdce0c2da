import type {
  ConnectionHealthWindowDto,
  ProviderCheckResultDto,
  ProviderConnectionDto,
  ProviderConnectionHealthDto,
} from '../../../generated/client/types.gen.js';
import type { WindowFigures } from '../../domain/provider-connections/connection-health-repo.js';
import type { ConnectionHealth } from '../../domain/provider-connections/provider-connection-health.js';
import type { ProviderCheckResult } from '../../domain/provider-connections/provider-probe.js';
import type { ProviderConnectionRow } from '../../domain/provider-connections/provider-connection-repo.js';

/** `{publicUrl}/providers/{id}`: what an SDK is pointed at (openai: plus '/v1'). */
function gatewayBaseUrl(publicUrl: string, connectionId: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/providers/${connectionId}`;
}

/** Never carries the key: only its preview. */
export function toProviderConnectionDto(row: ProviderConnectionRow, publicUrl: string): ProviderConnectionDto {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    gatewayBaseUrl: gatewayBaseUrl(publicUrl, row.id),
    protocolProfile: row.protocol_profile,
    baseUrl: row.base_url,
    status: row.status,
    secretPreview: row.secret_preview,
    ...(row.last_verified_at ? { lastVerifiedAt: row.last_verified_at.toISOString() } : {}),
    ...(row.last_verify_outcome && row.last_verify_at
      ? { lastVerify: { outcome: row.last_verify_outcome, at: row.last_verify_at.toISOString() } }
      : {}),
    ...(row.upstream_timeout_ms !== null ? { upstreamTimeoutMs: row.upstream_timeout_ms } : {}),
    ...(row.retry ? { retry: row.retry } : {}),
    enforcesOutputCap: row.enforces_output_cap,
    metadata: row.metadata,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    ...(row.archived_at ? { archivedAt: row.archived_at.toISOString() } : {}),
  };
}

export function toProviderCheckResultDto(result: ProviderCheckResult): ProviderCheckResultDto {
  return {
    accepted: result.outcome === 'reachable',
    outcome: result.outcome,
    ...(result.httpStatus !== undefined ? { httpStatus: result.httpStatus } : {}),
    latencyMs: result.latencyMs,
    message: result.message,
    checkedAt: result.checkedAt.toISOString(),
  };
}

const ms = (p: [number, number, number] | null) => (p ? { p50: round(p[0]), p95: round(p[1]), p99: round(p[2]) } : undefined);

/** A health window (a connection's, or a route target's) as the contract gives it: percentiles only where it had attempts. */
export function toHealthWindowDto(w: WindowFigures): ConnectionHealthWindowDto {
  return {
    window: w.window,
    since: w.since.toISOString(),
    attempts: w.attempts,
    errors: w.errors,
    ...(w.attempts > 0 ? { errorRate: w.errors / w.attempts } : {}),
    ...(ms(w.latency) ? { latencyMs: ms(w.latency)! } : {}),
    ...(ms(w.ttft) ? { timeToFirstTokenMs: ms(w.ttft)! } : {}),
  };
}

/** A connection's health as the contract gives it. */
export function toProviderConnectionHealthDto(h: ConnectionHealth): ProviderConnectionHealthDto {
  return {
    providerConnectionId: h.connection.id,
    status: h.status,
    ...(h.connection.last_verify_outcome && h.connection.last_verify_at
      ? { verify: { outcome: h.connection.last_verify_outcome, at: h.connection.last_verify_at.toISOString() } }
      : {}),
    windows: h.windows.map(toHealthWindowDto),
    checkedAt: h.checkedAt.toISOString(),
  };
}

/** Milliseconds to a tenth. */
const round = (ms: number) => Math.round(ms * 10) / 10;

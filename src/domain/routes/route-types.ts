/**
 * A route: one gateway URL over several provider connections of a workspace (docs/routes.md). The types the
 * Admin API's service, the repository and the gateway's route registry share.
 */
import type { RequestLogPolicy } from '../workspaces/request-log-policy.js';
import type { RetrySettings } from '../provider-connections/connection-retry.js';
import type { WindowFigures } from '../provider-connections/connection-health-repo.js';

/** A route retries by the same settings as a plain connection, and with the same defaults. */
export { DEFAULT_RETRY, DEFAULT_RETRY_ON, type RetrySettings } from '../provider-connections/connection-retry.js';

export type RouteStrategy = 'fallback' | 'loadbalance' | 'least-busy';
type RouteStatus = 'ACTIVE' | 'ARCHIVED';
export type BreakerState = 'closed' | 'open' | 'half_open';

export interface RouteTarget {
  providerConnectionId: string;
  /** A positive integer: `loadbalance` serves this target weight/sum of the time. */
  weight: number;
  /** The model a caller asks for -> the model (or Azure deployment) this target is sent. */
  modelMap?: Record<string, string> | undefined;
  /** Attempts on this target (the first and its retries) before the call moves on. */
  attempts: number;
  /** Headers (and between bytes) timeout of an attempt; unset: the connection's. */
  timeoutMs?: number | undefined;
  /** A stream with no byte by then moves on (never applied to the call's last attempt). */
  firstTokenTimeoutMs?: number | undefined;
}

export interface BreakerSettings {
  consecutiveFailures: number;
  errorRatePercent: number;
  minimumCalls: number;
  windowMs: number;
  cooldownMs: number;
}

export interface RouteRow {
  id: string;
  workspace_id: string;
  name: string;
  strategy: RouteStrategy;
  status: RouteStatus;
  targets: RouteTarget[];
  retry_on: number[];
  retry: RetrySettings;
  breaker: BreakerSettings;
  try_when_all_open: boolean;
  metadata: Record<string, unknown>;
  /** Whether its calls keep their request and answer, over their plan's and workspace's; null: none set. */
  request_log: RequestLogPolicy | null;
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
}

/** A target's breaker as every process reads it (route_breakers). */
export interface BreakerRow {
  route_id: string;
  provider_connection_id: string;
  workspace_id: string;
  state: BreakerState;
  retry_at: Date | null;
  probe_until: Date | null;
  opened_at: Date | null;
  last_failure_at: Date | null;
  last_error: string | null;
  updated_at: Date;
}

export const DEFAULT_BREAKER: Readonly<BreakerSettings> = Object.freeze({
  consecutiveFailures: 5,
  errorRatePercent: 50,
  minimumCalls: 20,
  windowMs: 60_000,
  cooldownMs: 30_000,
});

/** A target's figures for getRouteHealth. */
export interface TargetHealth {
  providerConnectionId: string;
  connectionStatus: 'ACTIVE' | 'SUSPENDED' | 'ARCHIVED';
  breakerState: BreakerState;
  retryAt: Date | null;
  callsLastMinute: number;
  errorsLastMinute: number;
  callsLastHour: number;
  errorsLastHour: number;
  p50LatencyMs: number | null;
  lastError: string | null;
  lastErrorAt: Date | null;
  /** The route's attempts on the target over 5 minutes, an hour and a day, as a connection's health has them. */
  windows: WindowFigures[];
}

export interface RouteHealth {
  route: RouteRow;
  targets: TargetHealth[];
  checkedAt: Date;
}

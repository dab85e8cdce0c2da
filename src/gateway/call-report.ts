/**
 * What the gateway says of each call it ends: its metrics, and its one log line. The request observer
 * (src/http/middleware.ts) counts gateway requests but leaves their line to this module, which knows
 * the call: its workspace, connection, access, model, upstream status, tokens, units, latencies and
 * metering. Ids, model names, counts and times only: never a key, a header, a query string or a body.
 * The fields are listed in docs/observability.md.
 */
import { isDatabaseUnavailable } from '../database-unavailable.js';
import type { InvocationRow } from '../domain/invocations/invocation-types.js';
import { logLine, requestLineLevel, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Consumption } from '../records/call-rows.js';

/**
 * Told of a call as it is recorded; `httpStatus`: what its client was answered (499: the client left first);
 * `cause`: the error behind a 500 of ours, for the log line.
 */
export type CallReport = (invocation: Readonly<InvocationRow>, consumed: Consumption | null, httpStatus: number, cause: unknown) => void;

/** An error's name, message and stack, for a log line. */
const errorOf = (e: Error) => ({ name: e.name, message: e.message, stack: e.stack });

/** The cause worth a stack: not an expected condition such as the database being away (its code says it). */
const unexpected = (cause: unknown) => (cause && !isDatabaseUnavailable(cause) ? cause : undefined);

const OPERATIONS: Record<string, string> = {
  GET: 'proxyProviderGet',
  POST: 'proxyProviderPost',
  PUT: 'proxyProviderPut',
  PATCH: 'proxyProviderPatch',
  DELETE: 'proxyProviderDelete',
};

/** The gateway operation of a method (proxyProvider for one it does not proxy). */
export const operationOf = (method: string): string => OPERATIONS[method] ?? 'proxyProvider';

const ms = (value: number | null) => (value === null ? null : Math.round(value * 1e3) / 1e3);

export function createCallReport(deps: { logger: Logger; metrics: Metrics | undefined }) {
  const { logger, metrics } = deps;
  const report: CallReport = (invocation, consumed, httpStatus, reported) => {
    metrics?.callEnded(invocation, consumed);
    const cause = unexpected(reported);
    const level = requestLineLevel(httpStatus, {
      unexpected: Boolean(cause),
      relayed: invocation.attempt_http_status !== null && invocation.attempt_http_status === httpStatus,
    });
    if (level !== 'error' && !logger.isLevelEnabled(level)) return;
    logLine(logger, level, {
      msg: 'request',
      requestId: invocation.request_id,
      method: invocation.method,
      path: `/providers/${invocation.provider_connection_id}/${invocation.endpoint}`,
      operationId: operationOf(invocation.method),
      status: httpStatus,
      durationMs: ms(invocation.total_latency_ms),
      workspaceId: invocation.workspace_id,
      connectionId: invocation.provider_connection_id,
      accessId: invocation.workspace_access_id,
      invocationId: invocation.id,
      model: invocation.requested_model || null,
      upstreamModel: invocation.attempt_upstream_model,
      upstreamStatus: invocation.attempt_http_status,
      outcome: invocation.status,
      errorCode: invocation.error_code,
      metering: invocation.metering_status,
      streamed: invocation.streamed,
      inputTokens: consumed ? Number(consumed.inputTokens) : null,
      cachedTokens: consumed ? Number(consumed.cachedInputTokens) : null,
      outputTokens: consumed ? Number(consumed.outputTokens) : null,
      units: Number(invocation.quota_units),
      upstreamMs: ms(invocation.provider_latency_ms),
      ttftMs: ms(invocation.total_ttft_ms),
      upstreamTtftMs: ms(invocation.provider_ttft_ms),
      addedMs: ms(invocation.nexus_latency_ms),
      traceId: invocation.trace_id,
      ...(cause ? { error: errorOf(cause as Error) } : {}),
    });
  };

  return {
    report,
    /**
     * A gateway request refused before its call was opened (no call to record): its line has what the request
     * showed, and the key's workspace and access when its row was found. `error`: the cause of a 500, logged, never sent.
     */
    refusedEarly(line: {
      requestId: string;
      method: string;
      path: string;
      status: number;
      errorCode: string;
      seconds: number;
      /** The key's workspace and access, when its row was found (a revoked key, a suspended access). */
      workspaceId?: string | undefined;
      accessId?: string | undefined;
      error?: unknown;
    }): void {
      metrics?.refusedEarly(line.errorCode);
      const cause = unexpected(line.error);
      const level = requestLineLevel(line.status, { unexpected: Boolean(cause) });
      if (level !== 'error' && !logger.isLevelEnabled(level)) return;
      logLine(logger, level, {
        msg: 'request',
        requestId: line.requestId,
        method: line.method,
        path: line.path,
        operationId: operationOf(line.method),
        status: line.status,
        durationMs: Math.round(line.seconds * 1e6) / 1e3,
        errorCode: line.errorCode,
        ...(line.workspaceId ? { workspaceId: line.workspaceId, accessId: line.accessId } : {}),
        ...(cause ? { error: errorOf(cause as Error) } : {}),
      });
    },
  };
}

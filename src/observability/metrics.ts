/** Prometheus metrics, one registry per app (no global state between test apps). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { LeaseStatement } from '../domain/quota/quota-leases.js';

export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'nexus_' });
  const requests = new Counter({
    name: 'nexus_http_requests_total',
    help: 'HTTP requests by operation and status',
    labelNames: ['operation', 'method', 'status'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'nexus_http_request_duration_seconds',
    help: 'HTTP request latency by operation (until the last byte)',
    labelNames: ['operation', 'method'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const leaseStatements = new Counter({
    name: 'nexus_quota_lease_statements_total',
    help: "The gateway's quota lease statements by kind (acquire, extend, renew, release): its database round trips outside the calls' records",
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  // An upstream that answered past a call's output bound (an ignored max_tokens): a stream cut there, or a
  // JSON answer charged as reported (docs/reliability.md "The output bound").
  const outputOverBound = new Counter({
    name: 'nexus_gateway_output_over_bound_total',
    help: 'Gateway answers whose output passed the call\'s output bound, by kind (stream: cut at the bound; json: charged as reported)',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  return {
    registry,
    outputOverBound(kind: 'stream' | 'json') {
      outputOverBound.inc({ kind });
    },
    leaseStatement(kind: LeaseStatement) {
      leaseStatements.inc({ kind });
    },
    observe(operation: string, method: string, status: number, seconds: number) {
      requests.inc({ operation, method, status: String(status) });
      latency.observe({ operation, method }, seconds);
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * The event loop's lag (src/observability/event-loop.ts): the longest it was held up lately, and how
 * many stalls beyond NEXUS_EVENT_LOOP_BLOCKED_MS it had. Returns what to call on each stall.
 */
export function registerEventLoopMetrics(registry: Registry, lagSeconds: () => number): () => void {
  new Gauge({
    name: 'nexus_event_loop_lag_seconds',
    help: 'The longest the event loop was held up in the last 30 to 60 s (a timer due every 100 ms, how late it ran)',
    registers: [registry],
    collect() {
      this.set(lagSeconds());
    },
  });
  const stalls = new Counter({
    name: 'nexus_event_loop_stalls_total',
    help: 'Times the event loop was held up longer than NEXUS_EVENT_LOOP_BLOCKED_MS',
    registers: [registry],
  });
  return () => stalls.inc();
}

/**
 * Prometheus metrics, one registry per app (no global state between test apps), made by area in metrics/: HTTP,
 * the gateway's calls, routes, recording and quota, the database pools, the background jobs. createMetrics
 * composes them into the one object the app hands out (its methods are plain functions, passed around unbound).
 *
 * Labels stay bounded: workspace and connection ids (a connection belongs to one workspace, so the pair
 * counts as many series as connections), the requested model name (the first MAX_MODELS distinct names a
 * process sees, then "other": a model name is whatever a client writes), statuses and reasons from closed
 * sets. Never a key, an access or an end user. docs/observability.md lists them.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { createCallMetrics } from './metrics/call-metrics.js';
import { createHttpMetrics } from './metrics/http-metrics.js';
import { createJobMetrics } from './metrics/job-metrics.js';
import { createPoolMetrics } from './metrics/pool-metrics.js';
import { createRecorderMetrics } from './metrics/recorder-metrics.js';
import { createRouteMetrics } from './metrics/route-metrics.js';

export { MAX_MODELS } from './metrics/call-metrics.js';

/**
 * prom-client's defaults that Nexus does not export: its event-loop lag family (Nexus exports one lag,
 * nexus_event_loop_lag_seconds, the measure /healthz judges stalls by, which no scrape resets), and the
 * `*_total` gauges of active handles, requests and resources (a gauge named like a counter; the same counts
 * are in nodejs_active_handles, nodejs_active_requests and nodejs_active_resources, by type).
 */
const DEFAULTS_LEFT_OUT = [
  'nodejs_eventloop_lag_seconds',
  'nodejs_eventloop_lag_min_seconds',
  'nodejs_eventloop_lag_max_seconds',
  'nodejs_eventloop_lag_mean_seconds',
  'nodejs_eventloop_lag_stddev_seconds',
  'nodejs_eventloop_lag_p50_seconds',
  'nodejs_eventloop_lag_p90_seconds',
  'nodejs_eventloop_lag_p99_seconds',
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/** What `nexus_build_info` says of the running build. */
/** What `nexus_build_info` says of the running build. */
export interface BuildInfo {
  version: string;
  commit: string;
  node: string;
}

/** prom-client's default metrics, under their own names, less those Nexus does not export. */
function registerDefaults(registry: Registry): void {
  // Under prom-client's own names (process_cpu_seconds_total, nodejs_heap_size_used_bytes...), which the
  // standard Node.js dashboards and alerts query.
  // Its event-loop lag family, left out below, still starts a delay monitor: sampling once a second (not
  // every 10 ms) makes its timer cost nothing.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 1000 });
  for (const name of DEFAULTS_LEFT_OUT) registry.removeSingleMetric(name);
}

export function createMetrics(options: { defaultMetrics?: boolean; build?: BuildInfo } = {}) {
  const registry = new Registry();
  if (options.defaultMetrics) registerDefaults(registry);
  const registers = [registry];
  if (options.build) {
    new Gauge({
      name: 'nexus_build_info',
      help: 'The running build: its version, the commit it was built from ("unknown" when not known), and the Node.js version; always 1',
      labelNames: ['version', 'commit', 'node'] as const,
      registers,
    }).set({ ...options.build }, 1);
  }
  return {
    registry,
    ...createHttpMetrics(registry),
    ...createCallMetrics(registry),
    ...createRouteMetrics(registers),
    ...createRecorderMetrics(registers),
    ...createPoolMetrics(registers),
    ...createJobMetrics(registers),
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

/** Realtime sessions (docs/realtime.md): how many this process holds open. Their turns are counted as calls. */
export function registerRealtimeMetrics(registry: Registry, open: () => number): void {
  new Gauge({
    name: 'nexus_realtime_sessions_open',
    help: 'Realtime sessions (WebSocket) this process holds open',
    registers: [registry],
    collect() {
      this.set(open());
    },
  });
}

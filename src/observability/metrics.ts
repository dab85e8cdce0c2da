/**
 * Prometheus metrics, one registry per app (no global state between test apps).
 *
 * Labels stay bounded: workspace and connection ids (a connection belongs to one workspace, so the pair
 * counts as many series as connections), the requested model name (the first MAX_MODELS distinct names a
 * process sees, then "other": a model name is whatever a client writes), statuses and reasons from closed
 * sets. Never a key, an access or an end user. docs/observability.md lists them.
 *
 * The gateway's per-call figures go through callEnded(): the series of each connection and model are
 * looked up once and kept, and updated in place (plain numbers, no label hashing per call: prom-client's
 * own inc() and observe() hash their labels each time, which made a call's figures cost several
 * microseconds); they are read at scrape time.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Distinct model names labelled per process; the others are counted as "other". */
export const MAX_MODELS = 200;

/** What a call was charged for (none: it was not charged). */
interface Charged {
  units: bigint;
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
}

/** What the recorder reports (call-recorder.ts RecorderStats). */
interface RecorderGauges {
  queued: number;
  spooled: number;
  outage: boolean;
}

// The metrics sit below the domain and the database (docs/architecture.md, "The layers"): they name what they
// read instead of importing it. The domain's InvocationRow, LeaseStatement and Db are checked against these
// where the gateway and app.ts hand them over.

/** A gateway call's outcome (the invocation's status). */
type CallStatus = 'SUCCEEDED' | 'UPSTREAM_ERROR' | 'FAILED' | 'CLIENT_ABORTED' | 'REJECTED';

/** The statements a quota lease runs (quota-leases.ts). */
type LeaseStatement = 'acquire' | 'extend' | 'renew' | 'release';

/** What callEnded() reads of a recorded call (its invocation row). */
interface EndedCall {
  workspace_id: string;
  provider_connection_id: string;
  requested_model: string;
  status: CallStatus;
  error_code: string | null;
  provider_latency_ms: number | null;
  nexus_latency_ms: number | null;
  provider_ttft_ms: number | null;
}

/** A database handle whose pool is reported (knex: its client's tarn pool, if it has one). */
interface PooledDb {
  client: unknown;
}

/** Why a batch of records was not written as one statement (call-recorder.ts). */
export type RecorderFailure = 'unavailable' | 'refused' | 'given_up';

const STATUS_LABEL: Record<CallStatus, string> = {
  SUCCEEDED: 'succeeded',
  UPSTREAM_ERROR: 'upstream_error',
  FAILED: 'failed',
  REJECTED: 'rejected',
  CLIENT_ABORTED: 'client_aborted',
};

/** Seconds, from a gateway call's fastest answers to a long generation. */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Time Nexus adds to a call: well under a millisecond when all is well. */
const ADDED_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

type Labels = Record<string, string>;

/** A counter series updated in place. */
interface CounterSeries {
  labels: Labels;
  value: number;
}

/** A histogram series updated in place: its observations per bucket (the last: above every bound), sum and count. */
interface HistogramSeries {
  labels: Labels;
  counts: Float64Array;
  sum: number;
  count: number;
}

/** What prom-client's registry reads of a metric at scrape time (its get()). */
interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/**
 * A counter whose series are plain objects the caller keeps and increments; registered with prom-client's
 * registry as a custom metric (name, help, type, get(), reset()), rendered like its own.
 */
class InPlaceCounter {
  readonly type = 'counter';
  readonly aggregator = 'sum';
  private readonly series: CounterSeries[] = [];

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
  ) {
    registry.registerMetric(this as never);
  }

  child(labels: Labels): CounterSeries {
    const series = { labels, value: 0 };
    this.series.push(series);
    return series;
  }

  get() {
    const values: MetricValue[] = this.series.map((s) => ({ labels: s.labels, value: s.value }));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    for (const s of this.series) s.value = 0;
  }
}

/** A histogram in the same way (cumulative buckets, _sum and _count, as Prometheus reads them). */
class InPlaceHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly series: HistogramSeries[] = [];

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    readonly bounds: readonly number[],
  ) {
    registry.registerMetric(this as never);
  }

  child(labels: Labels): HistogramSeries {
    const series = { labels, counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
    this.series.push(series);
    return series;
  }

  observe(series: HistogramSeries, value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    series.counts[i]!++;
    series.sum += value;
    series.count++;
  }

  get() {
    const values: MetricValue[] = [];
    for (const s of this.series) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += s.counts[i]!;
        values.push({
          labels: { le: i < this.bounds.length ? this.bounds[i]! : '+Inf', ...s.labels },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        });
      }
      values.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    for (const s of this.series) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}

/** The label children of one connection and model. */
interface ModelSeries {
  /** Its model label. */
  model: string;
  calls: Map<CallStatus, CounterSeries>;
  input: CounterSeries;
  cached: CounterSeries;
  output: CounterSeries;
  units: CounterSeries;
}

interface ConnectionSeries {
  workspace: string;
  models: Map<string, ModelSeries>;
  upstream: HistogramSeries;
  ttft: HistogramSeries;
}

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
export interface BuildInfo {
  version: string;
  commit: string;
  node: string;
}

/** Who decided an HTTP answer's status: Nexus, or the upstream whose answer the gateway relayed. */
export type StatusSource = 'nexus' | 'upstream';

export function createMetrics(options: { defaultMetrics?: boolean; build?: BuildInfo } = {}) {
  const registry = new Registry();
  if (options.defaultMetrics) {
    // Under prom-client's own names (process_cpu_seconds_total, nodejs_heap_size_used_bytes...), which the
    // standard Node.js dashboards and alerts query.
    // Its event-loop lag family, left out below, still starts a delay monitor: sampling once a second (not
    // every 10 ms) makes its timer cost nothing.
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 1000 });
    for (const name of DEFAULTS_LEFT_OUT) registry.removeSingleMetric(name);
  }
  const registers = [registry];
  if (options.build) {
    new Gauge({
      name: 'nexus_build_info',
      help: 'The running build: its version, the commit it was built from ("unknown" when not known), and the Node.js version; always 1',
      labelNames: ['version', 'commit', 'node'] as const,
      registers,
    }).set({ ...options.build }, 1);
  }
  const requests = new Counter({
    name: 'nexus_http_requests_total',
    help: "HTTP requests by operation, method, status and source of the status (nexus: Nexus answered; upstream: the gateway relayed the upstream's answer)",
    labelNames: ['operation', 'method', 'status', 'source'] as const,
    registers,
  });
  const latency = new Histogram({
    name: 'nexus_http_request_duration_seconds',
    help: 'HTTP request latency by operation (until the last byte)',
    labelNames: ['operation', 'method'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers,
  });
  const leaseStatements = new Counter({
    name: 'nexus_quota_lease_statements_total',
    help: "The gateway's quota lease statements by kind (acquire, extend, renew, release): its database round trips outside the calls' records",
    labelNames: ['kind'] as const,
    registers,
  });
  // An upstream that answered past a call's output bound (an ignored max_tokens): a stream cut there, or a
  // JSON answer charged as reported (docs/reliability.md "The output bound").
  const outputOverBound = new Counter({
    name: 'nexus_gateway_output_over_bound_total',
    help: "Gateway answers whose output passed the call's output bound, by kind (stream: cut at the bound; json: charged as reported)",
    labelNames: ['kind'] as const,
    registers,
  });

  // A 2xx answer whose usage could not be read in full (a JSON answer without usage, a stream that broke
  // or never reported it, an event-stream frame that did not decode): charged by the rule for missing usage (docs/reliability.md), counted here.
  const usageMissing = new Counter({
    name: 'nexus_gateway_usage_missing_total',
    help: "Gateway answers charged by the rule for missing usage (the upstream's usage was absent or unreadable), by protocol and kind (stream, json)",
    labelNames: ['protocol', 'kind'] as const,
    registers,
  });

  // The provider cost of the calls recorded (docs/pricing.md "Cost"), in the workspace's currency, and the calls no
  // price matched. Counted when a batch is written, so a call counts once, by the process that recorded it.
  const costMicros = new Counter({
    name: 'nexus_gateway_cost_micros_total',
    help: "Provider cost of the calls recorded, in millionths of the workspace's currency, by workspace, connection and model",
    labelNames: ['workspace', 'connection', 'model'] as const,
    registers,
  });
  const unpriced = new Counter({
    name: 'nexus_gateway_unpriced_calls_total',
    help: 'Calls recorded whose model had no price in the price book, by workspace, connection and model',
    labelNames: ['workspace', 'connection', 'model'] as const,
    registers,
  });
  // Routes (docs/routes.md): each attempt by target and outcome, the moves to another target, the time spent
  // waiting between attempts, and each target's breaker (0 closed, 1 half-open, 2 open).
  const routeAttempts = new Counter({
    name: 'nexus_route_attempts_total',
    help: 'Provider attempts of calls through routes, by route, target connection and outcome (answered, failed, or why it moved on)',
    labelNames: ['route', 'connection', 'outcome'] as const,
    registers,
  });
  const routeFallbacks = new Counter({
    name: 'nexus_route_fallbacks_total',
    help: 'Calls through routes that moved to another target, by route',
    labelNames: ['route'] as const,
    registers,
  });
  const routeRetrySeconds = new Counter({
    name: 'nexus_route_retry_wait_seconds_total',
    help: 'Time calls through routes waited between attempts (backoff or Retry-After), by route',
    labelNames: ['route'] as const,
    registers,
  });
  // A plain connection with a retry policy (docs/routes.md "Retries on a plain connection"): its attempts by outcome,
  // and the time its calls waited between them.
  const connectionAttempts = new Counter({
    name: 'nexus_connection_attempts_total',
    help: 'Provider attempts of calls on connections with a retry policy (not through a route), by connection and outcome (answered, failed, or why it was retried)',
    labelNames: ['connection', 'outcome'] as const,
    registers,
  });
  const connectionRetrySeconds = new Counter({
    name: 'nexus_connection_retry_wait_seconds_total',
    help: 'Time calls on connections with a retry policy waited between attempts (backoff or Retry-After), by connection',
    labelNames: ['connection'] as const,
    registers,
  });
  const routeBreakerState = new Gauge({
    name: 'nexus_route_breaker_state',
    help: "A route target's circuit breaker as this process last changed it: 0 closed, 1 half-open, 2 open",
    labelNames: ['route', 'connection'] as const,
    registers,
  });

  const calls = new InPlaceCounter(
    registry,
    'nexus_gateway_calls_total',
    'Gateway calls whose key and connection were known, by workspace, connection, requested model and outcome',
  );
  const tokens = new InPlaceCounter(
    registry,
    'nexus_gateway_tokens_total',
    'Tokens charged by the gateway, by kind: input (cached ones included), cached (input read from the cache), output',
  );
  const units = new InPlaceCounter(registry, 'nexus_gateway_units_total', 'Quota units charged by the gateway');
  const refusals = new InPlaceCounter(
    registry,
    'nexus_gateway_refusals_total',
    'Gateway calls refused before or instead of the upstream call, by reason (the error code: quota_insufficient, invalid_inference_key...)',
  );
  const upstream = new InPlaceHistogram(
    registry,
    'nexus_gateway_upstream_duration_seconds',
    'Upstream call duration: from the request sent to the last byte of the answer (or its failure)',
    LATENCY_BUCKETS,
  );
  const ttft = new InPlaceHistogram(
    registry,
    'nexus_gateway_upstream_ttft_seconds',
    "Upstream time to first token of streamed calls: from the request sent to the answer's first bytes",
    LATENCY_BUCKETS,
  );
  const added = new InPlaceHistogram(
    registry,
    'nexus_gateway_added_latency_seconds',
    'The time Nexus adds to an upstream call: before its request is sent, and after its last byte until the call ends',
    ADDED_BUCKETS,
  );
  const addedSeries = added.child({});

  const batchSize = new Histogram({
    name: 'nexus_recorder_batch_size',
    help: 'Call records written per statement (group commit)',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200],
    registers,
  });
  const recorderFailures = new Counter({
    name: 'nexus_recorder_failures_total',
    help: 'Record writes that failed, by kind: unavailable (the database is away: the records wait), refused (a batch refused, its records retried one by one), given_up (a record the database refuses: the call goes uncharged)',
    labelNames: ['kind'] as const,
    registers,
  });
  const spooledTotal = new Counter({
    name: 'nexus_recorder_spooled_records_total',
    help: 'Call records written to the spool while the database was away',
    registers,
  });
  let recorderStats: (() => RecorderGauges) | undefined;
  new Gauge({
    name: 'nexus_recorder_queue_depth',
    help: 'Call records waiting in memory to be written',
    registers,
    collect() {
      if (recorderStats) this.set(recorderStats().queued);
    },
  });
  new Gauge({
    name: 'nexus_recorder_spooled_records',
    help: "Call records waiting in this process's spool files for the database",
    registers,
    collect() {
      if (recorderStats) this.set(recorderStats().spooled);
    },
  });
  new Gauge({
    name: 'nexus_recorder_database_away',
    help: 'Whether the recorder takes the database to be away (1) or not (0)',
    registers,
    collect() {
      if (recorderStats) this.set(recorderStats().outage ? 1 : 0);
    },
  });

  const pools = new Map<string, PooledDb>();
  /** A knex pool's figures (tarn); none when the client has no pool. */
  const poolGauge = (name: string, help: string, read: (pool: TarnPool) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['pool'] as const,
      registers,
      collect() {
        for (const [label, db] of pools) {
          const pool = (db.client as { pool?: TarnPool }).pool;
          if (pool) this.set({ pool: label }, read(pool));
        }
      },
    });
  poolGauge(
    'nexus_db_pool_connections_in_use',
    'Database connections lent out, by pool (main: the Admin API and the domain; gateway: the hot path)',
    (p) => p.numUsed(),
  );
  poolGauge('nexus_db_pool_connections_idle', 'Database connections open and free, by pool', (p) => p.numFree());
  poolGauge('nexus_db_pool_pending_acquires', 'Queries waiting for a database connection, by pool', (p) => p.numPendingAcquires());
  poolGauge('nexus_db_pool_max_connections', 'The largest number of connections each pool opens', (p) => p.max);

  const models = new Set<string>();
  const connections = new Map<string, ConnectionSeries>();
  const refusalChildren = new Map<string, CounterSeries>();

  function modelLabel(model: string): string {
    if (model === '') return 'none';
    if (models.has(model)) return model;
    if (models.size >= MAX_MODELS) return 'other';
    models.add(model);
    return model;
  }

  function connectionSeries(workspace: string, connection: string): ConnectionSeries {
    let series = connections.get(connection);
    if (!series) {
      series = {
        workspace,
        models: new Map(),
        upstream: upstream.child({ workspace, connection }),
        ttft: ttft.child({ workspace, connection }),
      };
      connections.set(connection, series);
    }
    return series;
  }

  function modelSeries(conn: ConnectionSeries, connection: string, model: string): ModelSeries {
    let series = conn.models.get(model);
    if (!series) {
      const w = conn.workspace;
      series = {
        model,
        calls: new Map(),
        input: tokens.child({ workspace: w, connection, model, kind: 'input' }),
        cached: tokens.child({ workspace: w, connection, model, kind: 'cached' }),
        output: tokens.child({ workspace: w, connection, model, kind: 'output' }),
        units: units.child({ workspace: w, connection, model }),
      };
      conn.models.set(model, series);
    }
    return series;
  }

  function refusal(reason: string): void {
    let child = refusalChildren.get(reason);
    if (!child) {
      child = refusals.child({ reason });
      refusalChildren.set(reason, child);
    }
    child.value++;
  }

  return {
    registry,
    routeAttempt(route: string, connection: string, outcome: string) {
      routeAttempts.inc({ route, connection, outcome });
    },
    routeFallback(route: string) {
      routeFallbacks.inc({ route });
    },
    routeRetryWait(route: string, seconds: number) {
      routeRetrySeconds.inc({ route }, seconds);
    },
    connectionAttempt(connection: string, outcome: string) {
      connectionAttempts.inc({ connection, outcome });
    },
    connectionRetryWait(connection: string, seconds: number) {
      connectionRetrySeconds.inc({ connection }, seconds);
    },
    routeBreaker(route: string, connection: string, state: 'closed' | 'open' | 'half_open') {
      routeBreakerState.set({ route, connection }, state === 'closed' ? 0 : state === 'half_open' ? 1 : 2);
    },
    outputOverBound(kind: 'stream' | 'json') {
      outputOverBound.inc({ kind });
    },
    usageMissing(protocol: string, kind: 'stream' | 'json') {
      usageMissing.inc({ protocol, kind });
    },
    leaseStatement(kind: LeaseStatement) {
      leaseStatements.inc({ kind });
    },
    observe(operation: string, method: string, status: number, seconds: number, source: StatusSource = 'nexus') {
      requests.inc({ operation, method, status: String(status), source });
      latency.observe({ operation, method }, seconds);
    },

    /** A gateway call as recorded: its outcome, its charge and its latencies. */
    callEnded(invocation: Readonly<EndedCall>, charged: Charged | null): void {
      const connection = invocation.provider_connection_id;
      const conn = connectionSeries(invocation.workspace_id, connection);
      const series = modelSeries(conn, connection, modelLabel(invocation.requested_model));
      const status = invocation.status;
      let child = series.calls.get(status);
      if (!child) {
        child = calls.child({ workspace: conn.workspace, connection, model: series.model, status: STATUS_LABEL[status] });
        series.calls.set(status, child);
      }
      child.value++;
      if (charged) {
        series.input.value += Number(charged.inputTokens);
        series.cached.value += Number(charged.cachedInputTokens);
        series.output.value += Number(charged.outputTokens);
        series.units.value += Number(charged.units);
      }
      if (status === 'REJECTED') refusal(invocation.error_code ?? 'unknown');
      if (invocation.provider_latency_ms !== null) {
        upstream.observe(conn.upstream, invocation.provider_latency_ms / 1e3);
        if (invocation.nexus_latency_ms !== null) added.observe(addedSeries, invocation.nexus_latency_ms / 1e3);
      }
      if (invocation.provider_ttft_ms !== null) ttft.observe(conn.ttft, invocation.provider_ttft_ms / 1e3);
    },

    /** A gateway call refused before its key and connection were known (an invalid key, a bad path). */
    refusedEarly(reason: string): void {
      refusal(reason);
    },

    /** The cost of a batch's calls of one series (null: none priced) and how many were unpriced, counted when the batch is written (call-spend.ts). */
    callCost(workspace: string, connection: string, model: string, micros: bigint | null, unpricedCalls: number): void {
      if (unpricedCalls > 0) unpriced.inc({ workspace, connection, model }, unpricedCalls);
      if (micros !== null) costMicros.inc({ workspace, connection, model }, Number(micros));
    },

    /** Recorder events (call-recorder.ts). */
    recorderBatch(size: number): void {
      batchSize.observe(size);
    },
    recorderFailure(kind: RecorderFailure): void {
      recorderFailures.inc({ kind });
    },
    recorderSpooled(records: number): void {
      spooledTotal.inc(records);
    },
    /** Where the recorder's queue and spool gauges are read at each scrape. */
    watchRecorder(stats: () => RecorderGauges): void {
      recorderStats = stats;
    },
    /** A knex pool to report (in use, idle, waiting), under `label`. */
    watchPool(label: string, db: PooledDb): void {
      pools.set(label, db);
    },
  };
}

/** What the metrics read of a knex (tarn) pool. */
interface TarnPool {
  max: number;
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
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

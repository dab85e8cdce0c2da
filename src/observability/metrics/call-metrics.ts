/**
 * The gateway's per-call figures: calls by outcome, tokens and units charged, refusals, the upstream, TTFT and
 * added-latency histograms, and what its answers and records tell (an output past its bound, usage missing, the
 * provider cost).
 *
 * The figures of a recorded call go through callEnded(): the series of each connection and model are looked up
 * once and kept, and updated in place (plain numbers, no label hashing per call: prom-client's own inc() and
 * observe() hash their labels each time, which made a call's figures cost several microseconds); they are read at
 * scrape time.
 */
import { Counter, type Registry } from 'prom-client';
import { InPlaceCounter, InPlaceHistogram, type CounterSeries, type HistogramSeries } from './in-place.js';

/** Distinct model names labelled per process; the others are counted as "other". */
export const MAX_MODELS = 200;

/** What a call was charged for (none: it was not charged). */
interface Charged {
  units: bigint;
  inputTokens: bigint;
  cachedInputTokens: bigint;
  outputTokens: bigint;
}

// The metrics sit below the domain and the database (docs/architecture.md, "The layers"): they name what they
// read instead of importing it. The domain's InvocationRow is checked against this where the gateway hands it over.

/** A gateway call's outcome (the invocation's status). */
type CallStatus = 'SUCCEEDED' | 'UPSTREAM_ERROR' | 'FAILED' | 'CLIENT_ABORTED' | 'REJECTED';

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
  /** The answering attempt's outcome (null: the call reached no provider). */
  attempt_status?: string | null | undefined;
  /** A route's attempts before the answering one, each on its target's connection. */
  attempts?: readonly { providerConnectionId: string; status: string }[] | null | undefined;
}

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
  /** Its attempts by outcome: every one that reached its provider, direct or through a route. */
  attempts: Map<string, CounterSeries>;
  upstream: HistogramSeries;
  ttft: HistogramSeries;
}

/** The in-place metrics of the calls, and the series kept of each connection, model and refusal reason. */
class CallSeries {
  private readonly calls: InPlaceCounter;
  private readonly tokens: InPlaceCounter;
  private readonly units: InPlaceCounter;
  private readonly refusals: InPlaceCounter;
  private readonly upstream: InPlaceHistogram;
  private readonly ttft: InPlaceHistogram;
  private readonly added: InPlaceHistogram;
  private readonly attempts: InPlaceCounter;
  private readonly addedSeries: HistogramSeries;
  private readonly models = new Set<string>();
  private readonly connections = new Map<string, ConnectionSeries>();
  private readonly refusalChildren = new Map<string, CounterSeries>();

  constructor(registry: Registry) {
    this.calls = new InPlaceCounter(
      registry,
      'nexus_gateway_calls_total',
      'Gateway calls whose key and connection were known, by workspace, connection, requested model and outcome',
    );
    this.tokens = new InPlaceCounter(
      registry,
      'nexus_gateway_tokens_total',
      'Tokens charged by the gateway, by kind: input (cached ones included), cached (input read from the cache), output',
    );
    this.units = new InPlaceCounter(registry, 'nexus_gateway_units_total', 'Quota units charged by the gateway');
    this.refusals = new InPlaceCounter(
      registry,
      'nexus_gateway_refusals_total',
      'Gateway calls refused before or instead of the upstream call, by reason (the error code: quota_insufficient, invalid_inference_key...)',
    );
    this.upstream = new InPlaceHistogram(
      registry,
      'nexus_gateway_upstream_duration_seconds',
      'Upstream call duration: from the request sent to the last byte of the answer (or its failure)',
      LATENCY_BUCKETS,
    );
    this.ttft = new InPlaceHistogram(
      registry,
      'nexus_gateway_upstream_ttft_seconds',
      "Upstream time to first token of streamed calls: from the request sent to the answer's first bytes",
      LATENCY_BUCKETS,
    );
    this.added = new InPlaceHistogram(
      registry,
      'nexus_gateway_added_latency_seconds',
      'The time Nexus adds to an upstream call: before its request is sent, and after its last byte until the call ends',
      ADDED_BUCKETS,
    );
    this.addedSeries = this.added.child({});
    this.attempts = new InPlaceCounter(
      registry,
      'nexus_gateway_upstream_attempts_total',
      "Attempts that reached a connection's provider, direct or through a route (those that failed before another target answered too), by workspace, connection and outcome (succeeded, upstream_error, failed, aborted)",
    );
  }

  /** One attempt on a connection, by its outcome (the attempt's status). */
  private attempted(conn: ConnectionSeries, connection: string, status: string): void {
    let child = conn.attempts.get(status);
    if (!child) {
      child = this.attempts.child({ workspace: conn.workspace, connection, outcome: status.toLowerCase() });
      conn.attempts.set(status, child);
    }
    child.value++;
  }

  /** A gateway call as recorded: its outcome, its charge and its latencies. */
  ended(invocation: Readonly<EndedCall>, charged: Charged | null): void {
    const connection = invocation.provider_connection_id;
    const conn = this.connectionSeries(invocation.workspace_id, connection);
    const series = this.modelSeries(conn, connection, this.modelLabel(invocation.requested_model));
    const status = invocation.status;
    let child = series.calls.get(status);
    if (!child) {
      child = this.calls.child({ workspace: conn.workspace, connection, model: series.model, status: STATUS_LABEL[status] });
      series.calls.set(status, child);
    }
    child.value++;
    if (charged) {
      series.input.value += Number(charged.inputTokens);
      series.cached.value += Number(charged.cachedInputTokens);
      series.output.value += Number(charged.outputTokens);
      series.units.value += Number(charged.units);
    }
    if (status === 'REJECTED') this.refused(invocation.error_code ?? 'unknown');
    if (invocation.provider_latency_ms !== null) {
      this.upstream.observe(conn.upstream, invocation.provider_latency_ms / 1e3);
      if (invocation.nexus_latency_ms !== null) this.added.observe(this.addedSeries, invocation.nexus_latency_ms / 1e3);
    }
    if (invocation.provider_ttft_ms !== null) this.ttft.observe(conn.ttft, invocation.provider_ttft_ms / 1e3);
    if (invocation.attempt_status) this.attempted(conn, connection, invocation.attempt_status);
    for (const earlier of invocation.attempts ?? []) {
      this.attempted(
        this.connectionSeries(invocation.workspace_id, earlier.providerConnectionId),
        earlier.providerConnectionId,
        earlier.status,
      );
    }
  }

  refused(reason: string): void {
    let child = this.refusalChildren.get(reason);
    if (!child) {
      child = this.refusals.child({ reason });
      this.refusalChildren.set(reason, child);
    }
    child.value++;
  }

  private modelLabel(model: string): string {
    if (model === '') return 'none';
    if (this.models.has(model)) return model;
    if (this.models.size >= MAX_MODELS) return 'other';
    this.models.add(model);
    return model;
  }

  private connectionSeries(workspace: string, connection: string): ConnectionSeries {
    let series = this.connections.get(connection);
    if (!series) {
      series = {
        workspace,
        models: new Map(),
        attempts: new Map(),
        upstream: this.upstream.child({ workspace, connection }),
        ttft: this.ttft.child({ workspace, connection }),
      };
      this.connections.set(connection, series);
    }
    return series;
  }

  private modelSeries(conn: ConnectionSeries, connection: string, model: string): ModelSeries {
    let series = conn.models.get(model);
    if (!series) {
      const w = conn.workspace;
      series = {
        model,
        calls: new Map(),
        input: this.tokens.child({ workspace: w, connection, model, kind: 'input' }),
        cached: this.tokens.child({ workspace: w, connection, model, kind: 'cached' }),
        output: this.tokens.child({ workspace: w, connection, model, kind: 'output' }),
        units: this.units.child({ workspace: w, connection, model }),
      };
      conn.models.set(model, series);
    }
    return series;
  }
}

/** What the gateway's answers and records tell besides each call's figures. */
function createAnswerMetrics(registers: Registry[]) {
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
  return {
    outputOverBound(kind: 'stream' | 'json') {
      outputOverBound.inc({ kind });
    },
    usageMissing(protocol: string, kind: 'stream' | 'json') {
      usageMissing.inc({ protocol, kind });
    },
    /** The cost of a batch's calls of one series (null: none priced) and how many were unpriced, counted when the batch is written (src/records/call-spend.ts). */
    callCost(workspace: string, connection: string, model: string, micros: bigint | null, unpricedCalls: number): void {
      if (unpricedCalls > 0) unpriced.inc({ workspace, connection, model }, unpricedCalls);
      if (micros !== null) costMicros.inc({ workspace, connection, model }, Number(micros));
    },
  };
}

export function createCallMetrics(registry: Registry) {
  const series = new CallSeries(registry);
  return {
    ...createAnswerMetrics([registry]),
    /** A gateway call as recorded: its outcome, its charge and its latencies. */
    callEnded(invocation: Readonly<EndedCall>, charged: Charged | null): void {
      series.ended(invocation, charged);
    },
    /** A gateway call refused before its key and connection were known (an invalid key, a bad path). */
    refusedEarly(reason: string): void {
      series.refused(reason);
    },
  };
}

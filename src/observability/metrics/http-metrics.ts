/**
 * HTTP requests, the gateway's calls too: counted by operation, method, status and whose status it is, and timed.
 * Their series are kept in place (in-place.ts) and found by their labels' text: every request, a gateway call's
 * too, updates them, and prom-client's own inc() and observe() hash and check their labels each time (about a
 * microsecond and a half a request).
 */
import type { Registry } from 'prom-client';
import { InPlaceCounter, InPlaceHistogram, type CounterSeries, type HistogramSeries } from './in-place.js';

/** Who decided an HTTP answer's status: Nexus, or the upstream whose answer the gateway relayed. */
type StatusSource = 'nexus' | 'upstream';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export function createHttpMetrics(registry: Registry) {
  const requests = new InPlaceCounter(
    registry,
    'nexus_http_requests_total',
    "HTTP requests by operation, method, status and source of the status (nexus: Nexus answered; upstream: the gateway relayed the upstream's answer)",
  );
  const latency = new InPlaceHistogram(
    registry,
    'nexus_http_request_duration_seconds',
    'HTTP request latency by operation (until the last byte)',
    BUCKETS,
  );
  /** An operation and method's series: its timing, and its counts by status, then source. */
  interface Series {
    times: HistogramSeries;
    counts: Map<number, Partial<Record<StatusSource, CounterSeries>>>;
  }
  // Found by their labels in turn (no label text built per request). The operations, methods, statuses and
  // sources are closed sets: the series are as many as prom-client's were.
  const series = new Map<string, Map<string, Series>>();
  function seriesOf(operation: string, method: string): Series {
    let byMethod = series.get(operation);
    if (!byMethod) series.set(operation, (byMethod = new Map()));
    let found = byMethod.get(method);
    if (!found) byMethod.set(method, (found = { times: latency.child({ operation, method }), counts: new Map() }));
    return found;
  }
  return {
    observe(operation: string, method: string, status: number, seconds: number, source: StatusSource = 'nexus') {
      const s = seriesOf(operation, method);
      let bySource = s.counts.get(status);
      if (!bySource) s.counts.set(status, (bySource = {}));
      (bySource[source] ??= requests.child({ operation, method, status: String(status), source })).value++;
      latency.observe(s.times, seconds);
    },
  };
}

/** HTTP requests, the gateway's calls too: counted by operation, method, status and whose status it is, and timed. */
import { Counter, Histogram, type Registry } from 'prom-client';

/** Who decided an HTTP answer's status: Nexus, or the upstream whose answer the gateway relayed. */
type StatusSource = 'nexus' | 'upstream';

export function createHttpMetrics(registers: Registry[]) {
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
  return {
    observe(operation: string, method: string, status: number, seconds: number, source: StatusSource = 'nexus') {
      requests.inc({ operation, method, status: String(status), source });
      latency.observe({ operation, method }, seconds);
    },
  };
}

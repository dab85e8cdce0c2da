/**
 * Routes (docs/routes.md): each attempt by target and outcome, the moves to another target, the time spent
 * waiting between attempts, and each target's breaker (0 closed, 1 half-open, 2 open); and a plain connection's
 * retries (docs/routes.md "Retries on a plain connection").
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export function createRouteMetrics(registers: Registry[]) {
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
  // A plain connection with a retry policy: its attempts by outcome, and the time its calls waited between them.
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
  return {
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
  };
}

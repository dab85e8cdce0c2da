/**
 * The routes this process serves and their targets' circuit breakers (docs/routes.md), a process-wide part
 * (gateway-parts.ts).
 *
 * Routes are read whole and kept in memory at start, and read again when the change feed names one (on
 * commit here, by NOTIFY elsewhere) or starts afresh, as every other cached row is. Breakers: each process counts
 * its own calls to a target (failures in a row, and the error rate over a window); a transition (closed -> open ->
 * half_open -> closed) is made by one function, `transition`, which writes the state to route_breakers for every
 * process and, when that conditional write changed the row (the breaker was still in the state it leaves), tells
 * the `onBreakerTransition` hook: of processes that open (or close) a breaker at once, one tells it. Every process
 * reads route_breakers each `pollMs` (default 250 ms), so a target another process opened is skipped here within
 * a second. An open breaker whose cooldown is over lets one real call through as its probe: claimed with one
 * UPDATE, so one process at a time probes it.
 */
import type { Clock } from '../domain/actor.js';
import type { ChangeFeed } from '../domain/changes/change-feed.js';
import type { RouteRepo } from '../domain/routes/route-repo.js';
import type { BreakerRow, BreakerState, RouteRow } from '../domain/routes/route-types.js';
import type { Logger } from '../observability/logger.js';

/** A breaker's transition, as the hook is told of it (the events area can emit provider_connection.unhealthy / .recovered). */
export interface BreakerTransition {
  routeId: string;
  workspaceId: string;
  connectionId: string;
  from: BreakerState;
  to: BreakerState;
  at: Date;
  /** Why: the last error that opened it, or `probe_succeeded` / `probe_started`. */
  reason: string;
}

/** Whether a call may try a target now. */
export type TargetAvailability = 'closed' | 'probe' | 'open';

/** A half-open probe's claim lapses after this, should its process die before it ends. */
const PROBE_CLAIM_MS = 30_000;

interface LocalCounts {
  consecutive: number;
  windowStart: number;
  calls: number;
  failures: number;
}

const keyOf = (routeId: string, connectionId: string) => `${routeId} ${connectionId}`;

export function createRouteRegistry(deps: {
  repo: Pick<RouteRepo, 'active' | 'breakers' | 'transitionBreaker' | 'claimProbe'>;
  changes: ChangeFeed;
  clock: Clock;
  logger: Logger;
  pollMs?: number | undefined;
  onBreakerTransition?: ((transition: BreakerTransition) => void) | undefined;
}) {
  const { repo, clock, logger } = deps;
  const routes = new Map<string, RouteRow>();
  const breakers = new Map<string, BreakerRow>();
  const counts = new Map<string, LocalCounts>();
  const inFlight = new Map<string, number>();
  const hooks = new Set<(transition: BreakerTransition) => void>();
  if (deps.onBreakerTransition) hooks.add(deps.onBreakerTransition);
  let closed = false;

  async function loadRoutes(id?: string): Promise<void> {
    const rows = await repo.active(id);
    if (id) {
      routes.delete(id);
    } else {
      routes.clear();
    }
    for (const row of rows) routes.set(row.id, row);
  }

  async function loadBreakers(): Promise<void> {
    const rows = await repo.breakers(null);
    for (const row of rows) {
      const key = keyOf(row.route_id, row.provider_connection_id);
      const known = breakers.get(key);
      // A transition made here and not yet read back is newer than a poll that began before it.
      if (!known || known.updated_at <= row.updated_at) breakers.set(key, row);
    }
  }

  const report = (err: Error) => {
    if (!closed) logger.warn({ msg: 'could not read routes', error: err.message });
  };
  // The reads and writes under way, which close() waits for: none outlives the database it uses.
  const pending = new Set<Promise<void>>();
  const track = (work: Promise<void>): void => {
    const p: Promise<void> = work.finally(() => pending.delete(p));
    pending.add(p);
  };
  const read = (work: Promise<unknown>): void => track(work.then(() => undefined, report));
  const unsubscribe = deps.changes.subscribe((change) => {
    if (change === null) read(loadRoutes());
    else if (change.kind === 'route') read(loadRoutes(change.id));
  });
  read(loadRoutes());
  // The breakers change with calls, not through the change feed: polled, one poll at a time.
  let polling = false;
  const timer = setInterval(() => {
    if (polling) return;
    polling = true;
    read(loadBreakers().finally(() => (polling = false)));
  }, deps.pollMs ?? 250);
  timer.unref();

  function countsOf(key: string, now: number, windowMs: number): LocalCounts {
    let c = counts.get(key);
    if (!c) {
      c = { consecutive: 0, windowStart: now, calls: 0, failures: 0 };
      counts.set(key, c);
    }
    if (now - c.windowStart >= windowMs) {
      c.windowStart = now;
      c.calls = 0;
      c.failures = 0;
    }
    return c;
  }

  /** The one place a breaker changes state: kept here, written for every process, told to the hook. */
  function transition(route: RouteRow, connectionId: string, to: BreakerState, reason: string, fields: Partial<BreakerRow> = {}): void {
    const key = keyOf(route.id, connectionId);
    const at = clock.now();
    const from = breakers.get(key)?.state ?? 'closed';
    const row: BreakerRow = {
      route_id: route.id,
      provider_connection_id: connectionId,
      workspace_id: route.workspace_id,
      state: to,
      retry_at: null,
      probe_until: null,
      opened_at: breakers.get(key)?.opened_at ?? null,
      last_failure_at: breakers.get(key)?.last_failure_at ?? null,
      last_error: breakers.get(key)?.last_error ?? null,
      ...fields,
      updated_at: at,
    };
    breakers.set(key, row);
    const c = counts.get(key);
    if (c && to !== 'half_open') {
      c.consecutive = 0;
      c.calls = 0;
      c.failures = 0;
      c.windowStart = at.getTime();
    }
    // Written if the breaker is still as this process saw it; the hook is told only then, so of processes that
    // make the same transition at once one announces it.
    const written = repo.transitionBreaker(row, from).then(
      (saved) => {
        if (!saved) {
          // Another process's change came first: the table's row replaces this one at the next poll.
          if (breakers.get(key) === row) breakers.set(key, { ...row, updated_at: new Date(0) });
          return;
        }
        tell({ routeId: route.id, workspaceId: route.workspace_id, connectionId, from, to, at, reason });
      },
      (err: Error) => {
        logger.warn({ msg: 'could not save a breaker', routeId: route.id, connectionId, error: err.message });
      },
    );
    track(written);
  }

  function tell(transition: BreakerTransition): void {
    for (const hook of hooks) {
      try {
        hook(transition);
      } catch (err) {
        logger.warn({ msg: 'a breaker hook failed', error: (err as Error).message });
      }
    }
  }

  return {
    /** The route with this id, if it is one this process serves (a Map lookup: a connection's call pays only this). */
    get: (id: string): RouteRow | undefined => routes.get(id),

    /** Reads the routes and breakers now (at start, and in tests instead of waiting for the poll). */
    refresh: () => Promise.all([loadRoutes(), loadBreakers()]).then(() => undefined),

    availability(routeId: string, connectionId: string, now: Date): TargetAvailability {
      const b = breakers.get(keyOf(routeId, connectionId));
      if (!b || b.state === 'closed') return 'closed';
      if (b.state === 'open') return b.retry_at && b.retry_at <= now ? 'probe' : 'open';
      return b.probe_until && b.probe_until <= now ? 'probe' : 'open';
    },

    /** The breaker row of a target, if it ever left closed. */
    breaker: (routeId: string, connectionId: string): BreakerRow | undefined => breakers.get(keyOf(routeId, connectionId)),

    /** Claims the target's one half-open probe (every process's); false: another has it, or it closed meanwhile. */
    async claimProbe(route: RouteRow, connectionId: string): Promise<boolean> {
      const now = clock.now();
      const row = await repo.claimProbe(route.id, connectionId, now, new Date(now.getTime() + PROBE_CLAIM_MS));
      if (!row) return false;
      const key = keyOf(route.id, connectionId);
      const from = breakers.get(key)?.state ?? 'open';
      breakers.set(key, row);
      tell({ routeId: route.id, workspaceId: route.workspace_id, connectionId, from, to: 'half_open', at: now, reason: 'probe_started' });
      return true;
    },

    /** An attempt on the target answered (any status the route does not retry on). */
    succeeded(route: RouteRow, connectionId: string): void {
      const key = keyOf(route.id, connectionId);
      const c = countsOf(key, clock.now().getTime(), route.breaker.windowMs);
      c.consecutive = 0;
      c.calls++;
      const state = breakers.get(key)?.state;
      if (state === 'half_open' || state === 'open') transition(route, connectionId, 'closed', 'probe_succeeded');
    },

    /** An attempt on the target failed (connect error, timeout, a status it retries on, a stream that broke). */
    failed(route: RouteRow, connectionId: string, error: string): void {
      const key = keyOf(route.id, connectionId);
      const now = clock.now();
      const c = countsOf(key, now.getTime(), route.breaker.windowMs);
      c.consecutive++;
      c.calls++;
      c.failures++;
      const b = breakers.get(key);
      const settings = route.breaker;
      const failure = { last_failure_at: now, last_error: error };
      if (b?.state === 'half_open' || b?.state === 'open') {
        if (b.state === 'half_open')
          transition(route, connectionId, 'open', error, {
            ...failure,
            opened_at: now,
            retry_at: new Date(now.getTime() + settings.cooldownMs),
          });
        return;
      }
      const rate = c.calls >= settings.minimumCalls && c.failures * 100 >= settings.errorRatePercent * c.calls;
      if (c.consecutive >= settings.consecutiveFailures || rate) {
        transition(route, connectionId, 'open', error, {
          ...failure,
          opened_at: now,
          retry_at: new Date(now.getTime() + settings.cooldownMs),
        });
      }
    },

    /** Calls in flight on this process per connection (least-busy). */
    busy: (connectionId: string): number => inFlight.get(connectionId) ?? 0,
    enter(connectionId: string): void {
      inFlight.set(connectionId, (inFlight.get(connectionId) ?? 0) + 1);
    },
    leave(connectionId: string): void {
      const n = (inFlight.get(connectionId) ?? 1) - 1;
      if (n <= 0) inFlight.delete(connectionId);
      else inFlight.set(connectionId, n);
    },

    /** Adds a hook told of every breaker transition made on this process; returns the function that removes it. */
    onBreakerTransition(hook: (transition: BreakerTransition) => void): () => void {
      hooks.add(hook);
      return () => hooks.delete(hook);
    },

    async close(): Promise<void> {
      closed = true;
      clearInterval(timer);
      unsubscribe();
      hooks.clear();
      await Promise.all(pending);
    },
  };
}

export type RouteRegistry = ReturnType<typeof createRouteRegistry>;

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
import { hasUuidForm } from '../ids.js';

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

export interface RouteRegistryDeps {
  repo: Pick<RouteRepo, 'active' | 'breakers' | 'transitionBreaker' | 'claimProbe'>;
  changes: ChangeFeed;
  clock: Clock;
  logger: Logger;
  pollMs?: number | undefined;
  onBreakerTransition?: ((transition: BreakerTransition) => void) | undefined;
}

export class RouteRegistry {
  private readonly routes = new Map<string, RouteRow>();
  private readonly breakers = new Map<string, BreakerRow>();
  private readonly counts = new Map<string, LocalCounts>();
  private readonly inFlight = new Map<string, number>();
  private readonly hooks = new Set<(transition: BreakerTransition) => void>();
  private closed = false;
  /** The reads and writes under way, which close() waits for: none outlives the database it uses. */
  private readonly pending = new Set<Promise<void>>();
  private readonly unsubscribe: () => void;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly deps: RouteRegistryDeps) {
    if (deps.onBreakerTransition) this.hooks.add(deps.onBreakerTransition);
    this.unsubscribe = deps.changes.subscribe((change) => {
      if (change === null) this.read(this.loadRoutes());
      else if (change.kind === 'route') {
        // Forgotten at once, not when the read below answers: a call that comes meanwhile reads the route itself
        // (fetch), so a change made here applies to the next call, as the change feed promises.
        this.routes.delete(change.id);
        this.read(this.loadRoutes(change.id));
      }
    });
    this.read(this.loadRoutes());
    // The breakers change with calls, not through the change feed: polled, one poll at a time.
    let polling = false;
    this.timer = setInterval(() => {
      if (polling) return;
      polling = true;
      this.read(this.loadBreakers().finally(() => (polling = false)));
    }, deps.pollMs ?? 250);
    this.timer.unref();
  }

  /** The route with this id, if it is one this process serves (a Map lookup: a connection's call pays only this). */
  get(id: string): RouteRow | undefined {
    return this.routes.get(id);
  }

  /**
   * The route with this id, read from the database when this process has not heard of it: the change feed tells
   * of a new route a moment after its commit, and a call may come first. Only a call to an id that is no
   * connection of its key's workspace pays this read.
   */
  async fetch(id: string): Promise<RouteRow | undefined> {
    const known = this.routes.get(id);
    if (known || !hasUuidForm(id) || this.closed) return known;
    const [row] = await this.deps.repo.active(id);
    if (row) this.routes.set(row.id, row);
    return row;
  }

  /** Reads the routes and breakers now (at start, and in tests instead of waiting for the poll). */
  refresh(): Promise<void> {
    return Promise.all([this.loadRoutes(), this.loadBreakers()]).then(() => undefined);
  }

  availability(routeId: string, connectionId: string, now: Date): TargetAvailability {
    const b = this.breakers.get(keyOf(routeId, connectionId));
    if (!b || b.state === 'closed') return 'closed';
    if (b.state === 'open') return b.retry_at && b.retry_at <= now ? 'probe' : 'open';
    return b.probe_until && b.probe_until <= now ? 'probe' : 'open';
  }

  /** The breaker row of a target, if it ever left closed. */
  breaker(routeId: string, connectionId: string): BreakerRow | undefined {
    return this.breakers.get(keyOf(routeId, connectionId));
  }

  /** Claims the target's one half-open probe (every process's); false: another has it, or it closed meanwhile. */
  async claimProbe(route: RouteRow, connectionId: string): Promise<boolean> {
    const now = this.deps.clock.now();
    const row = await this.deps.repo.claimProbe(route.id, connectionId, now, new Date(now.getTime() + PROBE_CLAIM_MS));
    if (!row) return false;
    const key = keyOf(route.id, connectionId);
    const from = this.breakers.get(key)?.state ?? 'open';
    this.breakers.set(key, row);
    this.tell({
      routeId: route.id,
      workspaceId: route.workspace_id,
      connectionId,
      from,
      to: 'half_open',
      at: now,
      reason: 'probe_started',
    });
    return true;
  }

  /** An attempt on the target answered (any status the route does not retry on). */
  succeeded(route: RouteRow, connectionId: string): void {
    const key = keyOf(route.id, connectionId);
    const c = this.countsOf(key, this.deps.clock.now().getTime(), route.breaker.windowMs);
    c.consecutive = 0;
    c.calls++;
    const state = this.breakers.get(key)?.state;
    if (state === 'half_open' || state === 'open') this.transition(route, connectionId, 'closed', 'probe_succeeded');
  }

  /** An attempt on the target failed (connect error, timeout, a status it retries on, a stream that broke). */
  failed(route: RouteRow, connectionId: string, error: string): void {
    const key = keyOf(route.id, connectionId);
    const now = this.deps.clock.now();
    const c = this.countsOf(key, now.getTime(), route.breaker.windowMs);
    c.consecutive++;
    c.calls++;
    c.failures++;
    const b = this.breakers.get(key);
    const settings = route.breaker;
    const failure = { last_failure_at: now, last_error: error };
    if (b?.state === 'half_open' || b?.state === 'open') {
      if (b.state === 'half_open')
        this.transition(route, connectionId, 'open', error, {
          ...failure,
          opened_at: now,
          retry_at: new Date(now.getTime() + settings.cooldownMs),
        });
      return;
    }
    const rate = c.calls >= settings.minimumCalls && c.failures * 100 >= settings.errorRatePercent * c.calls;
    if (c.consecutive >= settings.consecutiveFailures || rate) {
      this.transition(route, connectionId, 'open', error, {
        ...failure,
        opened_at: now,
        retry_at: new Date(now.getTime() + settings.cooldownMs),
      });
    }
  }

  /** Calls in flight on this process per connection (least-busy; passed on as a function: route-plan.ts). */
  readonly busy = (connectionId: string): number => this.inFlight.get(connectionId) ?? 0;

  enter(connectionId: string): void {
    this.inFlight.set(connectionId, (this.inFlight.get(connectionId) ?? 0) + 1);
  }

  leave(connectionId: string): void {
    const n = (this.inFlight.get(connectionId) ?? 1) - 1;
    if (n <= 0) this.inFlight.delete(connectionId);
    else this.inFlight.set(connectionId, n);
  }

  /** Adds a hook told of every breaker transition made on this process; returns the function that removes it. */
  onBreakerTransition(hook: (transition: BreakerTransition) => void): () => void {
    this.hooks.add(hook);
    return () => this.hooks.delete(hook);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.unsubscribe();
    this.hooks.clear();
    await Promise.all(this.pending);
  }

  private async loadRoutes(id?: string): Promise<void> {
    const rows = await this.deps.repo.active(id);
    if (id) {
      this.routes.delete(id);
    } else {
      this.routes.clear();
    }
    for (const row of rows) this.routes.set(row.id, row);
  }

  private async loadBreakers(): Promise<void> {
    const rows = await this.deps.repo.breakers(null);
    for (const row of rows) {
      const key = keyOf(row.route_id, row.provider_connection_id);
      const known = this.breakers.get(key);
      // A transition made here and not yet read back is newer than a poll that began before it.
      if (!known || known.updated_at <= row.updated_at) this.breakers.set(key, row);
    }
  }

  private track(work: Promise<void>): void {
    const p: Promise<void> = work.finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  private read(work: Promise<unknown>): void {
    this.track(
      work.then(
        () => undefined,
        (err: Error) => {
          if (!this.closed) this.deps.logger.warn({ msg: 'could not read routes', error: err.message });
        },
      ),
    );
  }

  private countsOf(key: string, now: number, windowMs: number): LocalCounts {
    let c = this.counts.get(key);
    if (!c) {
      c = { consecutive: 0, windowStart: now, calls: 0, failures: 0 };
      this.counts.set(key, c);
    }
    if (now - c.windowStart >= windowMs) {
      c.windowStart = now;
      c.calls = 0;
      c.failures = 0;
    }
    return c;
  }

  /** The one place a breaker changes state: kept here, written for every process, told to the hook. */
  private transition(route: RouteRow, connectionId: string, to: BreakerState, reason: string, fields: Partial<BreakerRow> = {}): void {
    const key = keyOf(route.id, connectionId);
    const at = this.deps.clock.now();
    const known = this.breakers.get(key);
    const from = known?.state ?? 'closed';
    const row: BreakerRow = {
      route_id: route.id,
      provider_connection_id: connectionId,
      workspace_id: route.workspace_id,
      state: to,
      retry_at: null,
      probe_until: null,
      opened_at: known?.opened_at ?? null,
      last_failure_at: known?.last_failure_at ?? null,
      last_error: known?.last_error ?? null,
      ...fields,
      updated_at: at,
    };
    this.breakers.set(key, row);
    const c = this.counts.get(key);
    if (c && to !== 'half_open') {
      c.consecutive = 0;
      c.calls = 0;
      c.failures = 0;
      c.windowStart = at.getTime();
    }
    // Written if the breaker is still as this process saw it; the hook is told only then, so of processes that
    // make the same transition at once one announces it.
    const written = this.deps.repo.transitionBreaker(row, from).then(
      (saved) => {
        if (!saved) {
          // Another process's change came first: the table's row replaces this one at the next poll.
          if (this.breakers.get(key) === row) this.breakers.set(key, { ...row, updated_at: new Date(0) });
          return;
        }
        this.tell({ routeId: route.id, workspaceId: route.workspace_id, connectionId, from, to, at, reason });
      },
      (err: Error) => {
        this.deps.logger.warn({ msg: 'could not save a breaker', routeId: route.id, connectionId, error: err.message });
      },
    );
    this.track(written);
  }

  private tell(transition: BreakerTransition): void {
    for (const hook of this.hooks) {
      try {
        hook(transition);
      } catch (err) {
        this.deps.logger.warn({ msg: 'a breaker hook failed', error: (err as Error).message });
      }
    }
  }
}

export function createRouteRegistry(deps: RouteRegistryDeps): RouteRegistry {
  return new RouteRegistry(deps);
}

/**
 * A call through a route (docs/routes.md): its attempts, target after target, until one answers.
 *
 * The call was admitted once (metered-call.ts: quota reserved at the largest bound among the targets); each
 * attempt is a Relay on one target's connection, its model mapped, its path and key that connection's. An
 * attempt that is not the call's last relays nothing until its first byte (relay.ts, `failover`): a connect
 * error, a timeout before the headers, a stream with no byte by its first-token deadline, a status of the
 * route's retry list, or an answer that broke before its first byte moves the call on, free and kept on the
 * invocation. The same target is tried again (its `attempts`) after an exponential backoff with jitter or
 * the answer's Retry-After (up to retryAfterCapMs), while the call's budget of waiting lasts; then the next
 * target. Once a byte has reached the client, the attempt is the call's answer, whatever follows. Each
 * attempt tells the target's breaker how it went (route-registry.ts).
 *
 * A plain connection with a retry policy (its `retry`) has its calls' attempts made by the same loop, over one
 * target (itself) and without a breaker. The loop decides when an attempt starts, moves on or is the answer; it
 * hands each of those events to the call's flow (call-flow.ts), which tells the call.
 */
import type { ConnectionRetry } from '../domain/provider-connections/connection-retry.js';
import type { RetrySettings, RouteRow, RouteTarget } from '../domain/routes/route-types.js';
import { AppError } from '../errors.js';
import type { CacheEntry } from './auth-cache.js';
import { protocolOf, type ProtocolProfile } from '../protocols/index.js';
import { withModelNamed } from '../protocols/inspectors.js';
import type { Protocol } from '../protocols/protocol.js';
import type { CallContext, CallFlow, CallFlowDeps } from './call-flow.js';
import type { Relay } from './relay.js';
import { Upload, type Sendable } from './upload.js';
import { backoffMs, orderTargets } from './route-plan.js';
import type { RouteRegistry } from './route-registry.js';

/**
 * What attempts are counted by (metrics): for a route, each attempt's outcome, its moves to another target and the
 * time spent waiting; for a plain connection with a retry policy, each attempt's outcome and the time spent waiting.
 */
export interface AttemptMetrics {
  attempt(routeId: string, connectionId: string, outcome: string): void;
  fallback(routeId: string): void;
  retryWait(routeId: string, seconds: number): void;
  connectionAttempt(connectionId: string, outcome: string): void;
  connectionRetryWait(connectionId: string, seconds: number): void;
}

/** The profile whose paths and inspectors a route's calls use: its targets' shared body shape (azure-openai takes openai's). */
export function routeProfile(profile: ProtocolProfile): ProtocolProfile {
  return protocolOf(profile).bodyShape;
}

/**
 * The targets a call (or a Realtime session) tries, in order: by the strategy, open breakers skipped (or, all open,
 * the least recently failed).
 */
export function routeCandidates(
  registry: RouteRegistry,
  route: RouteRow,
  usable: Map<string, CacheEntry>,
  now: Date,
  random: () => number,
): RouteTarget[] {
  const ordered = orderTargets(
    route.strategy,
    route.targets.filter((t) => usable.has(t.providerConnectionId)),
    random,
    registry.busy,
  );
  const open = ordered.filter((t) => registry.availability(route.id, t.providerConnectionId, now) !== 'open');
  if (open.length || !ordered.length) return open;
  if (!route.try_when_all_open) throw noHealthyTarget(registry, route, now);
  const failedAt = (t: RouteTarget) => registry.breaker(route.id, t.providerConnectionId)?.last_failure_at?.getTime() ?? 0;
  return [ordered.reduce((a, b) => (failedAt(b) < failedAt(a) ? b : a))];
}

/** The usable targets of a route (ACTIVE connections the key's workspace has), each with its key's lookup. */
export function usableTargets(route: RouteRow, entries: CacheEntry[]): Map<string, CacheEntry> {
  const usable = new Map<string, CacheEntry>();
  route.targets.forEach((t, i) => {
    const row = entries[i]!.row;
    if (row?.connection_id && row.connection_status === 'ACTIVE') usable.set(t.providerConnectionId, entries[i]!);
  });
  return usable;
}

/** The body naming another model (a target's model map, inspectors.ts's withModelNamed); an upload's, its `model` field. */
function withModel(body: Sendable, model: string): Sendable {
  return body instanceof Upload ? body.withField('model', model) : withModelNamed(body, model);
}

/** What one target of a call is sent: its key's lookup, the body and model, and the path. */
interface Sent {
  entry: CacheEntry;
  model: string;
  body: Sendable;
  providerPath: string;
}

/** A call's attempts: the targets in order, when an answer moves the call on, how long it may wait. */
interface AttemptPlan {
  targets: readonly RouteTarget[];
  retryOn: ReadonlySet<number>;
  retry: RetrySettings;
  /** A route's call: its breakers are told of each attempt. None: a plain connection's. */
  route: RouteRow | undefined;
  /** Counts an attempt's outcome (metrics: the route's or the plain connection's). */
  attempted(connectionId: string, outcome: string): void;
  /** Counts the time waited before a retry. */
  waited(seconds: number): void;
  send(target: RouteTarget): Sent;
  /** The headers an answer carries besides the call's own (x-nexus-attempts). */
  answerHeaders(attempts: number, connectionId: string): string[];
  /** The API whose shape the gateway's own refusal of an answer takes. */
  errors: Protocol;
  /** The refusal when every attempt moved on and none is left. */
  exhausted(retryAfterMs: number | undefined): AppError;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function noHealthyTarget(registry: RouteRegistry, route: RouteRow, now: Date, retryAfterMs?: number): AppError {
  let soonest = retryAfterMs;
  for (const t of route.targets) {
    const at = registry.breaker(route.id, t.providerConnectionId)?.retry_at;
    if (at && at > now && (soonest === undefined || at.getTime() - now.getTime() < soonest)) soonest = at.getTime() - now.getTime();
  }
  return new AppError('no_healthy_target', 'No target of this route can take the call now; retry later', {
    retry_after: Math.max(1, Math.ceil((soonest ?? 1000) / 1000)),
  });
}

export interface RouteCallsDeps extends Pick<CallFlowDeps, 'config' | 'clock' | 'registry' | 'metrics'> {
  /** The call's flow: told of each attempt (started, moved on, answered). */
  flow: Pick<CallFlow, 'attempt' | 'movedOn' | 'answer'>;
  random?: () => number;
}

export class RouteCalls {
  private readonly random: () => number;

  constructor(private readonly deps: RouteCallsDeps) {
    this.random = deps.random ?? Math.random;
  }

  /**
   * The call's attempts, target after target; returns once one answered (relayed) or throws `plan.exhausted`'s
   * refusal when none could. An attempt is the call's last when no other can follow it: no target after its
   * own, and no retry of its own left or within the waiting budget. On the last target, an answer whose
   * Retry-After the call would not wait for is the call's answer.
   */
  private async attemptAll(ctx: CallContext, plan: AttemptPlan): Promise<void> {
    const { config, clock, registry, metrics, flow } = this.deps;
    const { targets, retry, retryOn, route } = plan;
    let waited = 0;
    /** Whether the call waits this Retry-After for a retry on the same target. */
    const waitsFor = (ms: number) => ms <= retry.retryAfterCapMs && waited + ms <= retry.budgetMs;
    let attempts = 0;
    let lastRetryAfter: number | undefined;
    for (let ti = 0; ti < targets.length; ti++) {
      const t = targets[ti]!;
      const cid = t.providerConnectionId;
      // An open breaker past its cooldown: this call is its probe only if no other process's call is.
      if (route && registry.availability(route.id, cid, clock.now()) === 'probe' && !(await registry.claimProbe(route, cid))) continue;
      if (attempts > 0 && route) metrics?.fallback(route.id);
      const sent = plan.send(t);
      const lastTarget = ti === targets.length - 1;
      for (let n = 0; n < t.attempts; n++) {
        // The wait before a retry on this target (unless the answer names its own: Retry-After).
        const backoff = backoffMs(n + 1, retry, this.random);
        const last = lastTarget && (n + 1 >= t.attempts || waited + backoff > retry.budgetMs);
        attempts++;
        registry.enter(cid);
        let relay: Relay;
        try {
          relay = await flow.attempt(ctx, {
            entry: sent.entry,
            providerPath: sent.providerPath,
            body: sent.body,
            timeoutMs: t.timeoutMs ?? sent.entry.row!.upstream_timeout_ms ?? config.upstreamTimeoutMs,
            connectionId: cid,
            answerHeaders: plan.answerHeaders(attempts, cid),
            failover: last ? undefined : { retryOn, firstTokenMs: t.firstTokenTimeoutMs, waitsFor: lastTarget ? waitsFor : undefined },
          });
        } finally {
          registry.leave(cid);
        }
        const movedOn = relay.failedOver !== undefined || (!last && relay.end === 'unanswered' && !relay.clientGone && !relay.cancelReason);
        if (!movedOn) {
          const ok = relay.end === 'complete' && relay.status! < 500 && !retryOn.has(relay.status!);
          if (route) {
            if (ok) registry.succeeded(route, cid);
            else if (!relay.clientGone && !relay.cancelReason)
              registry.failed(route, cid, relay.status !== undefined ? `http_${relay.status}` : 'upstream_unavailable');
          }
          plan.attempted(cid, ok ? 'answered' : 'failed');
          flow.answer(ctx, plan.errors);
          return;
        }
        const failed = flow.movedOn(ctx, sent.model);
        if (route) registry.failed(route, cid, failed.errorCode ?? 'upstream_error');
        plan.attempted(cid, failed.errorCode ?? 'failed');
        lastRetryAfter = relay.failedOver?.retryAfterMs;
        if (n + 1 >= t.attempts) break;
        // The same target again, after its backoff, while the call's waiting budget lasts; else the next target.
        if (lastRetryAfter !== undefined && !waitsFor(lastRetryAfter)) break;
        const delay = lastRetryAfter ?? backoff;
        if (waited + delay > retry.budgetMs) break;
        waited += delay;
        plan.waited(delay / 1000);
        await sleep(delay);
        if (ctx.res.destroyed) break;
      }
    }
    // Every attempt moved on and none is left: nothing reached the client.
    throw plan.exhausted(lastRetryAfter);
  }

  /** A call through a route: its usable targets by the route's strategy, each target's model map and path. */
  async relayRoute(ctx: CallContext, body: Sendable, route: RouteRow, usable: Map<string, CacheEntry>): Promise<void> {
    const { clock, registry, metrics } = this.deps;
    const started = clock.now();
    const targets = routeCandidates(this.deps.registry, route, usable, started, this.random);
    if (!targets.length) throw noHealthyTarget(registry, route, started);
    const requested = ctx.call.admitted.prepared?.requestedModel ?? '';
    const first = usable.get(targets[0]!.providerConnectionId)!.row!;
    await this.attemptAll(ctx, {
      targets,
      retryOn: new Set(route.retry_on),
      retry: route.retry,
      route,
      attempted: (cid, outcome) => metrics?.attempt(route.id, cid, outcome),
      waited: (seconds) => metrics?.retryWait(route.id, seconds),
      send(t) {
        const entry = usable.get(t.providerConnectionId)!;
        const model = t.modelMap?.[requested] ?? requested;
        // A target whose protocol takes the route's bodies under a path of its own (its shapePrefix: an Azure target
        // of an OpenAI-shaped route, its v1 API at `openai/v1/...`, the deployment as `model`).
        const prefix = protocolOf(entry.row!.protocol_profile!).shapePrefix;
        return {
          entry,
          model,
          body: model !== requested ? withModel(body, model) : body,
          providerPath: prefix ? prefix + ctx.target.providerPath : ctx.target.providerPath,
        };
      },
      answerHeaders: (attempts, cid) => ['x-nexus-attempts', String(attempts), 'x-nexus-served-by', cid],
      errors: protocolOf(routeProfile(first.protocol_profile!)),
      exhausted: (retryAfterMs) => noHealthyTarget(registry, route, clock.now(), retryAfterMs),
    });
  }

  /**
   * A call on a plain connection with a retry policy (docs/routes.md "Retries on a plain connection"): the
   * route's loop over one target, the connection itself, without a breaker.
   */
  async relayConnection(ctx: CallContext, body: Sendable, policy: ConnectionRetry): Promise<void> {
    const { call } = ctx;
    const { metrics } = this.deps;
    const model = call.admitted.prepared?.requestedModel ?? '';
    const connectionId = call.auth.connection_id!;
    await this.attemptAll(ctx, {
      targets: [{ providerConnectionId: connectionId, weight: 1, attempts: policy.attempts }],
      retryOn: new Set(policy.retryOn),
      retry: policy,
      route: undefined,
      attempted: (cid, outcome) => metrics?.connectionAttempt(cid, outcome),
      waited: (seconds) => metrics?.connectionRetryWait(connectionId, seconds),
      send: () => ({ entry: call.entry, model, body, providerPath: ctx.target.providerPath }),
      answerHeaders: (attempts) => ['x-nexus-attempts', String(attempts)],
      errors: protocolOf(call.auth.protocol_profile!),
      // Reached only when the client left while the call waited to retry.
      exhausted: () => new AppError('upstream_unavailable', 'The provider did not answer'),
    });
  }
}

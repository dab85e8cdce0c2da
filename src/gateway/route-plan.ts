/**
 * A route's pure rules (docs/routes.md): the order its targets are tried in, by its strategy, and how long
 * a retry on the same target waits. No I/O: the gateway (route-call.ts) applies them; the unit tests draw
 * thousands of calls through them.
 */
import type { RetrySettings, RouteStrategy, RouteTarget } from '../domain/routes/route-types.js';

/**
 * The order a call tries the targets in.
 * - fallback: as listed.
 * - loadbalance: one drawn by weight (`random()` in [0, 1)), then the others as listed.
 * - least-busy: the fewest calls in flight on this process first (`busy`), ties as listed.
 */
export function orderTargets(
  strategy: RouteStrategy,
  targets: readonly RouteTarget[],
  random: () => number,
  busy: (connectionId: string) => number,
): RouteTarget[] {
  if (targets.length < 2) return [...targets];
  if (strategy === 'fallback') return [...targets];
  if (strategy === 'least-busy') {
    return targets
      .map((target, i) => ({ target, i, n: busy(target.providerConnectionId) }))
      .sort((a, b) => a.n - b.n || a.i - b.i)
      .map((x) => x.target);
  }
  let total = 0;
  for (const t of targets) total += t.weight;
  let draw = random() * total;
  let chosen = targets.length - 1;
  for (let i = 0; i < targets.length; i++) {
    draw -= targets[i]!.weight;
    if (draw < 0) {
      chosen = i;
      break;
    }
  }
  return [targets[chosen]!, ...targets.filter((_, i) => i !== chosen)];
}

/**
 * The wait before retry `n` (1: the first retry) on the same target: min(base * 2^(n-1), max) with jitter
 * 0.8-1.2, or the answer's Retry-After when it gave one (which the caller caps: retryAfterCapMs).
 */
export function backoffMs(
  n: number,
  retry: Pick<RetrySettings, 'baseDelayMs' | 'maxDelayMs'>,
  random: () => number,
  retryAfterMs?: number,
): number {
  if (retryAfterMs !== undefined) return retryAfterMs;
  const exp = Math.min(retry.baseDelayMs * 2 ** (n - 1), retry.maxDelayMs);
  return Math.round(exp * (0.8 + 0.4 * random()));
}

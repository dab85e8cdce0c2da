/**
 * Rate limits of a plan (docs/rate-limits.md) and what an answer says of them.
 * Requests and tokens are limited by GCRA (the generic cell rate algorithm): each
 * unit takes 60000 / limit ms of a schedule whose end is the theoretical arrival
 * time (TAT); a call fits when the schedule, with its units added, ends at most a
 * minute from now. So `limit` units may be used at once, and they come back
 * continuously at the limit's pace. Concurrent calls are counted while they run.
 */
/** A plan's limits; null: that dimension has none. */
export interface RateLimits {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  concurrentCalls: number | null;
}

/** The span a limit is stated over: `limit` units per minute. */
export const WINDOW_MS = 60_000;
/** Slack for the float arithmetic of schedules (a unit is never refused for a rounding error). */
const EPSILON = 1e-6;

/** Where one windowed limit stands. */
interface WindowState {
  limit: number;
  remaining: number;
  /** When the whole limit is free again (the schedule's end), in epoch ms. */
  resetAtMs: number;
}

/** Where each of an access's limits stands (only those its plan sets). */
export interface RateView {
  requests?: WindowState;
  tokens?: WindowState;
  concurrent?: { limit: number; remaining: number };
}

/** How many units a schedule ending at `tat`, made at `limit` units a minute, has in use at `nowMs` (fractional). */
export function inUse(tat: number, limit: number, nowMs: number): number {
  return tat > nowMs ? ((tat - nowMs) * limit) / WINDOW_MS : 0;
}

/** What is left of `limit` with `used` in use, in whole units. */
export function remainingOf(limit: number, used: number): number {
  return Math.max(0, Math.floor(limit - used + EPSILON));
}

/** When `used` units have drained at `limit` a minute and the whole limit is free again (epoch ms). */
export function resetAtOf(used: number, limit: number, nowMs: number): number {
  return nowMs + Math.ceil((used * WINDOW_MS) / limit);
}

/** Whole seconds (at least 1) until `units` more fit beside `used` units in use, at `limit` a minute. */
export function secondsUntilFit(used: number, limit: number, units: number): number {
  const waitMs = ((used + units - limit) * WINDOW_MS) / limit;
  return Math.max(1, Math.ceil(waitMs / 1000 - EPSILON));
}

export function hasLimits(l: RateLimits | null | undefined): l is RateLimits {
  return !!l && (l.requestsPerMinute !== null || l.tokensPerMinute !== null || l.concurrentCalls !== null);
}

/** A duration as OpenAI writes its x-ratelimit-reset-* headers: `250ms`, `1s`, `6m0s`. */
function resetText(ms: number): string {
  if (ms <= 0) return '0s';
  if (ms < 1000) return `${Math.ceil(ms)}ms`;
  const s = Math.ceil(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}

/** The OpenAI-style headers of a view, as (name, value, ...), appended to `out`. */
export function rateHeaders(view: RateView | undefined, nowMs: number, out: string[]): string[] {
  if (!view) return out;
  if (view.requests) {
    out.push(
      'x-ratelimit-limit-requests',
      String(view.requests.limit),
      'x-ratelimit-remaining-requests',
      String(view.requests.remaining),
      'x-ratelimit-reset-requests',
      resetText(view.requests.resetAtMs - nowMs),
    );
  }
  if (view.tokens) {
    out.push(
      'x-ratelimit-limit-tokens',
      String(view.tokens.limit),
      'x-ratelimit-remaining-tokens',
      String(view.tokens.remaining),
      'x-ratelimit-reset-tokens',
      resetText(view.tokens.resetAtMs - nowMs),
    );
  }
  if (view.concurrent) {
    out.push(
      'x-nexus-ratelimit-limit-concurrent',
      String(view.concurrent.limit),
      'x-nexus-ratelimit-remaining-concurrent',
      String(view.concurrent.remaining),
    );
  }
  return out;
}

/**
 * The view from the window row alone (the Admin API, /v1/me, and answers before a process admitted a
 * call for the access): what processes hold counts as used until they give it back.
 */
export function viewOfWindow(
  limits: RateLimits,
  row:
    | {
        requests_tat: number | null;
        requests_limit: number | null;
        tokens_tat: number | null;
        tokens_limit: number | null;
        concurrent: number | null;
      }
    | undefined,
  nowMs: number,
): RateView {
  const view: RateView = {};
  const state = (limit: number, tat: number | null | undefined, scheduledAt: number | null | undefined) => {
    const used = inUse(Number(tat ?? 0), scheduledAt ?? limit, nowMs);
    return { limit, remaining: remainingOf(limit, used), resetAtMs: resetAtOf(used, limit, nowMs) };
  };
  if (limits.requestsPerMinute !== null) view.requests = state(limits.requestsPerMinute, row?.requests_tat, row?.requests_limit);
  if (limits.tokensPerMinute !== null) view.tokens = state(limits.tokensPerMinute, row?.tokens_tat, row?.tokens_limit);
  if (limits.concurrentCalls !== null) {
    view.concurrent = { limit: limits.concurrentCalls, remaining: Math.max(0, limits.concurrentCalls - (row?.concurrent ?? 0)) };
  }
  return view;
}

/**
 * Rate limits of a plan (docs/rate-limits.md) and what an answer says of them.
 * Requests and tokens are counted per fixed minute window (aligned to the UTC
 * minute); concurrent calls are counted while they run.
 */

/** A plan's limits; null: that dimension has none. */
export interface RateLimits {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  concurrentCalls: number | null;
}

export const WINDOW_MS = 60_000;

/** Where one windowed limit stands. */
interface WindowState {
  limit: number;
  remaining: number;
  /** When the window ends and the figure is whole again. */
  resetAt: Date;
}

/** Where each of an access's limits stands (only those its plan sets). */
export interface RateView {
  requests?: WindowState;
  tokens?: WindowState;
  concurrent?: { limit: number; remaining: number };
}

export const windowStartOf = (ms: number): number => Math.floor(ms / WINDOW_MS) * WINDOW_MS;

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
      resetText(view.requests.resetAt.getTime() - nowMs),
    );
  }
  if (view.tokens) {
    out.push(
      'x-ratelimit-limit-tokens',
      String(view.tokens.limit),
      'x-ratelimit-remaining-tokens',
      String(view.tokens.remaining),
      'x-ratelimit-reset-tokens',
      resetText(view.tokens.resetAt.getTime() - nowMs),
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
    { window_start: Date | null; requests: bigint | number | null; tokens: bigint | number | null; concurrent: number | null } | undefined,
  nowMs: number,
): RateView {
  const w = windowStartOf(nowMs);
  const current = row?.window_start?.getTime() === w;
  const resetAt = new Date(w + WINDOW_MS);
  const view: RateView = {};
  if (limits.requestsPerMinute !== null) {
    const used = current ? Number(row.requests ?? 0) : 0;
    view.requests = { limit: limits.requestsPerMinute, remaining: Math.max(0, limits.requestsPerMinute - used), resetAt };
  }
  if (limits.tokensPerMinute !== null) {
    const used = current ? Number(row.tokens ?? 0) : 0;
    view.tokens = { limit: limits.tokensPerMinute, remaining: Math.max(0, limits.tokensPerMinute - used), resetAt };
  }
  if (limits.concurrentCalls !== null) {
    view.concurrent = { limit: limits.concurrentCalls, remaining: Math.max(0, limits.concurrentCalls - (row?.concurrent ?? 0)) };
  }
  return view;
}

/**
 * How a call's attempts are retried: a plain connection's retries (its attempts and the statuses that retry them),
 * and the waits and budget a route's retries share (src/domain/routes/route-types.ts).
 */
export interface RetrySettings {
  baseDelayMs: number;
  maxDelayMs: number;
  retryAfterCapMs: number;
  /** Time a call may spend waiting between attempts, all told. */
  budgetMs: number;
}

/**
 * A plain connection's retries (docs/routes.md "Retries on a plain connection"): its calls' attempts and the
 * statuses that retry them, with a route's waits and budget. Applied by a route's attempt loop (route-call.ts).
 */
export interface ConnectionRetry extends RetrySettings {
  attempts: number;
  retryOn: number[];
}

export const DEFAULT_RETRY_ON: readonly number[] = Object.freeze([429, 500, 502, 503, 504, 529]);
export const DEFAULT_RETRY: Readonly<RetrySettings> = Object.freeze({
  baseDelayMs: 200,
  maxDelayMs: 2000,
  retryAfterCapMs: 5000,
  budgetMs: 10_000,
});
export const DEFAULT_CONNECTION_RETRY: Readonly<ConnectionRetry> = Object.freeze({
  attempts: 2,
  retryOn: [...DEFAULT_RETRY_ON],
  ...DEFAULT_RETRY,
});

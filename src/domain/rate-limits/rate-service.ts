/**
 * What the Admin API, /v1/me and the housekeeping need of rate limits: where an
 * access's limits stand (read from its window row: what processes hold counts as
 * used until they give it back), and the sweep of a dead process's slots.
 * Admission is the gateway processes' (rate-allowances.ts).
 */
import type { Queryable } from '../../db/database.js';
import type { RateRepo } from './rate-repo.js';
import { hasLimits, viewOfWindow, type RateLimits, type RateView } from './rate-types.js';

/** A plan row's limits (its three columns). */
export function limitsOf(row: {
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  concurrent_calls: number | null;
}): RateLimits {
  return { requestsPerMinute: row.requests_per_minute, tokensPerMinute: row.tokens_per_minute, concurrentCalls: row.concurrent_calls };
}

export function createRateService(deps: { rateRepo: RateRepo }) {
  const { rateRepo } = deps;
  return {
    /** Where the access's limits stand at `now`; null when its plan sets none. */
    async state(accessId: string, limits: RateLimits, now: Date, q?: Queryable): Promise<RateView | null> {
      if (!hasLimits(limits)) return null;
      const row = await rateRepo.findWindow(accessId, q);
      return viewOfWindow(limits, row, now.getTime());
    },

    /** Frees the concurrency slots of processes whose allowances expired (`all`: every one). Returns how many allowances. */
    sweepExpired(now: Date, all = false): Promise<number> {
      return rateRepo.sweep(now, all);
    },
  };
}

export type RateService = ReturnType<typeof createRateService>;

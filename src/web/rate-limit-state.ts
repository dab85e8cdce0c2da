/**
 * Where an access's rate limits stand, as the wire says it: shared by the Admin API's quota
 * snapshot (src/handlers/accesses/) and the gateway's /v1/me (src/gateway/me.ts).
 */
import type { RateLimitStateDto } from '../../generated/client/types.gen.js';
import type { RateView } from '../domain/rate-limits/rate-types.js';

/** Where an access's limits stand, on the wire. */
export function toRateLimitStateDto(view: RateView): RateLimitStateDto {
  return {
    ...(view.requests
      ? {
          requestsPerMinute: {
            limit: view.requests.limit,
            remaining: view.requests.remaining,
            resetAt: new Date(view.requests.resetAtMs).toISOString(),
          },
        }
      : {}),
    ...(view.tokens
      ? {
          tokensPerMinute: {
            limit: view.tokens.limit,
            remaining: view.tokens.remaining,
            resetAt: new Date(view.tokens.resetAtMs).toISOString(),
          },
        }
      : {}),
    ...(view.concurrent ? { concurrentCalls: { limit: view.concurrent.limit, remaining: view.concurrent.remaining } } : {}),
  };
}

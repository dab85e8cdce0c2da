/**
 * GET /v1/me: what an end user's inference key sees of its access (the contract's
 * getMe). Served by the gateway (src/app.ts dispatches it before express), read
 * fresh from the key's lookup row (call-repo.ts): the access's status and plan, the
 * quota period covering now, where the plan's rate limits stand, the models the
 * plan allows, and the key's expiry.
 *
 * A suspended or expired access still answers (its status says so), so its user
 * can see why calls are refused; an invalid, expired or revoked key is 401, a key
 * of an archived workspace 403 (as on the gateway).
 */
import type { MeDto } from '../../generated/client/types.gen.js';
import { toRateLimitStateDto } from '../web/rate-limit-state.js';
import type { RateView } from '../domain/rate-limits/rate-types.js';
import { authorizeKey } from './auth-cache.js';
import type { AuthRow } from './call-repo.js';

/** The access's status as a caller should read it: an ACTIVE access past its end is EXPIRED already. */
function statusOf(row: AuthRow, now: Date): MeDto['status'] {
  if (row.access_status === 'ACTIVE' && row.access_ends_at && row.access_ends_at <= now) return 'EXPIRED';
  return row.access_status as MeDto['status'];
}

/** The answer for a key's lookup row (null: no such key); throws the refusal. */
export function meOf(found: AuthRow | null, now: Date, rates: RateView | undefined): MeDto {
  const row = authorizeKey(found, now);
  let quotaPeriod: MeDto['quotaPeriod'] = null;
  if (row.period_id && row.period_start && row.period_end) {
    const available = row.granted_units! - row.reserved_units! - row.consumed_units!;
    quotaPeriod = {
      id: row.period_id,
      periodStart: row.period_start.toISOString(),
      resetAt: row.period_end.toISOString(),
      grantedUnits: `${row.granted_units!}`,
      consumedUnits: `${row.consumed_units!}`,
      reservedUnits: `${row.reserved_units!}`,
      availableUnits: `${available > 0n ? available : 0n}`,
    };
  }
  return {
    accessId: row.workspace_access_id,
    workspaceId: row.workspace_id,
    status: statusOf(row, now),
    plan: { id: row.plan_id, key: row.plan_key, name: row.plan_name },
    quotaPeriod,
    rateLimits: rates ? toRateLimitStateDto(rates) : null,
    // The current period's strategy's list (exact names and `*` patterns); null: every model.
    allowedModels: row.allowed_models,
    key: { id: row.key_id, prefix: row.key_prefix, expiresAt: row.expires_at.toISOString() },
  };
}

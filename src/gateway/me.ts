/**
 * GET /v1/me: what an end user's inference key sees of its access (the contract's
 * getMe). Served by the gateway (src/app.ts dispatches it before express), read
 * fresh from the key's lookup row (auth-repo.ts): the access's status and plan, the
 * quota period covering now, where the plan's rate limits stand, the models the
 * plan allows, and the key's expiry.
 *
 * A suspended or expired access still answers (its status says so), so its user
 * can see why calls are refused; an invalid, expired or revoked key is 401, a key
 * of an archived workspace 403 (as on the gateway).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { MeDto } from '../../generated/client/types.gen.js';
import type { Clock } from '../domain/actor.js';
import type { RateView } from '../domain/rate-limits/rate-types.js';
import { AppError } from '../errors.js';
import type { RequestLocals } from '../web/locals.js';
import { toRateLimitStateDto } from '../web/rate-limit-state.js';
import { sendError } from './answers.js';
import { authorizeKey } from './admission.js';
import type { AuthRow } from './auth-repo.js';
import { credentialOf } from './client-request.js';
import type { GatewayParts } from './gateway-parts.js';

/** The lookup's connection for a request that names none (/v1/me): no connection has the nil UUID. */
const NO_CONNECTION = '00000000-0000-0000-0000-000000000000';
/** The end user's self-service read under a connection's gatewayBaseUrl: `/providers/{id}/v1/me`. */
export const ME_ROUTE = 'v1/me';

/** The access's status as a caller should read it: an ACTIVE access past its end is EXPIRED already. */
function statusOf(row: AuthRow, now: Date): MeDto['status'] {
  if (row.access_status === 'ACTIVE' && row.access_ends_at && row.access_ends_at <= now) return 'EXPIRED';
  return row.access_status as MeDto['status'];
}

/** The answer for a key's lookup row (null: no such key); throws the refusal. */
function meOf(found: AuthRow | null, now: Date, rates: RateView | undefined): MeDto {
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

/**
 * GET /v1/me: the key's row read fresh, answered as the end user's view of its access. Under a
 * connection's gatewayBaseUrl the connection must be one of the key's workspace, as for a call there.
 */
export async function handleMe(
  parts: Pick<GatewayParts, 'cache' | 'meter'>,
  clock: Clock,
  req: IncomingMessage,
  res: ServerResponse,
  locals: RequestLocals,
  connectionId = NO_CONNECTION,
): Promise<void> {
  locals.operationId = 'getMe';
  try {
    if (req.method !== 'GET') throw new AppError('method_not_allowed', `${req.method} is not allowed on /v1/me`);
    const credential = credentialOf(req);
    req.resume();
    const looked = await parts.cache.read(credential, connectionId);
    const now = clock.now();
    const me = meOf(looked, now, parts.meter.rateView(looked, now));
    if (connectionId !== NO_CONNECTION && (!looked!.connection_id || looked!.connection_status === 'ARCHIVED')) {
      throw new AppError('provider_connection_not_found', 'No active provider connection with that id', {
        param: 'providerConnectionId',
      });
    }
    const body = JSON.stringify(me);
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'x-request-id': locals.requestId,
      'x-nexus-request-id': locals.requestId,
      'x-nexus-metering-status': 'unmetered',
      'cache-control': 'no-store',
    });
    res.end(body);
  } catch (err) {
    sendError(res, { locals, err, metered: false, now: clock.now().getTime() });
  }
}

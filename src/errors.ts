/**
 * One error type, one table from code to HTTP status, one body (the `Error` schema of openapi/openapi.yaml).
 * Add a code here when a new cause appears; never reuse one for another cause.
 */
import { isDatabaseUnavailable } from './database-unavailable.js';

const errorStatus = {
  // 400
  invalid_request: 400,
  invalid_json: 400,
  unsupported_content_type: 400,
  invalid_cursor: 400,
  invalid_parameter: 400,
  invalid_base_url: 400,
  route_targets_incompatible: 400,
  route_model_unserved: 400,
  private_upstream_refused: 400,
  api_key_required: 400,
  unsafe_proxy_request: 400,
  max_tokens_exceeded: 400,
  invalid_signature: 400,
  malformed_http: 400,
  invalid_webhook_url: 400,
  unknown_event_type: 400,
  sign_in_failed: 400,
  login_link_invalid: 400,
  invitation_invalid: 400,
  invitation_expired: 400,
  // 401
  missing_credentials: 401,
  invalid_management_key: 401,
  invalid_inference_key: 401,
  invalid_session: 401,
  session_expired: 401,
  // 403
  root_key_required: 403,
  access_not_active: 403,
  access_suspended: 403,
  connection_suspended: 403,
  workspace_archived_gateway: 403,
  model_not_allowed: 403,
  csrf_token_invalid: 403,
  not_a_member: 403,
  role_forbidden: 403,
  // 404
  route_not_found: 404,
  workspace_not_found: 404,
  provider_connection_not_found: 404,
  gateway_route_not_found: 404,
  plan_not_found: 404,
  strategy_not_found: 404,
  binding_not_found: 404,
  access_not_found: 404,
  inference_key_not_found: 404,
  invocation_not_found: 404,
  request_log_not_found: 404,
  batch_not_found: 404,
  file_not_found: 404,
  billing_connection_not_found: 404,
  product_mapping_not_found: 404,
  webhook_event_not_found: 404,
  quota_period_not_found: 404,
  webhook_endpoint_not_found: 404,
  webhook_message_not_found: 404,
  price_not_found: 404,
  budget_not_found: 404,
  management_key_not_found: 404,
  session_not_found: 404,
  member_not_found: 404,
  invitation_not_found: 404,
  // 405
  method_not_allowed: 405,
  // 409
  conflict: 409,
  workspace_archived: 409,
  idempotency_key_reused: 409,
  idempotency_key_in_use: 409,
  plan_not_draft: 409,
  plan_not_active: 409,
  plan_not_publishable: 409,
  strategy_published: 409,
  strategy_not_published: 409,
  binding_closed: 409,
  illegal_transition: 409,
  route_archived: 409,
  period_overlap: 409,
  plan_key_exists: 409,
  strategy_not_in_force: 409,
  binding_overlap: 409,
  unmetered_endpoint: 409,
  batch_file_unknown: 409,
  protocol_mismatch: 409,
  connection_archived: 409,
  billing_connection_disabled: 409,
  billing_not_configured: 409,
  event_not_replayable: 409,
  billing_mapping_exists: 409,
  checkout_not_available: 409,
  webhook_endpoint_disabled: 409,
  too_many_webhook_secrets: 409,
  price_overlap: 409,
  price_closed: 409,
  last_root_key: 409,
  last_owner: 409,
  // 402
  workspace_budget_exceeded: 402,
  // 413
  payload_too_large: 413,
  // 429
  quota_insufficient: 429,
  rate_limited: 429,
  first_wave_limited: 429,
  // 500
  internal_error: 500,
  // 501: a kind of request the gateway does not serve (a WebSocket session), refused before any provider sees it
  websocket_not_supported: 501,
  // 502
  upstream_unavailable: 502,
  upstream_timeout: 502,
  billing_provider_error: 502,
  // 503
  not_ready: 503,
  database_unavailable: 503,
  event_loop_blocked: 503,
  no_healthy_target: 503,
  exports_busy: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;

/** Every code, in the table's order: the contract lists the same (`x-error-codes` of the Error body's `code`). */
export const errorCodes = Object.keys(errorStatus) as ErrorCode[];

/** Seconds a client should wait before it retries, for the codes where retrying is the remedy and the refusal says none (Retry-After). */
export const errorRetryAfter: Partial<Record<ErrorCode, number>> = {
  database_unavailable: 2,
  exports_busy: 5,
};

const errorType: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'quota_exceeded_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  409: 'conflict_error',
  413: 'payload_too_large_error',
  429: 'quota_exceeded_error',
  500: 'api_error',
  501: 'invalid_request_error',
  502: 'upstream_error',
  503: 'api_error',
};

/** Codes whose error `type` is not their status's (a rate limit is not a quota). */
const typeOfCode: Partial<Record<ErrorCode, string>> = {
  rate_limited: 'rate_limit_error',
  first_wave_limited: 'rate_limit_error',
};

/**
 * Whether an error refuses the request itself, so that retrying it as it is changes nothing: a 4xx, or a kind of
 * request the gateway does not serve. Anything else is a failure (of Nexus, its database or the provider).
 */
export function isRefusal(err: AppError): boolean {
  return err.status < 500 || err.code === 'websocket_not_supported';
}

export interface ErrorExtras {
  param?: string;
  reset_at?: string;
  current_status?: string;
  /** Seconds until retrying can succeed, when this refusal knows them (a rate limit's window): the Retry-After header. */
  retry_after?: number;
  /** With 409 unmetered_endpoint: the path's passthrough class (src/protocols/passthrough.ts). */
  passthrough_class?: string;
  [key: string]: unknown;
}

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly extras: ErrorExtras = {},
  ) {
    super(message);
    this.name = 'AppError';
  }

  get status(): number {
    return errorStatus[this.code];
  }
}

export interface ErrorBody {
  error: {
    message: string;
    type: string;
    code: string;
    param?: string | null;
    request_id?: string;
    reset_at?: string;
    current_status?: string;
    /** With 409 unmetered_endpoint: the path's passthrough class. */
    passthrough_class?: string;
  };
}

export function errorBody(err: AppError, requestId: string | undefined): ErrorBody {
  const { param, reset_at, current_status, passthrough_class } = err.extras;
  return {
    error: {
      message: err.message,
      type: typeOfCode[err.code] ?? errorType[err.status] ?? 'api_error',
      code: err.code,
      param: param ?? null,
      ...(requestId ? { request_id: requestId } : {}),
      ...(reset_at ? { reset_at } : {}),
      ...(current_status ? { current_status } : {}),
      ...(passthrough_class ? { passthrough_class } : {}),
    },
  };
}

/**
 * Anything that is not an AppError becomes a 500 that reveals nothing, except a database that cannot be
 * reached: a 503 the client may retry.
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (isDatabaseUnavailable(err)) return new AppError('database_unavailable', 'The database is unavailable; retry shortly');
  return new AppError('internal_error', 'An unexpected error occurred. The request id identifies it in the logs.');
}

/** Postgres unique violation, for repositories to turn into a conflict. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}

/**
 * The errors the client throws. Every one is a NexusError:
 *
 * - an answer other than 2xx is a NexusError of its status's class (NotFoundError for a 404, ...), with the
 *   Error body's stable `code`, its `param` and the request's `requestId`;
 * - no answer at all is a NexusConnectionError (the server is down, the connection was reset), or a
 *   NexusTimeoutError when the client's `timeout` ran out first;
 * - a webhook whose signature does not verify is an InvalidWebhookSignatureError.
 *
 * The fetch Response is kept as a non-enumerable `response`: an uncaught error prints its message, stack and
 * the Error body, not the whole Response.
 */
import type { ErrorCode } from './codes.gen.js';
import type { ErrorBody } from './types.gen.js';

export type { ErrorCode } from './codes.gen.js';

/** What a NexusError is made of. */
export interface NexusErrorInit {
  status?: number | undefined;
  body?: unknown;
  response?: Response | undefined;
  cause?: unknown;
}

/** An error of the client: an error answer of Nexus, or no answer at all (see the subclasses). */
export class NexusError extends Error {
  /** The HTTP status; undefined when no answer came (NexusConnectionError). */
  readonly status: number | undefined;
  /** The stable cause (`workspace_not_found`, `quota_insufficient`, ...); undefined when the answer is not Nexus's Error body (a proxy's 502 page, say) or there is no answer. */
  readonly code: ErrorCode | undefined;
  /** The error's category (`not_found_error`, ...), from the body. */
  readonly type: ErrorBody['error']['type'] | undefined;
  /** The request field at fault, when there is one. */
  readonly param: string | null | undefined;
  /** The request's id (the body's `request_id`, else the `X-Request-Id` header): quote it when asking why. */
  readonly requestId: string | undefined;
  /** The answer's body: the Error body (parsed JSON) for Nexus's own answers, the text otherwise. */
  readonly body: unknown;
  /** The fetch Response, when there was one (not enumerable, so that logging the error stays short). */
  declare readonly response: Response | undefined;

  constructor(message: string, init: NexusErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    Object.defineProperty(this, 'name', { value: new.target.name, enumerable: false, configurable: true, writable: true });
    Object.defineProperty(this, 'response', { value: init.response, enumerable: false, configurable: true });
    const error = isErrorBody(init.body) ? init.body.error : undefined;
    this.status = init.status;
    this.code = error?.code as ErrorCode | undefined;
    this.type = error?.type;
    this.param = error?.param;
    this.requestId =
      error?.request_id ?? init.response?.headers.get('x-request-id') ?? init.response?.headers.get('x-nexus-request-id') ?? undefined;
    this.body = init.body;
  }

  /** The error for an answer other than 2xx: an instance of the class of its status. */
  static fromResponse(response: Response, body: unknown): NexusError {
    const error = isErrorBody(body) ? body.error : undefined;
    const message = error ? `${error.message} (${response.status} ${error.code})` : `HTTP ${response.status} ${response.statusText}`.trim();
    const ErrorClass = classOfStatus(response.status);
    return new ErrorClass(message, { status: response.status, body, response });
  }
}

/** 400: the request is invalid (`param` names the field). */
export class BadRequestError extends NexusError {}
/** 401: no valid credential. */
export class AuthenticationError extends NexusError {}
/** 403: the credential may not do this. */
export class PermissionDeniedError extends NexusError {}
/** 404: no such resource (or not visible to this credential). */
export class NotFoundError extends NexusError {}
/** 409: the resource's state does not allow this, or an Idempotency-Key was reused with another body. */
export class ConflictError extends NexusError {}
/** 429: a rate limit or the quota refused the call. */
export class RateLimitError extends NexusError {}
/** 5xx: Nexus, or a provider behind it, failed. */
export class InternalServerError extends NexusError {}
/** 503: Nexus cannot serve now (its database is unreachable, it is not ready); retrying later can succeed. */
export class ServiceUnavailableError extends InternalServerError {}

/** No answer: the connection was refused, reset or could not be made. `cause` is what fetch threw. */
export class NexusConnectionError extends NexusError {}
/** No answer within the client's `timeout` (milliseconds). */
export class NexusTimeoutError extends NexusConnectionError {}

/** Thrown by a call that has no configured client to go through. */
export class NexusConfigurationError extends NexusError {}

/** A webhook whose signature does not verify (`nexus.webhooks.verify`): a wrong secret, a changed body, a missing header or a stale timestamp. */
export class InvalidWebhookSignatureError extends NexusError {}

function classOfStatus(status: number): new (message: string, init: NexusErrorInit) => NexusError {
  switch (status) {
    case 400:
      return BadRequestError;
    case 401:
      return AuthenticationError;
    case 403:
      return PermissionDeniedError;
    case 404:
      return NotFoundError;
    case 409:
      return ConflictError;
    case 429:
      return RateLimitError;
    case 503:
      return ServiceUnavailableError;
    default:
      return status >= 500 ? InternalServerError : NexusError;
  }
}

function isErrorBody(body: unknown): body is ErrorBody {
  const error = (body as { error?: unknown } | null)?.error as { code?: unknown; message?: unknown } | undefined;
  return typeof error === 'object' && error !== null && typeof error.code === 'string' && typeof error.message === 'string';
}

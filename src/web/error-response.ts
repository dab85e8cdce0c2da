/**
 * What both HTTP edges (the Admin API in src/http/ and the gateway in src/gateway/) do the same way:
 * read a bearer token, and write the Error body of a refusal on a plain node response.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError, errorBody, errorRetryAfter, toAppError } from '../errors.js';
import type { ErrorBodyShape } from '../protocols/protocol.js';
import type { RequestLocals } from './locals.js';

/** The token of an `Authorization: Bearer` header value. */
export function bearerOf(authorization: string | undefined): string | undefined {
  return authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] : undefined;
}

/**
 * How much of a refused request's unread body is read and dropped before its connection closes, and for how long
 * at most: a client still sending its body (an upload) then reads the answer, where a connection closed under it
 * would reset and lose the answer. Past either bound the connection closes anyway, so a body too large or one
 * that trickles in holds the socket no longer.
 */
export const REFUSED_BODY_DRAIN = { bytes: 4 * 1024 * 1024, ms: 2000 } as const;

/** Whether a request has a body not yet read to its end. */
function bodyUnread(req: IncomingMessage | undefined): req is IncomingMessage {
  if (!req || req.complete) return false;
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/**
 * Ends a refusal's answer (already written whole) once the rest of its request's body has been read and dropped,
 * up to REFUSED_BODY_DRAIN: whoever was reading the body (the gateway's readBody) stops keeping it.
 */
function endAfterBody(req: IncomingMessage, res: ServerResponse): void {
  if (req.destroyed) {
    res.end();
    return;
  }
  let left = REFUSED_BODY_DRAIN.bytes;
  const end = () => {
    clearTimeout(timer);
    req.off('data', drop);
    req.off('end', end);
    req.off('close', end);
    res.end();
  };
  const drop = (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) end();
  };
  const timer = setTimeout(end, REFUSED_BODY_DRAIN.ms);
  req.removeAllListeners('data');
  req.on('data', drop);
  req.once('end', end);
  req.once('close', end);
  req.resume();
}

/** The Error body for `err` (a 500 that reveals nothing unless it is an AppError), on a plain node response. */
export function writeError(res: ServerResponse, err: unknown, locals: RequestLocals, shape?: ErrorBodyShape): void {
  const appError = toAppError(err);
  // The cause of an unexpected 500 goes to the log line, with its stack; an expected condition (the database
  // away: database_unavailable) is its code alone.
  if (appError.code === 'internal_error' && !(err instanceof AppError)) locals.error = err;
  locals.errorCode = appError.code;
  const shared = errorBody(appError, locals.requestId);
  const body = JSON.stringify(shape ? shape.body(shared) : shared);
  if (shape?.requestIdHeader && locals.requestId) res.setHeader(shape.requestIdHeader, locals.requestId);
  const shapeHeaders = shape?.headers?.(shared, appError.status);
  for (const name in shapeHeaders) res.setHeader(name, shapeHeaders[name]!);
  res.statusCode = appError.status;
  const retryAfter = appError.extras.retry_after ?? errorRetryAfter[appError.code];
  if (retryAfter !== undefined) res.setHeader('retry-after', String(retryAfter));
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  // Refused before its body was read to its end: the answer is sent at once, and the connection closes once the
  // rest of the body is read and dropped (at most REFUSED_BODY_DRAIN), instead of staying open for another
  // request (a client trickling a body would hold the socket) or closing under a client still sending.
  const req: IncomingMessage | undefined = res.req;
  if (!bodyUnread(req)) {
    res.end(body);
    return;
  }
  res.setHeader('connection', 'close');
  res.write(body);
  endAfterBody(req, res);
}

import type { NextFunction, Request, Response } from 'express';
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { AppError, errorBody } from '../errors.js';
import { pathOf } from '../web/request-target.js';
import { newId } from '../ids.js';
import { requestLineLevel, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { operationSpan, type Tracer } from '../observability/tracing.js';
import { sendError } from './api.js';
import type { RequestLocals } from '../web/locals.js';

/** Health probes come every few seconds and say nothing a trace would: they make no span, and their lines are at debug. */
const PROBES = new Set(['getHealth', 'getReadiness']);

/**
 * Gives every request an id (X-Request-Id on every answer), and on finish writes
 * one log line, the metrics and (traces on) the operation's span. The log line
 * never holds a header or a query string. `observe` works on plain node requests
 * (the gateway's, which never enter express: their line and spans are the
 * gateway's own, src/gateway/call-report.ts and call-trace.ts); `middleware` is
 * the same for express.
 */
export function requestObserver(deps: { logger: Logger; metrics: Metrics; inflight: { count: number }; tracer?: Tracer | undefined }) {
  /**
   * Counts and logs the request when it ends. The caller puts `locals.requestId` into its answer as
   * X-Request-Id (the gateway writes all its headers at once: node's fast path for that wants none set before).
   */
  function observe(
    req: IncomingMessage,
    res: ServerResponse,
    locals: RequestLocals,
    describe: () => { operationId: string | undefined; path: string },
    gateway = false,
  ): void {
    locals.requestId = newId();
    locals.startedAt = process.hrtime.bigint();
    deps.inflight.count++;
    // 'close' comes once, after 'finish' or when the connection went first (then the answer is not finished).
    res.once('close', () => {
      deps.inflight.count--;
      const seconds = Number(process.hrtime.bigint() - locals.startedAt) / 1e9;
      const { operationId, path } = describe();
      const operation = locals.operationId ?? operationId ?? 'unknown';
      const status = res.writableFinished ? res.statusCode : 499;
      deps.metrics.observe(operation, req.method!, status, seconds, locals.upstream?.status !== undefined ? 'upstream' : 'nexus');
      if (gateway) return;
      if (deps.tracer && operationId && !PROBES.has(operationId)) {
        const traceparent = req.headers.traceparent;
        operationSpan(
          deps.tracer,
          {
            operationId,
            method: req.method!,
            path,
            status,
            requestId: locals.requestId,
            traceparent: typeof traceparent === 'string' ? traceparent : undefined,
          },
          performance.now() - seconds * 1e3,
        );
      }
      // A health probe's line is at debug, its 503 too (what it reports is logged where it is found).
      const answered = requestLineLevel(status, { unexpected: Boolean(locals.error) });
      const level = operationId !== undefined && PROBES.has(operationId) && answered !== 'error' ? 'debug' : answered;
      if (level !== 'error' && !deps.logger.isLevelEnabled(level)) return;
      const line: Record<string, unknown> = {
        msg: 'request',
        requestId: locals.requestId,
        method: req.method,
        path,
        operationId: operation,
        status,
        durationMs: Math.round(seconds * 1e6) / 1e3,
      };
      if (locals.errorCode) line.errorCode = locals.errorCode;
      if (locals.actorKeyId) line.actorKeyId = locals.actorKeyId;
      if (locals.workspaceId) line.workspaceId = locals.workspaceId;
      if (locals.accessId) line.accessId = locals.accessId;
      if (locals.error) {
        const e = locals.error as Error;
        line.error = { name: e?.name, message: e?.message, stack: e?.stack };
      }
      deps.logger.log(level, line);
    });
  }

  return {
    observe,
    middleware(operationIdOf: (req: Request) => string | undefined) {
      return (req: Request, res: Response, next: NextFunction) => {
        const locals = res.locals as RequestLocals;
        // originalUrl: the whole path, a mounted router's prefix (/console) included.
        observe(req, res, locals, () => ({ operationId: operationIdOf(req), path: pathOf(req.originalUrl) }));
        res.setHeader('X-Request-Id', locals.requestId);
        next();
      };
    },
  };
}

/**
 * The headers of every Admin API answer, whoever writes it (a handler, the router's refusals, the body parser's,
 * the error renderer): some carry a secret shown once (a webhook endpoint's `whsec_`, an inference key), and none
 * may be kept by a cache or read by a browser as another type than it says.
 */
export function adminAnswerHeaders() {
  return (_req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  };
}

/** The media types the Admin API reads as JSON. */
export const JSON_TYPES = ['application/json', 'application/*+json'];

/**
 * The Admin API reads JSON only: a body of another type is refused here, with
 * the header to send, instead of reaching validation as a missing body.
 */
export function jsonBodiesOnly() {
  return (req: Request, res: Response, next: NextFunction) => {
    const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (!hasBody || req.is(JSON_TYPES)) return next();
    const type = req.headers['content-type'];
    const came = type ? `this one came as ${type}` : 'this one had no Content-Type';
    sendError(
      req,
      res,
      new AppError('unsupported_content_type', `Send the request body as JSON with Content-Type: application/json (${came})`),
    );
  };
}

/**
 * The JSON body parser's check of the bytes before it decodes them (its `verify`): JSON is UTF-8 (RFC 8259),
 * and a body that is not would otherwise be read with its bad bytes replaced by U+FFFD, and stored so.
 * The parser reports the throw as `entity.verify.failed`: errorRenderer makes it 400 invalid_json.
 */
export function utf8Only(_req: unknown, _res: unknown, body: Buffer): void {
  if (!isUtf8(body)) throw new Error('The request body is not valid UTF-8');
}

function isJson(text: unknown): boolean {
  if (typeof text !== 'string') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Body parser failures and anything thrown outside the contract's handlers. */
export function errorRenderer() {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string; status?: number; body?: unknown };
    if (e?.type === 'entity.too.large') {
      return sendError(req, res, new AppError('payload_too_large', 'The request body is larger than the limit'));
    }
    if (e?.type === 'entity.verify.failed') {
      return sendError(req, res, new AppError('invalid_json', 'The request body is not valid UTF-8'));
    }
    if (e?.type === 'entity.parse.failed') {
      // The parser takes only objects and arrays: `null`, `42` or `"x"` are JSON, just not a body.
      const message = isJson(e.body) ? 'The request body must be a JSON object' : 'The request body is not valid JSON';
      return sendError(req, res, new AppError('invalid_json', message));
    }
    if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') {
      return sendError(req, res, new AppError('invalid_request', 'Unsupported content encoding or charset'));
    }
    if (e?.status === 400 && !(err instanceof AppError)) {
      // The parser's other refusals of a body: bytes that do not decode as their Content-Encoding
      // says (a zlib error), a length other than the Content-Length. The client's fault, not a 500.
      const message =
        e.type === 'request.size.invalid'
          ? 'The request body does not have the length its Content-Length says'
          : 'The request body could not be read: it does not decode as its Content-Encoding says';
      return sendError(req, res, new AppError('invalid_request', message));
    }
    if (res.headersSent) {
      (res.locals as RequestLocals).error = err;
      res.destroy();
      return;
    }
    sendError(req, res, err);
  };
}

/**
 * Requests node's HTTP parser refuses before any handler sees them (a header value
 * holding CR or NUL, a malformed request line): the Error body and a request id,
 * like every other refusal, instead of node's bare 400. Header overflow (431),
 * timeouts (408) and resets keep node's own answers.
 */
export function clientErrorHandler() {
  return (err: NodeJS.ErrnoException, socket: Duplex): void => {
    const code = err.code ?? '';
    if (code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    // An answer already begun on this connection (a refusal sent while the body still trickled in, when the
    // body's time ran out): no second answer after it.
    if ((socket as { _httpMessage?: ServerResponse })._httpMessage?.headersSent) {
      socket.destroy();
      return;
    }
    if (!code.startsWith('HPE_') || code === 'HPE_HEADER_OVERFLOW') {
      const status =
        code === 'HPE_HEADER_OVERFLOW'
          ? '431 Request Header Fields Too Large'
          : code === 'ERR_HTTP_REQUEST_TIMEOUT'
            ? '408 Request Timeout'
            : '400 Bad Request';
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`);
      return;
    }
    const requestId = newId();
    const body = JSON.stringify(errorBody(new AppError('malformed_http', `The request is not valid HTTP (${code})`), requestId));
    socket.end(
      `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\nX-Nexus-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  };
}

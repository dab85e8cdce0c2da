/**
 * The glue between express and the contract: openapi-backend routes each request
 * to its operation, authenticates the Management Key, validates the request with
 * ajv before any handler runs, applies Idempotency-Key, and writes the handler's
 * result (or the Error body) to the response.
 */
import type { Request, Response } from 'express';
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import type { IncomingMessage } from 'node:http';
import { OpenAPIBackend, type Context, type Document } from 'openapi-backend';
import addFormatsPkg from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import type { ErrorObject } from 'ajv';
import { AppError, errorBody, errorCodes, toAppError, type ErrorCode } from '../errors.js';
import type { Actor } from '../domain/actor.js';
import type { ManagementKeyService, Principal } from '../domain/management-keys/management-key-service.js';
import { assertStorable } from '../domain/storable-text.js';
import { hasUuidForm } from '../ids.js';
import type { IdempotencyService } from '../domain/idempotency/idempotency-service.js';
import type { HandlerMap, HandlerResult } from './handler.js';
import { bearerOf, writeError } from '../web/error-response.js';
import type { RequestLocals } from '../web/locals.js';
import type { PublicUrl } from './public-url.js';
import { canonicalUuids, type UuidSchema } from './wire.js';

const addFormats = addFormatsPkg as unknown as (ajv: unknown) => unknown;

export interface ApiDeps {
  definition: Document;
  handlers: HandlerMap;
  managementKeys: ManagementKeyService;
  idempotency: IdempotencyService;
  /** Link headers start with it; known once the server listens. */
  publicUrl: PublicUrl;
}

/** All operationIds of a document, in document order. */
export function operationIdsOf(definition: Document): string[] {
  const ids: string[] = [];
  for (const item of Object.values(definition.paths ?? {})) {
    for (const method of ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const) {
      const op = (item as Record<string, { operationId?: string } | undefined>)?.[method];
      if (op?.operationId) ids.push(op.operationId);
    }
  }
  return ids;
}

/** ajv's error -> the request field at fault, as a caller names it ('name', 'limit', 'metadata.tier'). */
function paramOf(e: ErrorObject): string | null {
  const segments = e.instancePath.split('/').filter(Boolean).slice(1);
  const p = e.params as { missingProperty?: string; additionalProperty?: string };
  if (p.missingProperty) segments.push(p.missingProperty);
  if (p.additionalProperty) segments.push(p.additionalProperty);
  return segments.length ? segments.join('.') : null;
}

/** How a format is named in an error message. */
const FORMATS: Record<string, string> = {
  'date-time': 'an ISO 8601 date-time with a time zone, in the years 0001-9999 UTC (2026-01-31T12:00:00Z)',
  uuid: 'a UUID',
  email: 'an email address',
  uri: 'an absolute URL',
};

const FIRST_INSTANT = Date.parse('0001-01-01T00:00:00Z');
const LAST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * RFC 3339 (ajv-formats' check) and, once in UTC, within the years 0001-9999: an
 * instant outside them would be written back as '+010000-...', which is no
 * RFC 3339 date-time.
 */
const isRfc3339 = (fullFormats['date-time'] as { validate: (value: string) => boolean }).validate;

function isDateTime(value: string): boolean {
  if (!isRfc3339(value)) return false;
  const at = Date.parse(value);
  return at >= FIRST_INSTANT && at <= LAST_INSTANT;
}

/** What the contract's patterns ask for, in words. */
const PATTERNS: Record<string, string> = {
  '\\S': 'must not be blank',
  '^(0|[1-9][0-9]{0,18})$': 'must be a whole number from 0 to 9223372036854775807 as a decimal string, such as "1000"',
  '^[a-z0-9][a-z0-9_.-]*$': "must start with a lowercase letter or digit and hold only lowercase letters, digits, '_', '.' and '-'",
  '^[\\x21-\\x7E]+$': 'must be printable ASCII without spaces',
  '^[^\\s?\\[\\]{}\\\\]+$': "must be a model name or a glob whose only wildcard is '*', without whitespace or any of ? [ ] { } \\",
  '^[Hh][Tt][Tt][Pp][Ss]?://[^/?#\\s]+[^\\s]*$':
    'must be an http or https URL without spaces, such as "https://app.example.com/billing/done"',
};

const TYPES: Record<string, string> = {
  integer: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  object: 'a JSON object',
  array: 'an array',
  null: 'null',
};

function typeMessage(type: unknown): string {
  const types = String(type).split(',');
  return `must be ${types.map((t) => TYPES[t] ?? t).join(' or ')}`;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

function validationError(errors: ErrorObject[] | null | undefined): AppError {
  const first = errors?.[0];
  if (!first) return new AppError('invalid_request', 'The request is invalid');
  if (first.keyword === 'parse') return new AppError('invalid_json', 'The request body is not valid JSON');
  if (first.keyword === 'required' && (first.params as { missingProperty?: string }).missingProperty === 'requestBody') {
    return new AppError('invalid_parameter', 'The request body is required (JSON)');
  }
  const param = paramOf(first);
  const p = first.params as {
    additionalProperty?: string;
    allowedValues?: unknown[];
    pattern?: string;
    format?: string;
    type?: unknown;
    limit?: number;
  };
  const subject = param ?? 'The request body';
  let message: string;
  if (first.keyword === 'additionalProperties') {
    message = `Unknown ${first.instancePath.startsWith('/query') ? 'query parameter' : 'field'} '${param}'`;
  } else if (first.keyword === 'required') message = `${subject} is required`;
  else if (first.keyword === 'enum' && p.allowedValues) message = `${subject} must be one of ${p.allowedValues.join(', ')}`;
  else if (first.keyword === 'format' && p.format && FORMATS[p.format]) message = `${subject} must be ${FORMATS[p.format]}`;
  else if (first.keyword === 'pattern' && p.pattern && PATTERNS[p.pattern]) message = `${subject} ${PATTERNS[p.pattern]}`;
  else if (first.keyword === 'type') message = `${subject} ${typeMessage(p.type)}`;
  else if (first.keyword === 'minLength') message = `${subject} must be at least ${plural(p.limit!, 'character')} long`;
  else if (first.keyword === 'maxLength') message = `${subject} must be at most ${plural(p.limit!, 'character')} long`;
  else if (first.keyword === 'maxProperties') message = `${subject} must have at most ${plural(p.limit!, 'field')}`;
  else if (first.keyword === 'minProperties' && !param) message = 'The request body must name at least one field to change';
  else message = `${subject} ${first.message ?? 'is invalid'}`;
  return new AppError(codeOf(first), message, param ? { param } : {});
}

/** The code of a refusal: the failing schema's own (`x-error-code` in the contract, for a cause that has one), else invalid_parameter. */
function codeOf(e: ErrorObject): ErrorCode {
  const own = (e.parentSchema as { 'x-error-code'?: unknown } | undefined)?.['x-error-code'];
  return errorCodes.includes(own as ErrorCode) ? (own as ErrorCode) : 'invalid_parameter';
}

/** The token of `Authorization: Bearer <token>`, if that is what the request sent. */
function bearerToken(req: IncomingMessage): string | undefined {
  return bearerOf(req.headers.authorization);
}

/**
 * An operation without a request body takes none: an empty body, or `{}`. Anything else (fields, an array)
 * would be ignored without a word; it is refused instead.
 */
function assertNoBody(operationId: string, body: unknown): void {
  if (body === undefined) return;
  const field = body !== null && typeof body === 'object' && !Array.isArray(body) ? (Object.keys(body)[0] ?? null) : undefined;
  if (field === null) return;
  throw new AppError('invalid_request', `${operationId} takes no request body: send none, or {}`, field ? { param: field } : {});
}

/** Keys that name an object's prototype machinery in JavaScript: refused in any JSON a request sends. */
const PROTOTYPE_KEYS = new Set(['__proto__', 'constructor', 'prototype']);
/** Deeper than any request may nest (assertStorable refuses that after validation): not walked further. */
const MAX_WALK_DEPTH = 64;

/**
 * Throws a 400 naming the field when a request's JSON body holds a key `__proto__`, `constructor` or `prototype`
 * (in `metadata`, the one free-form object, or anywhere else). JSON.parse makes `__proto__` an own property;
 * stored and read back, then merged or copied by a client, it would set that object's prototype.
 */
function assertNoPrototypeKeys(value: unknown, param: string, depth = 0): void {
  if (value === null || typeof value !== 'object' || depth > MAX_WALK_DEPTH) return;
  if (Array.isArray(value)) {
    value.forEach((item, i) => assertNoPrototypeKeys(item, `${param}[${i}]`, depth + 1));
    return;
  }
  for (const key of Object.keys(value)) {
    const path = param ? `${param}.${key}` : key;
    if (PROTOTYPE_KEYS.has(key))
      throw new AppError('invalid_parameter', `${path}: the keys __proto__, constructor and prototype are not allowed`, { param: path });
    assertNoPrototypeKeys((value as Record<string, unknown>)[key], path, depth + 1);
  }
}

/** The workspace and access a request's path names, for its log line. */
function namedIn(res: Response, params: Record<string, unknown> | undefined): void {
  const locals = res.locals as RequestLocals;
  if (typeof params?.workspaceId === 'string') locals.workspaceId = params.workspaceId;
  if (typeof params?.accessId === 'string') locals.accessId = params.accessId;
}

export function sendError(req: Request, res: Response, err: unknown): void {
  writeError(res, err, res.locals as RequestLocals);
}

function nextLink(publicUrl: string, req: Request, cursor: string): string {
  const url = new URL(req.originalUrl, publicUrl);
  url.searchParams.set('cursor', cursor);
  return `<${publicUrl}${url.pathname}${url.search}>; rel="next"`;
}

/**
 * A list's cursor carries a tag of the list it came from (the operation and its
 * path parameters), so one given to another list (or another workspace's) is
 * refused instead of read as a position there. The domain's own cursor follows
 * the tag: `<tag>.<cursor>`.
 */
function listTag(operationId: string, path: Record<string, unknown>): string {
  const scope = [
    operationId,
    ...Object.keys(path)
      .sort()
      .map((k) => `${k}=${String(path[k])}`),
  ].join('\n');
  return createHash('sha256').update(scope).digest('base64url').slice(0, 10);
}

/**
 * The request's UUIDs in lower case (wire.ts canonicalUuids), where the operation's schemas say format uuid:
 * its path and query parameters and its JSON body. Every handler, audit entry, scope check, list tag and
 * idempotency hash then sees one form of each id.
 */
function canonicalRequest(
  operation: Context['operation'],
  input: { path: Record<string, unknown>; query: Record<string, unknown>; body: unknown },
): void {
  for (const p of (operation.parameters ?? []) as { in?: string; name?: string; schema?: UuidSchema }[]) {
    const bag = p.in === 'path' ? input.path : p.in === 'query' ? input.query : undefined;
    if (bag && p.name && bag[p.name] !== undefined) bag[p.name] = canonicalUuids(bag[p.name], p.schema);
  }
  const body = (operation.requestBody as { content?: Record<string, { schema?: UuidSchema }> } | undefined)?.content?.['application/json']
    ?.schema;
  input.body = canonicalUuids(input.body, body);
}

const UUID_SEGMENT = /(?<=\/)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?=\/|$)/gi;
/** The request's path as an idempotency key is scoped to: its UUID segments in lower case. */
const canonicalPath = (path: string) => path.replace(UUID_SEGMENT, (id) => id.toLowerCase());

function cursorOut(tag: string, cursor: string): string {
  return `${tag}.${cursor}`;
}

function cursorIn(tag: string, cursor: string): string {
  const dot = cursor.indexOf('.');
  if (dot < 0 || cursor.slice(0, dot) !== tag) {
    throw new AppError('invalid_cursor', 'The cursor is not one this list returned', { param: 'cursor' });
  }
  return cursor.slice(dot + 1);
}

function send(req: Request, res: Response, result: HandlerResult, deps: ApiDeps, tag?: () => string): void {
  if (result.headers) res.set(result.headers);
  if (result.nextCursor) {
    const cursor = cursorOut(tag?.() ?? '', result.nextCursor);
    res.set('X-Next-Cursor', cursor);
    res.set('Link', nextLink(deps.publicUrl.forRequest(req), req, cursor));
  }
  res.status(result.status);
  if (result.stream) {
    // An export whose client left before its answer began is never read: destroyed, it ends what it holds (its
    // export slot, a read under way), as a stream cut half-way is by the pipeline.
    if (res.destroyed) result.stream.destroy();
    // A failure half-way cuts the connection (a truncated body is never taken for a whole one).
    else pipeline(result.stream, res).catch((err: unknown) => res.destroy(err as Error));
  } else if (result.body === undefined) res.end();
  else res.json(result.body);
}

export function createApi(deps: ApiDeps) {
  const api = new OpenAPIBackend({
    definition: deps.definition,
    strict: true,
    validate: true,
    // Quick mode skips compiling a validator for every response and response header
    // (never used here: tests check responses with their own checker), three
    // quarters of the start-up time, and the check of the document against the
    // OpenAPI 3.0 schema (the 3.1 document is linted by redocly, npm run lint);
    // init() below compiles the request validators at once, so no request pays
    // for a compile.
    quick: true,
    coerceTypes: true,
    // verbose: an error carries its schema, for the code a schema names (codeOf).
    ajvOpts: { strict: false, allErrors: false, verbose: true },
    customizeAjv: (ajv) => {
      addFormats(ajv);
      ajv.addFormat('date-time', { type: 'string', validate: isDateTime });
      // ajv-formats' uuid takes a `urn:uuid:` prefix too, which no id column does.
      ajv.addFormat('uuid', { type: 'string', validate: hasUuidForm });
      return ajv;
    },
  });

  api.registerSecurityHandler('managementKey', async (_c: Context, req: Request): Promise<Principal> => {
    return deps.managementKeys.authenticate(bearerToken(req));
  });
  // The gateway is served by its own router; reaching it here means the path
  // did not match a gateway route.
  api.registerSecurityHandler('inferenceKey', async () => {
    throw new AppError('invalid_inference_key', 'Gateway calls go to /providers/{providerConnectionId}/{path}');
  });
  api.registerSecurityHandler('inferenceKeyHeader', async () => {
    throw new AppError('invalid_inference_key', 'Gateway calls go to /providers/{providerConnectionId}/{path}');
  });

  api.register({
    notFound: async (_c: Context, req: Request, res: Response) =>
      sendError(req, res, new AppError('route_not_found', `No route ${req.method} ${req.path}`)),
    methodNotAllowed: async (_c: Context, req: Request, res: Response) =>
      sendError(req, res, new AppError('method_not_allowed', `${req.method} is not allowed on ${req.path}`)),
    unauthorizedHandler: async (c: Context, req: Request, res: Response) => {
      namedIn(res, c.request.params);
      const results = Object.values(c.security ?? {}) as unknown[];
      const failure = results.find((r): r is { error: unknown } => Boolean(r && typeof r === 'object' && 'error' in r));
      sendError(req, res, failure?.error ?? new AppError('missing_credentials', 'Authentication required'));
    },
    validationFail: async (c: Context, req: Request, res: Response) => sendError(req, res, validationError(c.validation.errors)),
  });

  const operationIds = operationIdsOf(deps.definition);
  const missing = operationIds.filter((id) => !deps.handlers[id]);
  if (missing.length) {
    throw new Error(`The contract has operations without a handler: ${missing.join(', ')}. Add them to src/handlers/.`);
  }

  for (const operationId of operationIds) {
    const fn = deps.handlers[operationId]!;
    api.register(operationId, async (c: Context, req: Request, res: Response) => {
      const locals = res.locals as RequestLocals;
      const principal = c.security?.['managementKey'] as Principal | undefined;
      const actor: Actor = {
        keyId: principal?.keyId ?? 'anonymous',
        isRoot: principal?.isRoot ?? false,
        workspaceIds: principal ? principal.workspaceIds : new Set(),
        requestId: locals.requestId,
        clientAddress: req.ip ?? null,
      };
      locals.actorKeyId = principal?.keyId;
      const idempotencyKey = req.method === 'POST' && principal ? req.get('Idempotency-Key') : undefined;
      const input = {
        body: c.request.requestBody,
        path: c.request.params ?? {},
        query: c.request.query ?? {},
        actor,
        headers: req.headers,
        publicUrl: deps.publicUrl.forRequest(req),
      };
      canonicalRequest(c.operation, input);
      namedIn(res, input.path);
      // Only a list's answer, or a request with a cursor, needs its tag.
      const tag = () => listTag(operationId, input.path);
      try {
        if (!c.operation.requestBody) assertNoBody(operationId, input.body);
        assertStorable(input.body, '');
        assertStorable(input.query, '');
        if (typeof input.query.cursor === 'string') input.query = { ...input.query, cursor: cursorIn(tag(), input.query.cursor) };
        if (!idempotencyKey) return send(req, res, await fn(input), deps, tag);
        const path = canonicalPath(req.path);
        const hash = deps.idempotency.requestHash(req.method, path, input.body);
        const claim = await deps.idempotency.claim(actor.keyId, idempotencyKey, req.method, path, hash);
        if (claim.kind === 'replay') {
          return send(req, res, { ...claim.response, headers: { ...claim.response.headers, 'Idempotent-Replayed': 'true' } }, deps);
        }
        let result: HandlerResult;
        try {
          result = await fn(input);
        } catch (err) {
          const appError = toAppError(err);
          if (appError.status >= 500) await deps.idempotency.release(actor.keyId, idempotencyKey, claim.claimedAt);
          else {
            await deps.idempotency.complete(actor.keyId, idempotencyKey, claim.claimedAt, {
              status: appError.status,
              body: errorBody(appError, locals.requestId),
              headers: {},
            });
          }
          throw err;
        }
        await deps.idempotency.complete(actor.keyId, idempotencyKey, claim.claimedAt, {
          status: result.status,
          body: result.body,
          headers: result.headers ?? {},
        });
        send(req, res, result, deps);
      } catch (err) {
        sendError(req, res, err);
      }
    });
  }

  return {
    api,
    operationIds,
    async init() {
      await api.init();
      api.validator.preCompileRequestValidators();
    },
    async handle(req: Request, res: Response) {
      try {
        // Before validation, like the JSON parser's own refusals: no schema sees such a key.
        assertNoPrototypeKeys(req.body, '');
      } catch (err) {
        return sendError(req, res, err);
      }
      const context = {
        method: req.method,
        path: req.path,
        query: req.query as Record<string, string>,
        headers: req.headers as Record<string, string>,
        body: req.body,
      };
      try {
        await api.handleRequest(context, req, res);
      } catch (err) {
        // The router decodes path parameters before any handler: `%E0%A4%A` is the client's error.
        if (err instanceof URIError) {
          return sendError(req, res, new AppError('invalid_request', 'The request path holds a malformed percent-encoding'));
        }
        sendError(req, res, err);
      }
    },
    /** The operationId a request maps to, for metrics and logs. */
    operationIdOf(req: Request): string | undefined {
      return api.router.matchOperation({ method: req.method, path: req.path, headers: {} })?.operationId;
    },
  };
}

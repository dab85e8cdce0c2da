/**
 * The glue between express and the contract: openapi-backend routes each request
 * to its operation, authenticates the Management Key, validates the request with
 * ajv before any handler runs (its refusals in words: validation.ts), applies
 * Idempotency-Key, and writes the handler's result (or the Error body) to the response.
 */
import type { Request, Response } from 'express';
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { OpenAPIBackend, type Context, type Document } from 'openapi-backend';
import addFormatsPkg from 'ajv-formats';
import { AppError, errorBody, toAppError } from '../errors.js';
import type { Actor } from '../domain/actor.js';
import { assertStorable } from '../domain/storable-text.js';
import { hasUuidForm } from '../ids.js';
import type { IdempotencyService } from '../domain/idempotency/idempotency-service.js';
import type { Handler, HandlerMap, HandlerResult } from './handler.js';
import { writeError } from '../web/error-response.js';
import type { RequestLocals } from '../web/locals.js';
import type { PublicUrl } from './public-url.js';
import { compileRoutes } from './route-table.js';
import type { AdminAuthentication, AdminPrincipal } from './session-auth.js';
import { isDateTime, validationError } from './validation.js';
import { canonicalUuids, type UuidSchema } from './wire.js';

const addFormats = addFormatsPkg as unknown as (ajv: unknown) => unknown;

export interface ApiDeps {
  definition: Document;
  handlers: HandlerMap;
  /** Who calls: a Management Key, or a person's session (src/http/session-auth.ts). */
  authentication: AdminAuthentication;
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

/**
 * The request validators compiled for a contract, by its text, each operation's on its first request: a process
 * that builds several apps on the same contract (the tests start one or more per file) compiles each once. They
 * are the same backend options' ajv functions, which keep no state between requests.
 */
const compiledValidators = new Map<string, OpenAPIBackend['validator']['requestValidators']>();

/** The contract's router and request validators (ajv, with the formats and messages above). */
function createBackend(definition: Document): OpenAPIBackend {
  return new OpenAPIBackend({
    definition,
    strict: true,
    validate: true,
    // Quick mode skips compiling a validator for every response and response header
    // (never used here: tests check responses with their own checker), three
    // quarters of the start-up time, and the check of the document against the
    // OpenAPI 3.0 schema (the 3.1 document is linted by redocly, npm run lint).
    // It also compiles each operation's request validators on its first request
    // (a new ajv for each, a few ms), not all 120 operations' at the start: a
    // process holds only the validators of the operations it has served.
    quick: true,
    coerceTypes: true,
    // verbose: an error carries its schema, for the code a schema names (codeOf). validateSchema off: each
    // operation's ajv would otherwise compile JSON Schema's meta-schema to check the operation's schemas (which
    // `npm run lint:openapi` checks), most of a validator's compile time; the requests are validated the same.
    ajvOpts: { strict: false, allErrors: false, verbose: true, validateSchema: false },
    customizeAjv: (ajv) => {
      addFormats(ajv);
      ajv.addFormat('date-time', { type: 'string', validate: isDateTime });
      // ajv-formats' uuid takes a `urn:uuid:` prefix too, which no id column does.
      ajv.addFormat('uuid', { type: 'string', validate: hasUuidForm });
      return ajv;
    },
  });
}

/** Who may call: a Management Key or a person's session; an inference key here is a gateway call sent to the wrong path. */
function registerSecurity(api: OpenAPIBackend, deps: ApiDeps): void {
  api.registerSecurityHandler('managementKey', async (c: Context, req: Request): Promise<AdminPrincipal> => {
    return deps.authentication.authenticate(req, c.operation.operationId);
  });
  // The gateway is served by its own router; reaching it here means the path
  // did not match a gateway route.
  api.registerSecurityHandler('inferenceKey', async () => {
    throw new AppError('invalid_inference_key', 'Gateway calls go to /providers/{providerConnectionId}/{path}');
  });
  api.registerSecurityHandler('inferenceKeyHeader', async () => {
    throw new AppError('invalid_inference_key', 'Gateway calls go to /providers/{providerConnectionId}/{path}');
  });
}

/** The answers of a request no operation takes: no route, a method not allowed, no credentials, invalid. */
function registerRefusals(api: OpenAPIBackend): void {
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
}

/** Who makes the request: the Management Key's principal (anonymous before authentication). */
function actorOf(principal: AdminPrincipal | undefined, req: Request, locals: RequestLocals): Actor {
  return {
    keyId: principal?.keyId ?? 'anonymous',
    isRoot: principal?.isRoot ?? false,
    workspaceIds: principal ? principal.workspaceIds : new Set(),
    requestId: locals.requestId,
    clientAddress: req.ip ?? null,
    roleCheck: principal?.roleCheck,
    person: principal?.person,
    roleIn: principal?.roleIn,
  };
}

/**
 * A POST with an Idempotency-Key: the first request runs the handler and stores its answer (a 4xx too; a 5xx
 * frees the key for a retry); the same request again replays the answer stored.
 */
async function runIdempotent(
  deps: ApiDeps,
  req: Request,
  res: Response,
  run: () => Promise<HandlerResult>,
  claimOf: { actor: Actor; key: string; body: unknown },
): Promise<void> {
  const { actor, key } = claimOf;
  const path = canonicalPath(req.path);
  const hash = deps.idempotency.requestHash(req.method, path, claimOf.body);
  const claim = await deps.idempotency.claim(actor.keyId, key, req.method, path, hash);
  if (claim.kind === 'replay') {
    return send(req, res, { ...claim.response, headers: { ...claim.response.headers, 'Idempotent-Replayed': 'true' } }, deps);
  }
  let result: HandlerResult;
  try {
    result = await run();
  } catch (err) {
    const appError = toAppError(err);
    if (appError.status >= 500) await deps.idempotency.release(actor.keyId, key, claim.claimedAt);
    else {
      await deps.idempotency.complete(actor.keyId, key, claim.claimedAt, {
        status: appError.status,
        body: errorBody(appError, (res.locals as RequestLocals).requestId),
        headers: {},
      });
    }
    throw err;
  }
  await deps.idempotency.complete(actor.keyId, key, claim.claimedAt, {
    status: result.status,
    body: result.body,
    headers: result.headers ?? {},
  });
  send(req, res, result, deps);
}

/** An operation's handler as the router runs it: the request checked and made canonical, the handler run, its answer sent. */
function operationHandler(deps: ApiDeps, operationId: string, fn: Handler) {
  return async (c: Context, req: Request, res: Response) => {
    const locals = res.locals as RequestLocals;
    const principal = c.security?.['managementKey'] as AdminPrincipal | undefined;
    const actor = actorOf(principal, req, locals);
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
      await runIdempotent(deps, req, res, () => fn(input), { actor, key: idempotencyKey, body: input.body });
    } catch (err) {
      sendError(req, res, err);
    }
  };
}

export function createApi(deps: ApiDeps) {
  const api = createBackend(deps.definition);
  registerSecurity(api, deps);
  registerRefusals(api);

  const operationIds = operationIdsOf(deps.definition);
  const missing = operationIds.filter((id) => !deps.handlers[id]);
  if (missing.length) {
    throw new Error(`The contract has operations without a handler: ${missing.join(', ')}. Add them to src/handlers/.`);
  }
  for (const operationId of operationIds) api.register(operationId, operationHandler(deps, operationId, deps.handlers[operationId]!));

  return {
    api,
    operationIds,
    async init() {
      const contract = JSON.stringify(deps.definition);
      await api.init();
      compileRoutes(api.router);
      // Shared by the apps of a process on the same contract: each operation's validators are compiled on its
      // first request (quick mode) into this one table, whichever app served it.
      const shared = compiledValidators.get(contract);
      if (shared) api.validator.requestValidators = shared;
      else compiledValidators.set(contract, api.validator.requestValidators);
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

export type Api = ReturnType<typeof createApi>;

/**
 * The gateway's hot path: `{METHOD} /providers/{connectionId}/{providerPath}`.
 * Here a request is routed, authenticated and relayed; its quota admission,
 * charge and record belong to its MeteredCall (metered-call.ts).
 *
 * Before the upstream call, at most two database round trips, usually none: the
 * key/access/connection/period lookup (auth-cache.ts, cached) and the quota
 * admission (in memory while the process's lease of the period covers the call,
 * else one statement extending it). The request body is read while the lookup
 * runs. The answer is streamed back as it arrives, with backpressure (relay.ts);
 * the call's records are written after the last byte (call-recorder.ts).
 * Requests reach it straight from the server's request listener, not through
 * express (src/app.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { Db } from '../db/database.js';
import type { Clock } from '../domain/actor.js';
import type { ChangeFeed } from '../domain/changes/change-feed.js';
import { openProviderApiKey } from '../domain/provider-connections/provider-secret.js';
import type { QuotaService } from '../domain/quota/quota-service.js';
import type { RateService } from '../domain/rate-limits/rate-service.js';
import { rateHeaders, type RateView } from '../domain/rate-limits/rate-types.js';
import type { KeyHasher } from '../domain/security/key-hash.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import type { Config } from '../config.js';
import { AppError, toAppError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { traceIdOf, type Tracer } from '../observability/tracing.js';
import { bearerOf, writeError } from '../web/error-response.js';
import type { RequestLocals } from '../web/locals.js';
import { pathOf } from '../web/request-target.js';
import { authorizeKey, createAuthCache, type CacheEntry, type Upstream } from './auth-cache.js';
import { createCallReport, operationOf } from './call-report.js';
import { CallTrace, failed } from './call-trace.js';
import { createCallRepo, type AuthRow } from './call-repo.js';
import { createGatewayDb } from './gateway-db.js';
import { rawHeader, upstreamHeaders } from './headers.js';
import { filterModelList, freeEndpointFor, inspectorFor } from './inspectors.js';
import { createCallMeter, type MeteredCall, type QuotaView } from './metered-call.js';
import { meOf } from './me.js';
import { parseGatewayUrl, type GatewayTarget } from './path-safety.js';
import { maskedKey } from './secret-mask.js';
import { Relay } from './relay.js';
import { createUpstreamPools } from './upstreams.js';

const PROXIED = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

/** The lookup's connection for a request that names none (/v1/me): no connection has the nil UUID. */
const NO_CONNECTION = '00000000-0000-0000-0000-000000000000';
/** The end user's self-service read under a connection's gatewayBaseUrl: `/providers/{id}/v1/me`. */
const ME_ROUTE = 'v1/me';
/** A learned output bound is told to the other processes for models named in at most this many characters (NOTIFY's payload is bounded). */
const MAX_SHARED_MODEL = 256;

/** Sets a header of undici's list (name, value, ...; names in lower case), replacing the one there. */
function setHeader(headers: string[], name: string, value: string): void {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i] === name) {
      headers[i + 1] = value;
      return;
    }
  }
  headers.push(name, value);
}

export interface GatewayDeps {
  /** Where the gateway counts what it does beyond the request metrics (optional: tests build gateways without). */
  metrics?: Metrics;
  /** Traces on: each call's spans (src/gateway/call-trace.ts); none: no span is made. */
  tracer?: Tracer | undefined;
  db: Db;
  config: Config;
  clock: Clock;
  logger: Logger;
  quota: QuotaService;
  rates: RateService;
  hasher: KeyHasher;
  secretBox: SecretBox;
  /** Changes that decide a call: the cache drops what they touch. */
  changes: ChangeFeed;
}

function credentialOf(req: IncomingMessage): string {
  const bearer = bearerOf(rawHeader(req.rawHeaders, 'authorization'));
  if (bearer) return bearer;
  const apiKey = rawHeader(req.rawHeaders, 'x-api-key')?.trim();
  if (apiKey) return apiKey;
  throw new AppError('missing_credentials', 'Send the inference key as Authorization: Bearer or x-api-key');
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new AppError('payload_too_large', 'The request body is larger than the limit'));
        req.pause();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** 401/403/404 in the order a caller can act on them. */
function authorize(found: AuthRow | null, now: Date): AuthRow {
  const row = authorizeKey(found, now);
  if (row.access_status === 'SUSPENDED') {
    throw new AppError('access_suspended', 'The workspace access is suspended', { current_status: row.access_status });
  }
  if (row.access_status !== 'ACTIVE' || row.access_starts_at > now || (row.access_ends_at && row.access_ends_at <= now)) {
    throw new AppError('access_not_active', 'The workspace access is not active', { current_status: row.access_status });
  }
  if (!row.connection_id || row.connection_status === 'ARCHIVED') {
    throw new AppError('provider_connection_not_found', 'No active provider connection with that id', { param: 'providerConnectionId' });
  }
  if (row.connection_status !== 'ACTIVE') {
    throw new AppError('connection_suspended', 'The provider connection is suspended', { current_status: row.connection_status ?? '' });
  }
  return row;
}

export function createGateway(deps: GatewayDeps) {
  const { config, clock, logger, quota, rates, hasher, secretBox } = deps;
  const { db, owned } = createGatewayDb(deps.db, config.gatewayAsyncCommit, config.databasePoolMax);
  const repo = createCallRepo(db, config.databasePreparedStatements);
  const cache = createAuthCache({
    repo,
    clock,
    ttlMs: config.authCacheTtlMs,
    outageGraceMs: Math.floor(config.leaseTtlMs / 2),
    hash: (token) => hasher.hash(token),
  });
  const unsubscribe = deps.changes.subscribe((change) => cache.invalidate(change));
  const pools = createUpstreamPools({ allowPrivate: config.allowPrivateUpstreams });
  const { metrics, tracer } = deps;
  const calls = createCallReport({ logger, metrics });
  const meter = createCallMeter({
    db,
    repo,
    clock,
    logger,
    leaseTtlMs: config.leaseTtlMs,
    callSnapshotMs: config.callSnapshotMs,
    leaseIdleMs: config.quotaLeaseIdleMs,
    // Records wait for PostgreSQL in the data dir; the embedded database is never away from its process.
    spoolDir: config.databaseUrl ? join(config.dataDir, 'spool') : undefined,
    onLeaseStatement: metrics?.leaseStatement,
    onOutputOverBound: metrics?.outputOverBound,
    // Off the call's path; a notification lost leaves the other processes to learn it themselves.
    shareLearned: (learned) => {
      if (learned.model.length > MAX_SHARED_MODEL) return;
      deps.changes.shareLearned(learned, db).catch((err: Error) => {
        logger.warn({ msg: 'could not tell the other processes of a learned output bound', connectionId: learned.connectionId, error: err.message });
      });
    },
    report: calls.report,
    recorderEvents: metrics && {
      batch: metrics.recorderBatch,
      failure: metrics.recorderFailure,
      spooled: metrics.recorderSpooled,
    },
  });
  const unlearn = deps.changes.onLearned((learned) => meter.learned(learned));
  metrics?.watchRecorder(() => meter.recorderStats());
  if (owned) metrics?.watchPool('gateway', db);

  /** The shared Error answer, with the gateway's headers; a stream already under way is cut instead. */
  function sendError(
    res: ServerResponse,
    locals: RequestLocals,
    err: unknown,
    metered: boolean,
    view: QuotaView | undefined,
    rateView: RateView | undefined,
  ): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.setHeader('x-request-id', locals.requestId);
    res.setHeader('x-nexus-request-id', locals.requestId);
    res.setHeader('x-nexus-metering-status', metered ? 'metered' : 'unmetered');
    if (view) {
      res.setHeader('x-nexus-quota-remaining', view.remaining.toString());
      res.setHeader('x-nexus-quota-reset', view.reset.toISOString());
    }
    const headers = rateHeaders(rateView, clock.now().getTime(), []);
    for (let i = 0; i < headers.length; i += 2) res.setHeader(headers[i]!, headers[i + 1]!);
    // The official SDKs retry 409 and 429 on their own (three calls, seconds of backoff); none of the
    // gateway's own refusals changes by retrying, so they are told not to (a 502 may, and stays silent),
    // except one that says when it frees (a rate limit's retry_after: writeError sends it as Retry-After, and
    // the SDKs wait that long).
    const appError = toAppError(err);
    if (appError.extras.retry_after !== undefined) {
      res.setHeader('x-should-retry', 'true');
    } else if (appError.status < 500) {
      res.setHeader('x-should-retry', 'false');
    }
    writeError(res, err, locals);
  }

  /** A gateway request; `locals` carries its request id and arrival time (the request observer's). */
  async function handle(req: IncomingMessage, res: ServerResponse, locals: RequestLocals): Promise<void> {
    let parsed: GatewayTarget | undefined;
    try {
      parsed = parseGatewayUrl(req.url!);
    } catch {
      // Refused below, as a call.
    }
    // GET {gatewayBaseUrl}/v1/me: the end user's view of its access, where its SDK is pointed (either profile). Not a
    // call; another method there is a gateway call as any other path is.
    if (parsed?.route === ME_ROUTE && req.method === 'GET') return handleMe(req, res, locals, parsed.connectionId);
    const startedAt = clock.now();
    const method = req.method!;
    locals.operationId = operationOf(method);
    const traceparent = rawHeader(req.rawHeaders, 'traceparent');
    const trace = tracer ? new CallTrace(tracer, locals.operationId, method, pathOf(req.url!), locals.requestId, traceparent) : undefined;
    /** The key's row, once looked up: a valid key's refusals carry its quota headers. */
    let looked: AuthRow | null = null;
    let call: MeteredCall | undefined;
    let raw: Buffer | undefined;
    try {
      if (!PROXIED.has(method)) throw new AppError('method_not_allowed', `${method} is not proxied`);
      // A target that did not parse is parsed again here, to be refused in its turn.
      const target = parsed ?? parseGatewayUrl(req.url!);
      const token = credentialOf(req);
      const bodyRead = readBody(req, config.gatewayBodyLimitBytes);
      bodyRead.catch(() => {});
      let entry = await cache.lookup(token, target.connectionId);
      looked = entry.row;
      let auth = authorize(entry.row, startedAt);
      const inspector = inspectorFor(auth.protocol_profile!, method, target.route);
      // Governed but free: the model list, a model's description, token counting (no quota, no workspace setting).
      const free = inspector ? undefined : freeEndpointFor(auth.protocol_profile!, method, target.route);
      const endpoint = target.providerPath.replace(/\/$/, '');
      call = meter.open(auth, inspector, {
        requestId: locals.requestId,
        method,
        endpoint,
        // Traces on: the call's trace (its traceparent's, when it came with one).
        traceId: trace ? trace.traceId : traceIdOf(traceparent),
        startedAt,
        t0: locals.startedAt,
        trace,
      });
      if (!inspector && !free && !auth.allow_unmetered_passthrough) {
        throw new AppError(
          'unmetered_endpoint',
          `${method} ${endpoint} is not metered on an '${auth.protocol_profile!}' connection; the workspace can allow unmetered calls with allowUnmeteredPassthrough`,
        );
      }
      raw = await bodyRead;
      let rewriteJson: ((text: string) => string) | undefined;
      if (inspector) {
        const encoding = rawHeader(req.rawHeaders, 'content-encoding');
        if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
          // The gateway reads the body to bound the call; it would bound one body and send the upstream another.
          throw new AppError('invalid_request', `A metered endpoint needs an uncompressed body (this one came as Content-Encoding: ${encoding})`, {
            param: 'content-encoding',
          });
        }
        const admission = trace?.admission();
        try {
          if (!(await call.admit(raw))) {
            // The cached period is over (a plan change split it, or it ended): the access is read again, once.
            entry = await cache.reload(token, target.connectionId);
            looked = entry.row;
            auth = authorize(entry.row, startedAt);
            call.reauthorized(auth);
            await call.admit(raw);
          }
        } catch (err) {
          if (admission) failed(admission, err);
          throw err;
        } finally {
          admission?.end();
        }
      } else if (free) {
        const allows = call.free(free, raw, startedAt);
        if (allows) rewriteJson = (text) => filterModelList(text, allows);
      } else {
        await call.passthrough(raw, startedAt);
      }
      await relay(req, res, locals, call, auth, upstreamOf(entry, auth), target, call.prepared?.body ?? raw, rewriteJson, trace);
    } catch (err) {
      sendError(
        res,
        locals,
        err,
        call?.inspector !== undefined,
        call?.view ?? meter.quotaView(looked, startedAt),
        call?.rateView ?? meter.rateView(looked, startedAt),
      );
      if (call) {
        // Refused or failed after the access and connection were known: recorded (REJECTED: no upstream call).
        call.refused(err, raw);
      } else {
        const refusal = toAppError(err);
        calls.refusedEarly({
          requestId: locals.requestId,
          method,
          path: pathOf(req.url!),
          status: refusal.status,
          errorCode: refusal.code,
          seconds: Number(process.hrtime.bigint() - locals.startedAt) / 1e9,
          workspaceId: looked?.workspace_id,
          accessId: looked?.workspace_access_id,
          error: locals.error,
        });
        trace?.refusedEarly(refusal.status, refusal.code);
      }
    }
  }

  /**
   * GET /v1/me (me.ts): the key's row read fresh, answered as the end user's view of its access. Under a
   * connection's gatewayBaseUrl the connection must be one of the key's workspace, as for a call there.
   */
  async function handleMe(req: IncomingMessage, res: ServerResponse, locals: RequestLocals, connectionId = NO_CONNECTION): Promise<void> {
    locals.operationId = 'getMe';
    try {
      if (req.method !== 'GET') throw new AppError('method_not_allowed', `${req.method} is not allowed on /v1/me`);
      const token = credentialOf(req);
      req.resume();
      const looked = await cache.read(token, connectionId);
      const now = clock.now();
      const me = meOf(looked, now, meter.rateView(looked, now));
      if (connectionId !== NO_CONNECTION && (!looked!.connection_id || looked!.connection_status === 'ARCHIVED')) {
        throw new AppError('provider_connection_not_found', 'No active provider connection with that id', { param: 'providerConnectionId' });
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
      sendError(res, locals, err, false, undefined, undefined);
    }
  }

  /** The connection's decrypted key, its mask and its parsed base URL, made once per cache entry. */
  function upstreamOf(entry: CacheEntry, auth: AuthRow): Upstream {
    entry.apiKey ??= openProviderApiKey(secretBox, {
      id: auth.connection_id!,
      api_key_ciphertext: auth.api_key_ciphertext!,
      api_key_key_id: auth.api_key_key_id!,
    });
    if (entry.maskedKey === undefined) entry.maskedKey = maskedKey(entry.apiKey);
    entry.baseUrl ??= new URL(auth.base_url!);
    return entry as Upstream;
  }

  /** The upstream call, its answer relayed to the client; the call is told how it ended. */
  async function relay(
    req: IncomingMessage,
    res: ServerResponse,
    locals: RequestLocals,
    call: MeteredCall,
    auth: AuthRow,
    upstream: Upstream,
    target: GatewayTarget,
    body: Buffer,
    rewriteJson: ((text: string) => string) | undefined,
    trace: CallTrace | undefined,
  ): Promise<void> {
    const base = upstream.baseUrl;
    const path = `${base.pathname.replace(/\/$/, '')}/${target.providerPath}${target.search}`;
    const headers = upstreamHeaders(req.rawHeaders, auth.protocol_profile!, upstream.apiKey, body.length);
    // Traces on: the upstream's spans become children of the upstream call's (the client's traceparent is replaced).
    if (trace) setHeader(headers, 'traceparent', trace.upstreamStarted(auth.protocol_profile!, call.inspector, req.method!, base));
    const metered = call.inspector !== undefined;
    const answerHeaders = ['x-nexus-request-id', locals.requestId, 'x-nexus-metering-status', metered ? 'metered' : 'unmetered'];
    const view = call.view;
    if (view) answerHeaders.push('x-nexus-quota-remaining', view.remaining.toString(), 'x-nexus-quota-reset', view.reset.toISOString());
    const cap = call.prepared?.outputCap;
    if (cap) answerHeaders.push('x-nexus-output-cap', `${cap.sent}; requested=${cap.requested}`);
    rateHeaders(call.rateView, clock.now().getTime(), answerHeaders);
    const relay = new Relay(res, {
      requestId: locals.requestId,
      answerHeaders,
      inspector: call.inspector,
      prepared: call.prepared,
      maskedKey: upstream.maskedKey,
      watcher: call,
      rewriteJson,
    });
    // The answer's status is the upstream's once it began, unless the gateway refuses the answer instead.
    let refused = false;
    locals.upstreamAnswered = () => relay.status !== undefined && !refused;
    call.started(relay, clock.now());
    await relay.start(pools.get(base), {
      method: req.method!,
      path,
      headers,
      body,
      timeoutMs: auth.upstream_timeout_ms ?? config.upstreamTimeoutMs,
    });
    const refusal = call.answered();
    if (refusal) {
      refused = true;
      sendError(res, locals, refusal, metered, view, call.rateView);
    }
  }

  return {
    handle,
    handleMe,
    /**
     * A shutdown's deadline has come: the upstream calls still under way are cut (a metered JSON call
     * would otherwise be read to its end, up to the upstream timeout) and recorded FAILED `server_shutdown`,
     * charged by the rule of an answer that broke off (metered-call.ts). Their clients' connections are
     * closed next by the server.
     */
    cutCalls: () => meter.cutCalls(),
    /** Waits for the records started so far, then returns the quota leases not in use. */
    drain: () => meter.drain(),
    /**
     * Reclaims the leases of dead processes past their TTL: charges their calls in flight, returns what they
     * held; and frees the rate-limit slots they held.
     */
    sweepExpired: async () => {
      const now = clock.now();
      const [reclaimed] = await Promise.all([quota.sweepExpired(now), rates.sweepExpired(now)]);
      return reclaimed;
    },
    /** Runs the lease heartbeat now (tests). */
    heartbeat: () => meter.heartbeat(),
    /** Writes the records a process that stopped left in the spool (at start). */
    recover: () => meter.recover(),
    recorderStats: () => meter.recorderStats(),
    /** How many key lookup queries it has made (tests). */
    keyLookups: () => cache.queries(),
    /** Forget cached lookups: keys and the responses recorded lately (tests). */
    clearCache: () => {
      cache.clear();
      meter.forgetResponses();
    },
    async close(): Promise<void> {
      await meter.drain();
      meter.close();
      unsubscribe();
      unlearn();
      cache.close();
      await pools.close();
      if (owned) await db.destroy();
    },
  };
}

export type Gateway = ReturnType<typeof createGateway>;

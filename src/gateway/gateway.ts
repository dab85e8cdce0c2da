/**
 * The gateway's hot path: `{METHOD} /providers/{connectionId}/{providerPath}`.
 * It only orchestrates a request through the modules that do each step:
 * method and path (path-safety.ts), credential and body (client-request.ts),
 * the key's lookup and authorization (auth-cache.ts), the endpoint's protocol
 * (src/protocols/), the call's admission, charge and record (metered-call.ts, on
 * the process's meter: call-meter.ts), the upstream call (relay.ts) and the
 * gateway's own answers (answers.ts). The process-wide parts it runs on are
 * built once, beside the domain, by createGatewayParts (gateway-parts.ts).
 *
 * Before the upstream call, at most two database round trips, usually none: the
 * key/access/connection/period lookup (cached) and the quota admission (in
 * memory while the process's lease of the period covers the call, else one
 * statement extending it). The request body is read while the lookup runs. The
 * answer is streamed back as it arrives, with backpressure; the call's records
 * are written after the last byte (call-recorder.ts). Requests reach it straight
 * from the server's request listener, not through express (src/app.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config.js';
import type { Clock } from '../domain/actor.js';
import type { QuotaService } from '../domain/quota/quota-service.js';
import type { RateService } from '../domain/rate-limits/rate-service.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import { AppError, toAppError } from '../errors.js';
import type { RequestLocals } from '../web/locals.js';
import { traceIdOf, type Tracer } from '../observability/tracing.js';
import { sendError } from './answers.js';
import { authorizeCall, type CacheEntry } from './auth-cache.js';
import { operationOf } from './call-report.js';
import { CallTrace, failed } from './call-trace.js';
import type { AuthRow } from './call-repo.js';
import { asksForWebSocket, assertIdentityEncoding, credentialOf, readBody } from './client-request.js';
import type { GatewayParts } from './gateway-parts.js';
import { rawHeader } from './headers.js';
import { filterModelList } from '../protocols/inspectors.js';
import { meOf } from './me.js';
import type { CallStart, MeteredCall } from './metered-call.js';
import { pathOf } from '../web/request-target.js';
import { checkSlashesFor, parseGatewayUrl, type GatewayTarget } from './path-safety.js';
import { foreignProtocolOf, protocolOf, protocolOfPath } from '../protocols/index.js';
import { createRouteCalls, routeProfile, usableTargets } from './route-call.js';
import { createUpstreamAttempts, type CallContext } from './upstream-attempt.js';

const PROXIED = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

/** The lookup's connection for a request that names none (/v1/me): no connection has the nil UUID. */
const NO_CONNECTION = '00000000-0000-0000-0000-000000000000';
/** The end user's self-service read under a connection's gatewayBaseUrl: `/providers/{id}/v1/me`. */
const ME_ROUTE = 'v1/me';

export interface GatewayDeps {
  /** The process-wide parts (gateway-parts.ts). */
  parts: GatewayParts;
  /** Traces on: each call's spans (src/gateway/call-trace.ts); none: no span is made. */
  tracer?: Tracer | undefined;
  config: Config;
  clock: Clock;
  quota: QuotaService;
  rates: RateService;
  secretBox: SecretBox;
}

export function createGateway(deps: GatewayDeps) {
  const { config, clock, quota, rates, secretBox, tracer, parts } = deps;
  const { cache, pools, meter } = parts;
  const attempts = createUpstreamAttempts({ clock, secretBox, pools });
  const routeCalls = createRouteCalls({ config, clock, attempts, registry: parts.routes, metrics: parts.attemptMetrics });

  /** A gateway request; `locals` carries its request id and arrival time (the request observer's). */
  async function handle(req: IncomingMessage, res: ServerResponse, locals: RequestLocals): Promise<void> {
    let parsed: GatewayTarget | undefined;
    try {
      parsed = parseGatewayUrl(req.url!);
    } catch {
      // Refused below, as a call.
    }
    // GET {gatewayBaseUrl}/v1/me: the end user's view of its access, where its SDK is pointed (any profile). Not a
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
      const credential = credentialOf(req);
      const bodyRead = readBody(req, config.gatewayBodyLimitBytes);
      bodyRead.catch(() => {});
      // A route (docs/routes.md) is called as a connection is: the key's row is looked up for each of its targets.
      const route = parts.routes.get(target.connectionId);
      let usable: Map<string, CacheEntry> | undefined;
      let entry: CacheEntry;
      if (route) {
        const entries = await Promise.all(route.targets.map((t) => cache.lookup(credential, t.providerConnectionId)));
        usable = usableTargets(route, entries);
        entry = usable.values().next().value ?? entries[0]!;
      } else {
        entry = await cache.lookup(credential, target.connectionId);
      }
      looked = entry.row;
      const endpoint = target.providerPath.replace(/\/$/, '');
      const start: CallStart = {
        requestId: locals.requestId,
        method,
        endpoint,
        // Traces on: the call's trace (its traceparent's, when it came with one).
        traceId: trace ? trace.traceId : traceIdOf(traceparent),
        startedAt,
        t0: locals.startedAt,
        trace,
        credential,
        routeId: route?.id,
        boundConnections: usable && [...usable.keys()],
        uncappedTarget: usable && [...usable.values()].some((e) => e.row!.connection_enforces_output_cap === false),
      };
      let auth: AuthRow;
      try {
        auth = authorizeCall(entry.row, startedAt);
      } catch (err) {
        // A valid key's access or connection refuses the call (suspended, not active, archived): the operator
        // finds it among the access's invocations, REJECTED with its reason.
        call = openRefused(entry, start, target);
        throw err;
      }
      const protocol = protocolOf(route ? routeProfile(auth.protocol_profile!) : auth.protocol_profile!);
      const inspector = protocol.inspectorFor(method, target.route);
      // Governed but free: the model list, a model's description, token counting (no quota, no workspace setting).
      const free = inspector ? undefined : protocol.freeEndpointFor(method, target.route);
      // A path of another API (an Anthropic path on an OpenAI connection, say) is never forwarded unmetered.
      const foreign = inspector || free ? undefined : foreignProtocolOf(protocol, method, target.route);
      call = meter.open(entry, auth, inspector, { ...start, routeModel: inspector ? protocol.routeModel?.(target.route) : undefined });
      // A WebSocket handshake (a Realtime session) is neither metered nor relayed as one: refused, whatever the
      // workspace allows, never forwarded as the plain GET node hands it over as.
      if (asksForWebSocket(req)) {
        throw new AppError(
          'websocket_not_supported',
          `${method} ${endpoint} asks for a WebSocket session; the gateway does not relay WebSocket connections`,
        );
      }
      if (foreign) {
        throw new AppError(
          'protocol_mismatch',
          `${method} ${endpoint} is a path of the ${foreign.title} API; this connection speaks '${protocol.profile}' (${protocol.title}), which meters ${protocol.meters}`,
        );
      }
      checkSlashesFor(target, protocol.profile);
      // What the protocol cannot meter (a Gemini stream that is not SSE, Bedrock's InvokeModel) is refused, never
      // forwarded unmetered, even where the workspace allows unmetered calls.
      if (!free) protocol.checkRequest?.(inspector?.endpoint, target.search, target.route);
      if (!inspector && !free && !auth.allow_unmetered_passthrough) {
        throw new AppError(
          'unmetered_endpoint',
          `${method} ${endpoint} is not metered on an '${auth.protocol_profile!}' connection; the workspace can allow unmetered calls with allowUnmeteredPassthrough`,
        );
      }
      // The workspace's hard spend budget is reached: no new metered call until its window ends (docs/pricing.md "Budgets").
      if (inspector && auth.budget_exceeded_until && auth.budget_exceeded_until > startedAt) {
        throw new AppError('workspace_budget_exceeded', "The workspace's spend budget is reached for its current window", {
          reset_at: auth.budget_exceeded_until.toISOString(),
        });
      }
      raw = await bodyRead;
      let rewriteJson: ((text: string) => string) | undefined;
      if (inspector) {
        assertIdentityEncoding(req);
        const admission = trace?.admission();
        try {
          await call.admit(raw);
        } catch (err) {
          if (admission) failed(admission, err);
          throw err;
        } finally {
          admission?.end();
        }
      } else if (free) {
        const allows = call.free(free, raw, startedAt);
        if (allows) rewriteJson = (text) => filterModelList(text, allows, protocol.modelList);
      } else {
        await call.passthrough(raw, startedAt);
      }
      const ctx: CallContext = { req, res, locals, call, target, rewriteJson, trace };
      if (route) await routeCalls.relayRoute(ctx, call.prepared?.body ?? raw, route, usable!);
      else await relay(ctx, call.prepared?.body ?? raw);
    } catch (err) {
      const row = call ? call.entry.row : looked;
      sendError(
        res,
        locals,
        err,
        call?.inspector !== undefined,
        call?.view ?? meter.quotaView(row, startedAt),
        call?.rateView ?? meter.rateView(row, startedAt),
        clock.now().getTime(),
        // Once the connection is known, its refusals come in its API's error shape; before, in the shape of the
        // API its path belongs to.
        row?.protocol_profile ? protocolOf(row.protocol_profile) : parsed && protocolOfPath(method, parsed.route),
      );
      if (call) {
        // Refused or failed after the access and connection were known: recorded (REJECTED: no upstream call).
        call.refused(err, raw);
      } else {
        const refusal = toAppError(err);
        parts.refusedEarly({
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
   * A call its key's access or connection refuses (authorizeCall), opened only to be recorded REJECTED: when
   * the key itself is valid (an unknown, revoked or expired key, or an archived workspace's, names no access an
   * operator looks after, and is only logged and counted). Opened without an inspector, as its answer says: it
   * was refused before its path was metered. A connection the workspace does not have is recorded under the id
   * the request named.
   */
  function openRefused(entry: CacheEntry, start: CallStart, target: GatewayTarget): MeteredCall | undefined {
    const row = entry.row;
    if (!row || row.revoked_at || row.expires_at <= start.startedAt || row.workspace_status !== 'ACTIVE') return undefined;
    const known = row.connection_id ? row : { ...row, connection_id: target.connectionId };
    return meter.open(entry, known, undefined, start);
  }

  /**
   * GET /v1/me (me.ts): the key's row read fresh, answered as the end user's view of its access. Under a
   * connection's gatewayBaseUrl the connection must be one of the key's workspace, as for a call there.
   */
  async function handleMe(req: IncomingMessage, res: ServerResponse, locals: RequestLocals, connectionId = NO_CONNECTION): Promise<void> {
    locals.operationId = 'getMe';
    try {
      if (req.method !== 'GET') throw new AppError('method_not_allowed', `${req.method} is not allowed on /v1/me`);
      const credential = credentialOf(req);
      req.resume();
      const looked = await cache.read(credential, connectionId);
      const now = clock.now();
      const me = meOf(looked, now, meter.rateView(looked, now));
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
      sendError(res, locals, err, false, undefined, undefined, clock.now().getTime());
    }
  }

  /**
   * The upstream call, its answer relayed to the client; the call is told how it ended. A connection with a
   * retry policy has its calls' attempts made by a route's loop (route-call.ts).
   */
  async function relay(ctx: CallContext, body: Buffer): Promise<void> {
    const { call } = ctx;
    const retry = call.auth.connection_retry;
    if (retry) return routeCalls.relayConnection(ctx, body, retry);
    await attempts.start(ctx, {
      entry: call.entry,
      providerPath: ctx.target.providerPath,
      body,
      timeoutMs: call.auth.upstream_timeout_ms ?? config.upstreamTimeoutMs,
    });
    attempts.answer(ctx, protocolOf(call.auth.protocol_profile!));
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
    drain: () => parts.drain(),
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
    recover: () => parts.recover(),
    recorderStats: () => parts.recorderStats(),
    /** Reads the routes and their breakers now, rather than at the next poll (tests, and a fresh start). */
    refreshRoutes: () => parts.routes.refresh(),
    /** How many key lookup queries it has made (tests). */
    keyLookups: () => cache.queries(),
    /** Forget cached lookups: keys and the responses recorded lately (tests). */
    clearCache: () => {
      cache.clear();
      meter.forgetResponses();
    },
    close: () => parts.close(),
  };
}

export type Gateway = ReturnType<typeof createGateway>;

/**
 * The gateway's hot path: `{METHOD} /providers/{connectionId}/{providerPath}`.
 * It only orchestrates a request through the modules that do each step:
 * method and path (path-safety.ts), credential and body (client-request.ts),
 * the key's lookup (auth-cache.ts) and authorization (admission.ts), the endpoint's
 * protocol (src/protocols/), then the call (metered-call.ts, opened on the process's
 * meter: call-meter.ts), which its flow (call-flow.ts) admits (admission.ts),
 * sends upstream (relay.ts) and answers. A refusal before the call is opened
 * is answered here (answers.ts). The process-wide parts it runs on are built
 * once, beside the domain, by createGatewayParts (gateway-parts.ts).
 *
 * Before the upstream call, at most two database round trips, usually none: the
 * key/access/connection/period lookup (cached) and the quota admission (in
 * memory while the process's lease of the period covers the call, else one
 * statement extending it). The request body is read while the lookup runs. The
 * answer is streamed back as it arrives, with backpressure; the call's records
 * are written after the last byte (src/records/call-recorder.ts). Requests reach it straight
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
import { authorizeCall } from './admission.js';
import type { CacheEntry } from './auth-cache.js';
import { CallFlow } from './call-flow.js';
import type { CallMeter } from './call-meter.js';
import { operationOf } from './call-report.js';
import { CallTrace } from './call-trace.js';
import type { AuthRow } from './auth-repo.js';
import type { RouteRow } from '../domain/routes/route-types.js';
import { credentialOf, readBody } from './client-request.js';
import { boundaryOf } from '../protocols/multipart.js';
import { readUpload, Upload, type Sendable } from './upload.js';
import type { GatewayParts } from './gateway-parts.js';
import { rawHeader } from './headers.js';
import { handleMe, ME_ROUTE } from './me.js';
import type { CallStart, MeteredCall } from './metered-call.js';
import { pathOf } from '../web/request-target.js';
import { parseGatewayUrl, type GatewayTarget } from './path-safety.js';
import { protocolOf, protocolOfPath } from '../protocols/index.js';
import { routeProfile, usableTargets } from './route-call.js';
import type { TakenPaths } from './taken-paths.js';

const PROXIED = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

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
  /** The Batch API's paths (src/batches/, above the gateway): answered there; none: a call as any other. */
  batches?: TakenPaths | undefined;
}

/** What the gateway's requests run on: its dependencies, and its calls' flow. */
interface Running extends GatewayDeps {
  flow: CallFlow;
}

/** A gateway request; `locals` carries its request id and arrival time (the request observer's). */
async function handle(g: Running, req: IncomingMessage, res: ServerResponse, locals: RequestLocals): Promise<void> {
  let parsed: GatewayTarget | undefined;
  try {
    parsed = parseGatewayUrl(req.url!);
  } catch {
    // Refused below, as a call.
  }
  const { clock, parts } = g;
  // GET {gatewayBaseUrl}/v1/me: the end user's view of its access, where its SDK is pointed (any profile). Not a
  // call; another method there is a gateway call as any other path is.
  if (parsed?.route === ME_ROUTE && req.method === 'GET') return handleMe(parts, clock, req, res, locals, parsed.connectionId);
  const startedAt = clock.now();
  const method = req.method!;
  locals.operationId = operationOf(method);
  const traceparent = rawHeader(req.rawHeaders, 'traceparent');
  const trace = g.tracer ? new CallTrace(g.tracer, locals.operationId, method, pathOf(req.url!), locals.requestId, traceparent) : undefined;
  /** The key's row, once looked up: a valid key's refusals carry its quota headers. */
  let looked: AuthRow | null = null;
  let body: Promise<Sendable> | undefined;
  try {
    if (!PROXIED.has(method)) throw new AppError('method_not_allowed', `${method} is not proxied`);
    // A target that did not parse is parsed again here, to be refused in its turn.
    const target = parsed ?? parseGatewayUrl(req.url!);
    const credential = credentialOf(req);
    const boundary = boundaryOf(rawHeader(req.rawHeaders, 'content-type'));
    const limit = g.config.gatewayBodyLimitBytes;
    // A Batch API request (src/batches/) reads its own body, once its access's rules are known.
    const batchLike = g.batches?.mayTake(target.route) ?? false;
    if (!batchLike) body = readRequest(req, limit, boundary);
    const { route, usable, entry } =
      lookUpCached(parts, credential, target.connectionId) ?? (await lookUpTarget(parts, credential, target.connectionId));
    looked = entry.row;
    const start: CallStart = {
      requestId: locals.requestId,
      method,
      endpoint: target.providerPath.replace(/\/$/, ''),
      // Traces on: the call's trace (its traceparent's, when it came with one).
      traceId: trace ? trace.traceId : traceIdOf(traceparent),
      startedAt,
      t0: locals.startedAt,
      trace,
      credential,
      routeModel: undefined,
      routeId: route?.id,
      routeLog: route?.request_log,
      boundConnections: usable && [...usable.keys()],
      uncappedTarget: usable && [...usable.values()].some((e) => e.row!.connection_enforces_output_cap === false),
    };
    let auth: AuthRow;
    try {
      auth = authorizeCall(entry.row, startedAt);
    } catch (err) {
      // A valid key's access or connection refuses the call (suspended, not active, archived): the operator
      // finds it among the access's invocations, REJECTED with its reason.
      const call = openRefused(parts.meter, entry, start, target);
      if (!call) throw err;
      return g.flow.refuse({ res, locals, call, target }, err);
    }
    const protocol = protocolOf(route ? routeProfile(auth.protocol_profile!) : auth.protocol_profile!);
    const batch = batchLike && !route ? g.batches?.take(protocol, method, target.route) : undefined;
    if (batch) {
      const other = await batch({ req, res, locals, entry, auth, protocol, target }, boundary);
      // Not metered here (a file whose purpose is not a batch's...): a call as any other path is (its passthrough class decides).
      if (!other) return;
      if (other.body) body = Promise.resolve(other.body);
    }
    body ??= readRequest(req, limit, boundary);
    const inspector = protocol.inspectorFor(method, target.route);
    if (inspector) start.routeModel = protocol.routeModel?.(target.route);
    const call = parts.meter.open(entry, auth, inspector, start);
    await g.flow.run({ req, res, locals, call, target, protocol, body, route, usable, rewriteJson: undefined, trace });
  } catch (err) {
    // Refused before a call was opened: answered, logged and counted, not recorded.
    sendError(res, {
      locals,
      err,
      metered: false,
      quota: parts.meter.quotaView(looked, startedAt),
      rate: parts.meter.rateView(looked, startedAt),
      now: clock.now().getTime(),
      // Once the connection is known, its refusals come in its API's error shape; before, in the shape of the
      // API its path belongs to.
      protocol: looked?.protocol_profile ? protocolOf(looked.protocol_profile) : parsed && protocolOfPath(method, parsed.route),
    });
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
  } finally {
    // An upload's spool file goes once its call has ended (or its body failed: readUpload deleted it then).
    body?.then((sent) => (sent instanceof Upload ? sent.dispose() : undefined)).catch(() => {});
  }
}

/**
 * A call its key's access or connection refuses (authorizeCall), opened only to be recorded REJECTED: when
 * the key itself is valid (an unknown, revoked or expired key, or an archived workspace's, names no access an
 * operator looks after, and is only logged and counted). Opened without an inspector, as its answer says: it
 * was refused before its path was metered. A connection the workspace does not have is recorded under the id
 * the request named.
 */
/** The request's body as it is read: a multipart upload on its way through (upload.ts), any other whole. */
function readRequest(req: IncomingMessage, limit: number, boundary: string | undefined): Promise<Sendable> {
  const body = boundary !== undefined ? readUpload(req, limit, boundary) : readBody(req, limit);
  // Its failure is the call's to answer when it awaits it; until then it is no unhandled rejection.
  body.catch(() => {});
  return body;
}

/** What lookUpTarget answers, when the id names no route this process knows and the key's row is cached fresh: no promise. */
function lookUpCached(parts: GatewayParts, credential: string, id: string): Awaited<ReturnType<typeof lookUpTarget>> | undefined {
  if (parts.routes.get(id)) return undefined;
  const entry = parts.cache.cached(credential, id);
  // A row of no connection may name a route this process has not heard of yet: lookUpTarget asks.
  return entry?.row?.connection_id ? { route: undefined, usable: undefined, entry } : undefined;
}

/**
 * What the call's id names, with its key's row: a connection, or a route (docs/routes.md), which is called as a
 * connection is, the key's row looked up for each of its targets.
 */
export async function lookUpTarget(
  parts: GatewayParts,
  credential: string,
  id: string,
): Promise<{ route: RouteRow | undefined; usable: Map<string, CacheEntry> | undefined; entry: CacheEntry }> {
  let route = parts.routes.get(id);
  if (!route) {
    const entry = await parts.cache.lookup(credential, id);
    // No connection of the key's workspace: perhaps a route this process has not heard of yet (made a moment ago,
    // here or by another process, its change still on its way), read from the database once.
    route = entry.row && !entry.row.connection_id ? await parts.routes.fetch(id) : undefined;
    if (!route) return { route, usable: undefined, entry };
  }
  const entries = await Promise.all(route.targets.map((t) => parts.cache.lookup(credential, t.providerConnectionId)));
  const usable = usableTargets(route, entries);
  return { route, usable, entry: usable.values().next().value ?? entries[0]! };
}

function openRefused(meter: CallMeter, entry: CacheEntry, start: CallStart, target: GatewayTarget): MeteredCall | undefined {
  const row = entry.row;
  if (!row || row.revoked_at || row.expires_at <= start.startedAt || row.workspace_status !== 'ACTIVE') return undefined;
  const known = row.connection_id ? row : { ...row, connection_id: target.connectionId };
  return meter.open(entry, known, undefined, start);
}

export function createGateway(deps: GatewayDeps) {
  const { config, clock, quota, rates, secretBox, parts } = deps;
  const { cache, pools, meter } = parts;
  const flow = new CallFlow({ config, clock, meter, secretBox, pools, registry: parts.routes, metrics: parts.attemptMetrics });
  const running: Running = { ...deps, flow };
  return {
    handle: (req: IncomingMessage, res: ServerResponse, locals: RequestLocals) => handle(running, req, res, locals),
    /**
     * A call refused once it is open (a Realtime session's handshake, src/realtime/): answered in its connection's
     * error shape and recorded REJECTED.
     */
    refuse: (ctx: Parameters<CallFlow['refuse']>[0], err: unknown) => flow.refuse(ctx, err),
    /** GET /v1/me (me.ts). */
    handleMe: (req: IncomingMessage, res: ServerResponse, locals: RequestLocals) => handleMe(parts, clock, req, res, locals),
    /**
     * A shutdown's deadline has come: the upstream calls still under way are cut (a metered JSON call
     * would otherwise be read to its end, up to the upstream timeout) and recorded FAILED `server_shutdown`,
     * charged by the rule of an answer that broke off (charge.ts). Their clients' connections are
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
    /** Opens the gateway pool's connections and compiles the call's path before the first call (warm-up.ts). */
    warmUp: () => parts.warmUp(),
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

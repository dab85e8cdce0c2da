/**
 * Realtime sessions' handshakes (docs/realtime.md): `GET /providers/{connectionId}/v1/realtime?model=...` on an
 * `openai` connection, and Azure's `openai/realtime?deployment=...` or `openai/v1/realtime?model=...` on an
 * `azure-openai` one, asked as a WebSocket upgrade. The caller's inference key comes as the SDKs send it:
 * `Authorization: Bearer` (`api-key` on Azure), or the `openai-insecure-api-key.<key>` subprotocol of browsers.
 *
 * The session is admitted as a call is (admission.ts): the key, the access and connection (authorizeCall), the
 * model's allow-list, the budget, a current quota period, the plan's rate limits (a request, and a concurrency slot
 * held while the session lives), and this process's bounds on open sessions per access and in all. Refused, the
 * handshake is answered with the refusal in OpenAI's error shape and recorded REJECTED, as a call's. Admitted, the
 * upstream socket is opened with the connection's key (its protocol's auth header; its host guarded as every
 * upstream's), then the client's handshake is accepted and the frames relayed (realtime-session.ts).
 *
 * Every other WebSocket handshake (another path, another profile, a route, a key that cannot be read) goes on as a
 * plain request, which the gateway refuses 501 `websocket_not_supported` (or for its key, access or connection).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';
import type { Config } from '../config.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import { guardedLookup, isRefusedHost } from '../domain/security/upstream-guard.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import { protocolOf } from '../protocols/index.js';
import type { RequestLocals } from '../web/locals.js';
import { plainResponse } from '../web/plain-response.js';
import { admitRate, assertBudget, assertModelAllowed, authorizeCall } from '../gateway/admission.js';
import { upstreamOf, type CacheEntry } from '../gateway/auth-cache.js';
import type { CallMeter } from '../gateway/call-meter.js';
import { credentialOf, upstreamSearch } from '../gateway/client-request.js';
import type { GatewayParts } from '../gateway/gateway-parts.js';
import type { Gateway } from '../gateway/gateway.js';
import { rawHeader } from '../gateway/headers.js';
import type { MeteredCall } from '../gateway/metered-call.js';
import { parseGatewayUrl, type GatewayTarget } from '../gateway/path-safety.js';
import { routeCandidates, routeProfile, usableTargets } from '../gateway/route-call.js';
import type { RouteRow } from '../domain/routes/route-types.js';
import { RealtimeSession } from './realtime-session.js';

/** The Realtime session paths of each profile that has them. */
const SESSION_ROUTES: Record<string, RegExp> = {
  openai: /^(?:v1\/)?realtime$/i,
  'azure-openai': /^openai\/(?:v1\/)?realtime$/i,
};
/** The subprotocol a browser sends its key in, and the one the Realtime API speaks. */
const KEY_PROTOCOL = 'openai-insecure-api-key.';
const REALTIME_PROTOCOL = 'realtime';

/** The inference key of a handshake: where any call may send it (credentialOf), else its key subprotocol (browsers). */
function keyOf(req: IncomingMessage): string | undefined {
  try {
    return credentialOf(req);
  } catch {
    const offered = rawHeader(req.rawHeaders, 'sec-websocket-protocol') ?? '';
    const named = offered.split(',').map((p) => p.trim());
    return named.find((p) => p.startsWith(KEY_PROTOCOL))?.slice(KEY_PROTOCOL.length) || undefined;
  }
}

/** Whether the session speaks the Realtime API's beta: `OpenAI-Beta: realtime=v1`, or Azure's preview path (`openai/realtime`). */
function isBeta(req: IncomingMessage, target: GatewayTarget): boolean {
  return /realtime=v1/i.test(rawHeader(req.rawHeaders, 'openai-beta') ?? '') || /^openai\/realtime$/i.test(target.route);
}

/** Where a session may be opened: a connection's key lookup, and the query it is opened with (a route's model mapped). */
interface Candidate {
  entry: CacheEntry;
  search: string;
}

/** The query of a route's target: its model map applied to the session's model (`model`, or Azure's `deployment`). */
function mappedSearch(search: string, model: string, modelMap: Record<string, string> | undefined): string {
  const mapped = modelMap?.[model];
  if (!mapped) return search;
  const params = new URLSearchParams(search);
  params.set(params.has('deployment') && !params.has('model') ? 'deployment' : 'model', mapped);
  return `?${params.toString()}`;
}

/** The model a session names: `?model=` (Azure's classic path: `?deployment=`). */
function modelOf(target: GatewayTarget): string {
  const params = new URLSearchParams(target.search);
  return params.get('model') ?? params.get('deployment') ?? '';
}

/**
 * The session's refusals that are not authorizeCall's: its model, budget, period, the sessions open (`open`: on this
 * process, and of its access) against `limits`, and the rate limits.
 */
async function admitSession(
  meter: CallMeter,
  call: MeteredCall,
  model: string,
  open: { all: number; ofAccess: number },
  limits: Config['realtime'],
): Promise<void> {
  const auth = call.auth;
  const now = call.start.startedAt;
  call.admitted.requestedModel = model;
  call.admitted.streamed = true;
  assertModelAllowed(meter.modelPolicy(auth), model);
  assertBudget(auth, now);
  if (!auth.period_id) throw new AppError('quota_insufficient', 'The access has no current quota period');
  call.admitted.view = meter.quotaView(auth, now);
  if (open.all >= limits.sessionsPerProcess) {
    throw new AppError(
      'rate_limited',
      `This Nexus process holds its most Realtime sessions (${limits.sessionsPerProcess}); retry shortly`,
      {
        param: 'realtimeSessions',
        retry_after: 1,
      },
    );
  }
  if (open.ofAccess >= limits.sessionsPerAccess) {
    throw new AppError(
      'rate_limited',
      `The access holds its most Realtime sessions on this Nexus process (${limits.sessionsPerAccess}); close one first`,
      { param: 'realtimeSessions' },
    );
  }
  await admitRate(meter, call, 0n);
}

/** How a session's upstream socket is opened: the connection's key, the host guard, the frame bound, the timeout. */
interface UpstreamOptions {
  secretBox: SecretBox;
  allowPrivate: boolean;
  lookup: ReturnType<typeof guardedLookup>;
  maxFrameBytes: number;
  timeoutMs: number;
}

/** The upstream's socket, open (and paused); rejects with 502 upstream_unavailable when it cannot be opened. */
function openUpstream(entry: CacheEntry, req: IncomingMessage, target: GatewayTarget, o: UpstreamOptions): Promise<WebSocket> {
  const row = entry.row!;
  const upstream = upstreamOf(entry, row, o.secretBox);
  const base = upstream.baseUrl;
  if (isRefusedHost(base.hostname.replace(/^\[|\]$/g, ''), o.allowPrivate)) {
    return Promise.reject(new AppError('upstream_unavailable', 'The provider address is private and private upstreams are not allowed'));
  }
  const url = new URL(`${base.pathname.replace(/\/$/, '')}/${target.providerPath}${upstreamSearch(target.search)}`, base);
  url.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
  const auth: string[] = [];
  protocolOf(row.protocol_profile!).authHeaders(auth, upstream.apiKey);
  const headers: Record<string, string> = {};
  for (let i = 0; i < auth.length; i += 2) headers[auth[i]!] = auth[i + 1]!;
  const beta = rawHeader(req.rawHeaders, 'openai-beta');
  if (beta) headers['openai-beta'] = beta;
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, [REALTIME_PROTOCOL], {
      headers,
      lookup: o.lookup,
      maxPayload: o.maxFrameBytes,
      perMessageDeflate: false,
      handshakeTimeout: row.upstream_timeout_ms ?? o.timeoutMs,
    });
    const fail = (why: string) => {
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.terminate();
      reject(new AppError('upstream_unavailable', `The provider did not open the Realtime session: ${why}`));
    };
    socket.once('open', () => {
      socket.removeAllListeners();
      // Its first events (session.created) wait until the session listens for them.
      socket.pause();
      resolve(socket);
    });
    socket.once('unexpected-response', (_req, res) => fail(`it answered ${res.statusCode}`));
    socket.once('error', (err) => fail(err.message));
  });
}

export interface RealtimeDeps {
  parts: GatewayParts;
  /** A session refused once its call is open: answered in its connection's error shape and recorded (the gateway's). */
  refuse: Gateway['refuse'];
  config: Config;
  secretBox: SecretBox;
}

export function createRealtime(deps: RealtimeDeps) {
  const { parts, refuse, config, secretBox } = deps;
  const { meter } = parts;
  const limits = config.realtime;
  const sessions = new Set<RealtimeSession>();
  const perAccess = new Map<string, number>();
  const lookup = guardedLookup(config.allowPrivateUpstreams);
  const upstreamOptions: UpstreamOptions = {
    secretBox,
    allowPrivate: config.allowPrivateUpstreams,
    lookup,
    maxFrameBytes: limits.maxFrameBytes,
    timeoutMs: config.upstreamTimeoutMs,
  };
  const server = new WebSocketServer({
    noServer: true,
    maxPayload: limits.maxFrameBytes,
    perMessageDeflate: false,
    clientTracking: false,
    // The Realtime API's own subprotocol is chosen when offered; the key's is never echoed back.
    handleProtocols: (offered) => (offered.has(REALTIME_PROTOCOL) ? REALTIME_PROTOCOL : false),
  });
  /** The request id each accepted handshake answers with (its session's id). */
  const sessionIds = new WeakMap<IncomingMessage, string>();
  server.on('headers', (headers, req) => {
    const id = sessionIds.get(req);
    if (id) headers.push(`x-nexus-request-id: ${id}`);
  });

  function openedSession(session: RealtimeSession): void {
    sessions.add(session);
    perAccess.set(session.accessId, (perAccess.get(session.accessId) ?? 0) + 1);
  }

  function closed(session: RealtimeSession): void {
    if (!sessions.delete(session)) return;
    const left = (perAccess.get(session.accessId) ?? 1) - 1;
    if (left > 0) perAccess.set(session.accessId, left);
    else perAccess.delete(session.accessId);
  }

  /**
   * A WebSocket handshake on a gateway path: a Realtime session's is admitted and relayed, or refused; any other
   * goes on as a plain request (`asPlain`).
   */
  /** The upstream socket of the first candidate that opens one; a route's breakers are told how each went. */
  async function openFirst(req: IncomingMessage, target: GatewayTarget, candidates: Candidate[], route: RouteRow | undefined) {
    let failure: unknown = new AppError('upstream_unavailable', 'No target of the route holds Realtime sessions at this path');
    for (const c of candidates) {
      const cid = c.entry.row!.connection_id!;
      if (!SESSION_ROUTES[c.entry.row!.protocol_profile!]?.test(target.route)) continue;
      try {
        const upstream = await openUpstream(c.entry, req, { ...target, search: c.search }, upstreamOptions);
        if (route) parts.routes.succeeded(route, cid);
        return { upstream, entry: c.entry };
      } catch (err) {
        if (route) parts.routes.failed(route, cid, 'upstream_unavailable');
        failure = err;
      }
    }
    throw failure;
  }

  /**
   * A WebSocket handshake on a gateway path: a Realtime session's is admitted and relayed, or refused; any other
   * goes on as a plain request (`asPlain`). A route's session is admitted once, then opened on its first target
   * (by the route's order, open breakers skipped, its model mapped) whose upstream accepts it.
   */
  async function handle(req: IncomingMessage, socket: Duplex, head: Buffer, asPlain: () => void): Promise<void> {
    let target: GatewayTarget;
    try {
      target = parseGatewayUrl(req.url!);
    } catch {
      return asPlain();
    }
    const key = keyOf(req);
    const looksLikeSession = Object.values(SESSION_ROUTES).some((r) => r.test(target.route));
    if (req.method !== 'GET' || !key || !looksLikeSession) return asPlain();
    socket.on('error', () => {});
    const route = parts.routes.get(target.connectionId);
    let entries: CacheEntry[];
    try {
      entries = await Promise.all(
        (route ? route.targets.map((t) => t.providerConnectionId) : [target.connectionId]).map((id) => parts.cache.lookup(key, id)),
      );
    } catch {
      // The database is away: the plain request's answer says so.
      return asPlain();
    }
    const usable = route && usableTargets(route, entries);
    const first = usable?.values().next().value ?? entries[0]!;
    const now = meter.clock.now();
    let auth;
    try {
      auth = authorizeCall(first.row, now);
    } catch {
      return asPlain();
    }
    if (!SESSION_ROUTES[route ? routeProfile(auth.protocol_profile!) : auth.protocol_profile!]?.test(target.route)) return asPlain();
    const locals: RequestLocals = { requestId: newId(), startedAt: process.hrtime.bigint(), operationId: 'proxyProviderGet' };
    const call = meter.open(first, auth, undefined, {
      requestId: locals.requestId,
      method: 'GET',
      endpoint: target.providerPath.replace(/\/$/, ''),
      traceId: null,
      startedAt: now,
      t0: locals.startedAt,
      trace: undefined,
      credential: key,
      routeId: route?.id,
      session: true,
    });
    let opened: { upstream: WebSocket; entry: CacheEntry } | undefined;
    try {
      const open = { all: sessions.size, ofAccess: perAccess.get(auth.workspace_access_id) ?? 0 };
      const model = modelOf(target);
      await admitSession(meter, call, model, open, limits);
      const candidates: Candidate[] =
        route && usable
          ? routeCandidates(parts.routes, route, usable, now, Math.random).map((t) => ({
              entry: usable.get(t.providerConnectionId)!,
              search: mappedSearch(target.search, model, t.modelMap),
            }))
          : [{ entry: first, search: target.search }];
      opened = await openFirst(req, target, candidates, route);
      // A route's target holds the session: its turns are authorized and recorded on that connection.
      if (route) auth = authorizeCall(opened.entry.row, now);
    } catch (err) {
      opened?.upstream.close(1000);
      if (call.admitted.rateTicket) meter.rates.settle(call.admitted.rateTicket, 0);
      refuse({ res: plainResponse(req, socket), locals, call, target }, err);
      return;
    }
    const { upstream, entry } = opened;
    const ticket = call.admitted.rateTicket;
    if (socket.destroyed) {
      // The client left while its session was admitted.
      upstream.close(1000);
      if (ticket) meter.rates.settle(ticket, 0);
      return;
    }
    const connectionId = entry.row!.connection_id!;
    sessionIds.set(req, locals.requestId);
    server.handleUpgrade(req, socket, head, (client) => {
      const session = new RealtimeSession(client, upstream, {
        ctx: {
          meter,
          auth,
          sessionId: locals.requestId,
          startedAt: call.start.startedAt,
          t0: locals.startedAt,
          traceId: null,
          endpoint: call.start.endpoint,
          model: call.admitted.requestedModel,
          routeId: route?.id,
        },
        logger: meter.logger,
        lookup: () => parts.cache.lookup(key, connectionId),
        reload: () => meter.reload(key, connectionId),
        idleTimeoutMs: limits.idleTimeoutMs,
        beta: isBeta(req, target),
        rateTicket: ticket,
        ended: (s) => {
          closed(s);
          // Its turns' tokens were spent as each ended.
          if (ticket) meter.rates.settle(ticket, 0);
        },
      });
      openedSession(session);
    });
  }

  return {
    handle,
    /** Open sessions on this process. */
    get size(): number {
      return sessions.size;
    },
    /** A shutdown's deadline: every session is closed (1001), its turns in flight charged for what was delivered. */
    shutDown(): void {
      for (const session of [...sessions]) session.shutDown();
    },
  };
}

export type Realtime = ReturnType<typeof createRealtime>;

/**
 * What a Realtime session's handshake is read and opened by (realtime-gateway.ts): its key, model and protocol
 * version, its admission beyond authorizeCall's, and the upstream socket, on the connection or on the first of a
 * route's targets that accepts it.
 */
import type { IncomingMessage } from 'node:http';
import WebSocket, { WebSocketServer } from 'ws';
import type { Config } from '../config.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import { isRefusedHost, type guardedLookup } from '../domain/security/upstream-guard.js';
import type { RouteRow } from '../domain/routes/route-types.js';
import { AppError } from '../errors.js';
import { protocolOf } from '../protocols/index.js';
import { admitRate, assertBudget, assertModelAllowed } from '../gateway/admission.js';
import { upstreamOf, type CacheEntry } from '../gateway/auth-cache.js';
import type { CallMeter } from '../gateway/call-meter.js';
import { credentialOf, upstreamSearch } from '../gateway/client-request.js';
import { rawHeader } from '../gateway/headers.js';
import type { MeteredCall } from '../gateway/metered-call.js';
import type { GatewayTarget } from '../gateway/path-safety.js';
import { routeCandidates } from '../gateway/route-call.js';
import type { RouteRegistry } from '../gateway/route-registry.js';

/** The Realtime session paths of each profile that has them (Gemini's: the Live API's, not its ephemeral tokens' Constrained one). */
export const SESSION_ROUTES: Record<string, RegExp> = {
  openai: /^(?:v1\/)?realtime$/i,
  'azure-openai': /^openai\/(?:v1\/)?realtime$/i,
  gemini: /^ws\/google\.ai\.generativelanguage\.v1(?:alpha|beta)?\.GenerativeService\.BidiGenerateContent$/i,
};
/** The subprotocol a browser sends its key in, and the one the Realtime API speaks. */
const KEY_PROTOCOL = 'openai-insecure-api-key.';
const REALTIME_PROTOCOL = 'realtime';

/** The inference key of a handshake: where any call may send it (credentialOf), else its key subprotocol (browsers). */
export function keyOf(req: IncomingMessage): string | undefined {
  try {
    return credentialOf(req);
  } catch {
    const offered = rawHeader(req.rawHeaders, 'sec-websocket-protocol') ?? '';
    const named = offered.split(',').map((p) => p.trim());
    return named.find((p) => p.startsWith(KEY_PROTOCOL))?.slice(KEY_PROTOCOL.length) || undefined;
  }
}

/** Whether the session speaks the Realtime API's beta: `OpenAI-Beta: realtime=v1`, or Azure's preview path (`openai/realtime`). */
export function isBeta(req: IncomingMessage, target: GatewayTarget): boolean {
  return /realtime=v1/i.test(rawHeader(req.rawHeaders, 'openai-beta') ?? '') || /^openai\/realtime$/i.test(target.route);
}

/**
 * Where a session may be opened: a connection's key lookup, the query it is opened with (a route's model mapped), and
 * the route target's model map (Gemini's model, named in the session's first frame, is mapped there).
 */
export interface Candidate {
  entry: CacheEntry;
  search: string;
  modelMap?: Record<string, string> | undefined;
}

/** The query of a route's target: its model map applied to the session's model (`model`, or Azure's `deployment`). */
function mappedSearch(search: string, model: string, modelMap: Record<string, string> | undefined): string {
  const mapped = modelMap?.[model];
  if (!mapped) return search;
  const params = new URLSearchParams(search);
  params.set(params.has('deployment') && !params.has('model') ? 'deployment' : 'model', mapped);
  return `?${params.toString()}`;
}

/**
 * The model a session names: `?model=` (Azure's classic path: `?deployment=`); undefined for Gemini's Live API, whose
 * model comes in the session's first frame (`setup.model`).
 */
export function modelOf(target: GatewayTarget): string | undefined {
  if (SESSION_ROUTES.gemini!.test(target.route)) return undefined;
  const params = new URLSearchParams(target.search);
  return params.get('model') ?? params.get('deployment') ?? '';
}

/**
 * The session's refusals that are not authorizeCall's: its model (undefined: named later, and allowed then), budget,
 * period, the sessions open (`open`: on this process, and of its access) against `limits`, and the rate limits.
 */
export async function admitSession(
  meter: CallMeter,
  call: MeteredCall,
  model: string | undefined,
  open: { all: number; ofAccess: number },
  limits: Config['realtime'],
): Promise<void> {
  const auth = call.auth;
  const now = call.start.startedAt;
  call.admitted.requestedModel = model ?? '';
  call.admitted.streamed = true;
  if (model !== undefined) assertModelAllowed(meter.modelPolicy(auth), model);
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
export interface UpstreamOptions {
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
  const gemini = row.protocol_profile === 'gemini';
  const beta = rawHeader(req.rawHeaders, 'openai-beta');
  if (beta && !gemini) headers['openai-beta'] = beta;
  return new Promise((resolve, reject) => {
    // OpenAI's Realtime API is asked for in its subprotocol; Gemini's Live API names none.
    const socket = new WebSocket(url, gemini ? [] : [REALTIME_PROTOCOL], {
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

/** The upstream socket of the first candidate that opens one; a route's breakers are told how each went. */
export async function openFirst(
  routes: RouteRegistry,
  options: UpstreamOptions,
  req: IncomingMessage,
  target: GatewayTarget,
  candidates: Candidate[],
  route: RouteRow | undefined,
) {
  let failure: unknown = new AppError('upstream_unavailable', 'No target of the route holds Realtime sessions at this path');
  for (const c of candidates) {
    const cid = c.entry.row!.connection_id!;
    if (!SESSION_ROUTES[c.entry.row!.protocol_profile!]?.test(target.route)) continue;
    try {
      const upstream = await openUpstream(c.entry, req, { ...target, search: c.search }, options);
      if (route) routes.succeeded(route, cid);
      return { upstream, entry: c.entry, modelMap: c.modelMap };
    } catch (err) {
      if (route) routes.failed(route, cid, 'upstream_unavailable');
      failure = err;
    }
  }
  throw failure;
}

/** The server that accepts sessions' handshakes, each answered with its session's request id (`sessionIds`). */
export function sessionServer(maxFrameBytes: number, sessionIds: WeakMap<IncomingMessage, string>): WebSocketServer {
  const server = new WebSocketServer({
    noServer: true,
    maxPayload: maxFrameBytes,
    perMessageDeflate: false,
    clientTracking: false,
    // The Realtime API's own subprotocol is chosen when offered; the key's is never echoed back.
    handleProtocols: (offered) => (offered.has(REALTIME_PROTOCOL) ? REALTIME_PROTOCOL : false),
  });
  server.on('headers', (headers, req) => {
    const id = sessionIds.get(req);
    if (id) headers.push(`x-nexus-request-id: ${id}`);
  });
  return server;
}

/** A route's targets a session may be opened on, in the route's order (open breakers skipped), each its model mapped. */
export function routeTargets(
  routes: RouteRegistry,
  route: RouteRow,
  usable: Map<string, CacheEntry>,
  target: GatewayTarget,
  model: string | undefined,
  now: Date,
): Candidate[] {
  return routeCandidates(routes, route, usable, now, Math.random).map((t) => ({
    entry: usable.get(t.providerConnectionId)!,
    search: model === undefined ? target.search : mappedSearch(target.search, model, t.modelMap),
    modelMap: t.modelMap ?? undefined,
  }));
}

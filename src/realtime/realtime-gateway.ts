/**
 * Realtime sessions' handshakes (docs/realtime.md): `GET /providers/{connectionId}/v1/realtime?model=...` on an
 * `openai` connection, Azure's `openai/realtime?deployment=...` or `openai/v1/realtime?model=...` on an
 * `azure-openai` one, and Gemini's Live API `ws/google.ai.generativelanguage.v1beta.GenerativeService.
 * BidiGenerateContent` on a `gemini` one (its model named later, in its `setup`), asked as a WebSocket upgrade. The
 * caller's inference key comes as the SDKs send it: `Authorization: Bearer` (`api-key` on Azure; `?key=` or
 * `x-goog-api-key` on Gemini), or the `openai-insecure-api-key.<key>` subprotocol of browsers.
 *
 * The session is admitted as a call is (admission.ts): the key, the access and connection (authorizeCall), the
 * model's allow-list, the budget, a current quota period, the plan's rate limits (a request, and a concurrency slot
 * held while the session lives), and this process's bounds on open sessions per access and in all. Refused, the
 * handshake is answered with the refusal in OpenAI's error shape and recorded REJECTED, as a call's. Admitted, the
 * upstream socket is opened with the connection's key (its protocol's auth header; its host guarded as every
 * upstream's), then the client's handshake is accepted and the frames relayed (realtime-session.ts: OpenAI's
 * events read by realtime-openai.ts, Gemini's messages by gemini-session.ts).
 *
 * A route's session is admitted once, then opened on the first of its targets that accepts it (realtime-handshake.ts).
 * Every other WebSocket handshake (another path, another profile, a key that cannot be read) goes on as a plain
 * request, which the gateway refuses 501 `websocket_not_supported` (or for its key, access or connection).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Config } from '../config.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import { guardedLookup } from '../domain/security/upstream-guard.js';
import { newId } from '../ids.js';
import type { RequestLocals } from '../web/locals.js';
import { plainResponse } from '../web/plain-response.js';
import { authorizeCall } from '../gateway/admission.js';
import type { GatewayParts } from '../gateway/gateway-parts.js';
import { lookUpTarget, type Gateway } from '../gateway/gateway.js';
import { parseGatewayUrl, type GatewayTarget } from '../gateway/path-safety.js';
import { routeProfile } from '../gateway/route-call.js';
import {
  admitSession,
  isBeta,
  keyOf,
  modelOf,
  openFirst,
  routeTargets,
  sessionServer,
  SESSION_ROUTES,
  type UpstreamOptions,
} from './realtime-handshake.js';
import { GeminiSession } from './gemini-session.js';
import { OpenAiSession } from './realtime-openai.js';
import type { RealtimeSession, SessionDeps } from './realtime-session.js';

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
  /** The request id each accepted handshake answers with (its session's id). */
  const sessionIds = new WeakMap<IncomingMessage, string>();
  const server = sessionServer(limits.maxFrameBytes, sessionIds);

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
    // The connection or route the path names, as a call's is found (a route just made or changed included).
    let found: Awaited<ReturnType<typeof lookUpTarget>>;
    try {
      found = await lookUpTarget(parts, key, target.connectionId);
    } catch {
      // The database is away: the plain request's answer says so.
      return asPlain();
    }
    const { route, usable, entry: first } = found;
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
    let opened: Awaited<ReturnType<typeof openFirst>> | undefined;
    try {
      const open = { all: sessions.size, ofAccess: perAccess.get(auth.workspace_access_id) ?? 0 };
      // Gemini's model comes in the session's first frame (its `setup`): it is allowed, mapped and priced there.
      const model = modelOf(target);
      await admitSession(meter, call, model, open, limits);
      const candidates =
        route && usable ? routeTargets(parts.routes, route, usable, target, model, now) : [{ entry: first, search: target.search }];
      opened = await openFirst(parts.routes, upstreamOptions, req, target, candidates, route);
      // A route's target holds the session: its turns are authorized and recorded on that connection.
      if (route) auth = authorizeCall(opened.entry.row, now);
    } catch (err) {
      opened?.upstream.close(1000);
      if (call.admitted.rateTicket) meter.rates.settle(call.admitted.rateTicket, 0);
      refuse({ res: plainResponse(req, socket), locals, call, target }, err);
      return;
    }
    const { upstream, entry, modelMap } = opened;
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
      const sessionDeps: SessionDeps = {
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
        modelMap,
        ended: (s) => {
          closed(s);
          // Its turns' tokens were spent as each ended.
          if (ticket) meter.rates.settle(ticket, 0);
        },
      };
      const Session = auth.protocol_profile === 'gemini' ? GeminiSession : OpenAiSession;
      openedSession(new Session(client, upstream, sessionDeps).start());
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

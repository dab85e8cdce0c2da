/**
 * The server's request listener: the gateway's paths (`/providers/...`, and `GET /v1/me`) go straight to the
 * gateway, everything else through express. Until the app has started (it waits for its database and applies its
 * migrations), only what needs no database is served: gateway calls are refused 503 `database_unavailable` in
 * their API's error shape, and express's gate refuses the rest the same way (/readyz: `not_ready`).
 */
import type { Express, Request, Response } from 'express';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { AppError } from './errors.js';
import { sendError as sendGatewayError } from './gateway/answers.js';
import { operationOf } from './gateway/call-report.js';
import type { Gateway } from './gateway/gateway.js';
import { parseGatewayUrl } from './gateway/path-safety.js';
import type { Realtime } from './realtime/realtime-gateway.js';
import { protocolOfPath } from './protocols/index.js';
import type { requestObserver } from './http/middleware.js';
import type { RequestLocals } from './web/locals.js';
import { plainResponse } from './web/plain-response.js';
import { pathOf } from './web/request-target.js';

/**
 * `/providers/...` (the gateway), matched on the raw request target; an absolute-form target
 * (`http://host/providers/...`) goes there too, to be refused as the gateway refuses it.
 */
function isGatewayPath(url: string): boolean {
  const path = url[0] === '/' ? url : url.replace(/^[a-z][a-z\d+.-]*:\/\/[^/?#]*/i, '');
  return path.startsWith('/providers') && (path.length === 10 || path[10] === '/' || path[10] === '?');
}

/** GET /v1/me, the end user's self-service read, answered by the gateway with its key lookup. */
function isMePath(url: string): boolean {
  return url === '/v1/me' || url.startsWith('/v1/me?');
}

/**
 * What is served while the app starts (it waits for its database): what needs none. Liveness, the metrics, the
 * contract, the API reference and the console's files; /readyz answers 503 meanwhile, the rest 503
 * `database_unavailable`.
 */
function servedWhileStarting(path: string): boolean {
  return (
    path === '/healthz' ||
    path === '/metrics' ||
    path === '/openapi.json' ||
    path === '/' ||
    path === '/docs' ||
    path.startsWith('/docs/') ||
    path === '/console' ||
    path.startsWith('/console/')
  );
}

const STARTING = () =>
  new AppError(
    'database_unavailable',
    'Nexus is starting: its database is not reachable yet, or its migrations are being applied; retry shortly',
  );

/**
 * A gateway call before the gateway is built (the app waits for its database): refused as the gateway refuses a
 * call before its connection is known, in the error shape of the API its path belongs to.
 */
function refuseCall(req: IncomingMessage, res: ServerResponse, locals: RequestLocals): void {
  let route: string | undefined;
  try {
    route = parseGatewayUrl(req.url!).route;
  } catch {
    // Not a call's path (/v1/me, or one the gateway would refuse): the shared Error body.
  }
  const protocol = route === undefined ? undefined : protocolOfPath(req.method!, route);
  sendGatewayError(res, { locals, err: STARTING(), metered: false, now: Date.now(), protocol });
}

export function createFrontDoor(deps: { app: Express; observer: Pick<ReturnType<typeof requestObserver>, 'observe'> }) {
  const { app, observer } = deps;
  /** Set once the app has started: until then only what needs no database is served. */
  let gateway: Gateway | undefined;
  let realtime: Realtime | undefined;
  function handler(req: IncomingMessage, res: ServerResponse): void {
    const me = isMePath(req.url!);
    if (!me && !isGatewayPath(req.url!)) {
      app(req, res);
      return;
    }
    const locals = {} as RequestLocals;
    if (!gateway) {
      // Before the gateway writes its own lines, the request observer writes this refusal's.
      observer.observe(req, res, locals, () => ({ operationId: me ? 'getMe' : operationOf(req.method!), path: pathOf(req.url!) }));
      refuseCall(req, res, locals);
      return;
    }
    // Counted here; the gateway writes the call's log line and spans itself.
    observer.observe(req, res, locals, () => ({ operationId: undefined, path: pathOf(req.url!) }), true);
    void (me ? gateway.handleMe(req, res, locals) : gateway.handle(req, res, locals));
  }
  return {
    // The gateway's paths never enter express: it reads its own raw body, and express's routing and
    // response helpers would cost a gateway call about a sixth of its CPU.
    handler,
    /**
     * The server's 'upgrade' listener (a WebSocket handshake): a Realtime session's on a gateway path goes to
     * src/realtime/; every other handshake is answered as the plain request it would otherwise be.
     */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      const asPlain = () => handler(req, plainResponse(req, socket));
      if (!realtime || !isGatewayPath(req.url!) || isMePath(req.url!)) return asPlain();
      void realtime.handle(req, socket, head, asPlain);
    },
    /** Express's gate: until the app has started, what needs the database is refused. */
    gate(req: Request, _res: Response, next: (err?: unknown) => void): void {
      if (gateway) return next();
      const path = pathOf(req.originalUrl);
      if (path === '/readyz')
        return next(new AppError('not_ready', 'Nexus is starting: it waits for its database and applies its migrations'));
      next(servedWhileStarting(path) ? undefined : STARTING());
    },
    /** The app has started: everything is served, the gateway's paths by `started`, its handshakes by `sessions`. */
    open(started: Gateway, sessions: Realtime): void {
      gateway = started;
      realtime = sessions;
    },
    isOpen: () => gateway !== undefined,
  };
}

/**
 * buildApp wires everything: database, services, the contract's router, the
 * gateway and the webhook receiver. Tests call it with overrides for the clock
 * and the outside world. src/server.ts, with the environment's Config, calls its
 * two halves apart: createApp (what needs no database), then start (the database
 * reached, waiting for it if need be; migrations, gateway, background work), so
 * that it can listen while the start waits.
 */
import express, { type Express, type Request, type Response } from 'express';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Document } from 'openapi-backend';
import type { Config } from './config.js';
import { startChangeListener, type ChangeListener } from './db/change-listener.js';
import { createDatabase, isEmbedded, type Db } from './db/database.js';
import { migrateLatest } from './db/migrate.js';
import { migrateWhenReachable } from './db/wait-for-database.js';
import { AppError } from './errors.js';
import { systemClock, type Clock } from './domain/actor.js';
import { createDomain, type Domain, type Services } from './domain/services.js';
import { createHandlers } from './handlers/index.js';
import { billingWebhookReceiver } from './handlers/billing/billing.js';
import { createGateway, type Gateway } from './gateway/gateway.js';
import { createGatewayParts } from './gateway/gateway-parts.js';
import { sendError as sendGatewayError } from './gateway/answers.js';
import { operationOf } from './gateway/call-report.js';
import { parseGatewayUrl } from './gateway/path-safety.js';
import { protocolOfPath } from './protocols/index.js';
import type { BreakerTransition } from './gateway/route-registry.js';
import { pathOf } from './web/request-target.js';
import { createApi } from './http/api.js';
import { createPublicUrl, type PublicUrl } from './http/public-url.js';
import { precompressed } from './http/precompressed.js';
import type { RequestLocals } from './web/locals.js';
import {
  adminAnswerHeaders,
  clientErrorHandler,
  errorRenderer,
  JSON_TYPES,
  jsonBodiesOnly,
  requestObserver,
  utf8Only,
} from './http/middleware.js';
import { buildInfo } from './observability/build-info.js';
import { createLogger, type Logger } from './observability/logger.js';
import { createEventLoopMonitor } from './observability/event-loop.js';
import { createMetrics, registerEventLoopMetrics } from './observability/metrics.js';
import { startTracing, type Tracer } from './observability/tracing.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export function loadContract(): Document {
  return JSON.parse(readFileSync(join(root, 'generated', 'openapi.json'), 'utf8')) as Document;
}

export interface Overrides {
  db?: Db;
  clock?: Clock;
  logger?: Logger;
  fetch?: typeof fetch;
  /** Skip running migrations (the caller did). */
  skipMigrations?: boolean;
  /**
   * The services, built by the caller over the same db, config, clock, logger and fetch
   * (the test harness, which keeps the domain's test hooks for itself).
   */
  domain?: Domain;
  /** Traces go to this tracer (tests: an in-memory exporter's) instead of the configured one. */
  tracer?: Tracer;
}

export interface NexusApp {
  /** The server's request listener: the gateway's paths, then everything else through `app`. */
  handler: (req: IncomingMessage, res: ServerResponse) => void;
  /** The Admin API, /docs, /metrics, health and the billing receiver. */
  app: Express;
  db: Db;
  services: Services;
  logger: Logger;
  inflight: { count: number };
  /** Where clients reach this Nexus; listen() tells it the address it listens at. */
  publicUrl: PublicUrl;
  /**
   * The gateway (tests: drain() waits for settlements, sweepExpired() runs the sweeper once), built by start():
   * reading it before throws.
   */
  readonly gateway: Gateway;
  /** How long a request may take to arrive whole, headers and body (NEXUS_BODY_TIMEOUT_MS): listen() sets it. */
  bodyTimeoutMs: number;
  /**
   * Reaches the database (with `wait`, tried again while it is unavailable), applies the migrations, builds the
   * gateway and begins the background work. Until it has, the handler serves only what needs no database
   * (servedWhileStarting) and refuses the rest 503. buildApp's app has started.
   */
  start(wait?: StartWait): Promise<void>;
  /** Whether start() has finished: the app serves everything. */
  started(): boolean;
  /** Closes the database (and whatever else the app owns), not the HTTP server. */
  close(): Promise<void>;
}

/** How a start waits for a PostgreSQL it cannot reach (src/db/wait-for-database.ts); the embedded database is never waited for. */
interface StartWait {
  /** How long (NEXUS_DATABASE_STARTUP_TIMEOUT_MS): past it, start() throws DatabaseWaitTimeout. */
  timeoutMs: number;
  /** Called once, when the database is first found unavailable (src/server.ts listens then). */
  onWaiting?: () => void;
}

/** The contract as served: its one server is the one the reader should call (PublicUrl.forRequest). */
function contractFor(definition: Document, server: string): Document {
  return { ...definition, servers: [{ url: server, description: 'This Nexus' }] };
}

const htmlAttribute = (value: string) => value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

/**
 * The API reference page; its "Test request" goes to `server`. Its own assets load by relative URL (`up`: the
 * way from the page's path to the root, '../' for /docs/), so they come from wherever the page came from, a
 * proxy's path prefix included, and never from a host the request named.
 */
function docsPage(server: string, up: string): string {
  // Scalar's default fonts come from its own host; the page uses the system's instead (its policy loads nothing else).
  const configuration = JSON.stringify({ servers: [{ url: server, description: 'This Nexus' }], withDefaultFonts: false });
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Nexus API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body>
<script id="api-reference" data-url="${htmlAttribute(`${up}openapi.json`)}" data-configuration="${htmlAttribute(configuration)}"></script>
<script src="${htmlAttribute(`${up}docs/standalone.js`)}"></script>
</body>
</html>`;
}

/**
 * The API reference page's Content-Security-Policy: its own script, the styles the renderer writes into the page
 * (it sets them inline), images of the contract's descriptions, and requests to this Nexus only: the contract, and
 * a "Test request" to `server` (the origin the page names: NEXUS_PUBLIC_URL's when it is set). Nothing inline
 * runs, nothing frames the page.
 */
function docsPolicy(server: string): string {
  const origin = URL.canParse(server) ? new URL(server).origin : '';
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    `connect-src 'self'${origin ? ` ${origin}` : ''}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The operator console (console/, built into dist/console by `npm run build:console`): static files
 * under a strict Content-Security-Policy (its own scripts, styles and API calls only; no inline script,
 * no frame). index.html is revalidated on every load so a new build is picked up; the bundles too,
 * since their names carry no hash.
 */
function consoleRouter(dir: string): express.Router {
  const router = express.Router();
  router.use((_req: Request, res: Response, next: () => void) => {
    res.set({
      'Content-Security-Policy':
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
      'Cache-Control': 'no-cache',
    });
    next();
  });
  // /console itself: its page's relative URLs (app.js) need the trailing slash. Relative, so a proxy's path prefix stays.
  router.get('/', (req: Request, res: Response, next: () => void) => {
    if (pathOf(req.originalUrl).endsWith('/')) return next();
    const q = req.originalUrl.indexOf('?');
    res.redirect(301, `console/${q < 0 ? '' : req.originalUrl.slice(q)}`);
  });
  router.use(precompressed(dir));
  router.use(express.static(dir, { index: 'index.html', etag: true, lastModified: true, fallthrough: true }));
  router.use((_req: Request, res: Response) => {
    const built = existsSync(join(dir, 'index.html'));
    res
      .status(built ? 404 : 503)
      .type('text/plain')
      .send(built ? 'Not found in the console.\n' : 'The console is not built: run `npm run build` (it writes dist/console).\n');
  });
  return router;
}

/**
 * The API reference's renderer, one prebuilt file: scripts/build.mjs copies it from @scalar/api-reference
 * (a development dependency, so production installs none of its tool chain) to dist/docs/. Run from src/
 * without a build, the package's own copy serves.
 */
function apiReferenceBundle(): string {
  const vendored = join(root, 'dist', 'docs', 'standalone.js');
  if (existsSync(vendored)) return vendored;
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('@scalar/api-reference')), 'browser', 'standalone.js');
}

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

export async function buildApp(config: Config, overrides: Overrides = {}): Promise<NexusApp> {
  const nexus = await createApp(config, overrides);
  try {
    await nexus.start();
  } catch (err) {
    await nexus.close().catch(() => {});
    throw err;
  }
  return nexus;
}

/**
 * The app, built as far as it goes without its database: the domain's services (which touch it only when
 * called), the contract's router and validators (the slow part of a start), the express app. start() does the
 * rest once the database answers; buildApp does both.
 */
export async function createApp(config: Config, overrides: Overrides = {}): Promise<NexusApp> {
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const clock = overrides.clock ?? systemClock;
  const db =
    overrides.db ??
    createDatabase({
      databaseUrl: config.databaseUrl,
      schema: config.databaseSchema,
      pgliteDir: config.databaseUrl ? undefined : join(config.dataDir, 'pgdata'),
      poolMax: config.databasePoolMax,
      // knex's own warnings (a failed connection) as log lines like the others: the first line, without its stack.
      log: (level, message) => logger.log(level, { msg: 'database', detail: message.split('\n')[0] }),
    });
  const ownsDb = !overrides.db;

  const { services } = overrides.domain ?? createDomain({ db, config, clock, logger, fetch: overrides.fetch ?? globalThis.fetch });
  const definition = loadContract();
  // Traces off: the SDK is not loaded and no span is made.
  const tracing = overrides.tracer ? undefined : await startTracing(config.tracing, definition.info.version);
  const tracer = overrides.tracer ?? tracing?.tracer;
  const publicUrl = createPublicUrl(config);
  const metrics = createMetrics({ defaultMetrics: true, build: buildInfo(config.commit) });
  let countStall = () => {};
  const eventLoop = createEventLoopMonitor({
    blockedMs: config.eventLoopBlockedMs,
    onStall: (stall) => {
      countStall();
      logger.error({ msg: 'the event loop was blocked', ms: stall.ms });
    },
  });
  countStall = registerEventLoopMetrics(metrics.registry, eventLoop.lagSeconds);
  const api = createApi({
    definition,
    handlers: createHandlers(services, { clock, eventLoop }),
    managementKeys: services.managementKeys,
    idempotency: services.idempotency,
    publicUrl,
  });
  await api.init();

  metrics.watchPool('main', db);
  const inflight = { count: 0 };
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  const observer = requestObserver({ logger, metrics, inflight, tracer });
  app.use(observer.middleware((req) => api.operationIdOf(req)));
  // First, so that every Admin API answer has them, a refusal by any later middleware too.
  app.use('/admin/v1', adminAnswerHeaders());
  /** Set once start() has finished: until then only what needs no database is served. */
  let started = false;
  app.use((req: Request, _res: Response, next: (err?: unknown) => void) => {
    if (started) return next();
    const path = pathOf(req.originalUrl);
    if (path === '/readyz')
      return next(new AppError('not_ready', 'Nexus is starting: it waits for its database and applies its migrations'));
    next(servedWhileStarting(path) ? undefined : STARTING());
  });
  let gateway: Gateway | undefined;
  // The gateway's paths never enter express: it reads its own raw body, and express's routing and
  // response helpers would cost a gateway call about a sixth of its CPU.
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const me = isMePath(req.url!);
    if (!me && !isGatewayPath(req.url!)) {
      app(req, res);
      return;
    }
    const locals = {} as RequestLocals;
    if (!started) {
      // Before the gateway writes its own lines, the request observer writes this refusal's.
      observer.observe(req, res, locals, () => ({ operationId: me ? 'getMe' : operationOf(req.method!), path: pathOf(req.url!) }));
      refuseCall(req, res, locals);
      return;
    }
    // Counted here; the gateway writes the call's log line and spans itself.
    observer.observe(req, res, locals, () => ({ operationId: undefined, path: pathOf(req.url!) }), true);
    void (me ? gateway!.handleMe(req, res, locals) : gateway!.handle(req, res, locals));
  };

  app.get('/openapi.json', (req: Request, res: Response) => {
    res.json(contractFor(definition, publicUrl.forRequest(req)));
  });
  const scalarBundle = apiReferenceBundle();
  app.get('/docs', (req: Request, res: Response) => {
    const server = publicUrl.forRequest(req);
    res.set({ 'Content-Security-Policy': docsPolicy(server), 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' });
    res.type('html').send(docsPage(server, pathOf(req.originalUrl).endsWith('/') ? '../' : ''));
  });
  app.get('/docs/standalone.js', (_req: Request, res: Response) => {
    res.type('application/javascript').sendFile(scalarBundle);
  });
  app.get('/metrics', async (_req: Request, res: Response) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });

  app.use('/console', consoleRouter(join(root, 'dist', 'console')));
  // `/`: the console when it is built; otherwise the API's own answer.
  app.get('/', (req: Request, res: Response, next: () => void) => {
    if (!existsSync(join(root, 'dist', 'console', 'index.html'))) return next();
    res.redirect(302, 'console/');
  });

  // Billing webhooks are verified on their raw bytes: mounted before the JSON body parser.
  app.post(
    '/webhooks/billing/:connectionId',
    express.raw({ type: () => true, limit: config.bodyLimitBytes }),
    billingWebhookReceiver(services),
  );
  app.use(jsonBodiesOnly());
  app.use(express.json({ limit: config.bodyLimitBytes, type: JSON_TYPES, verify: utf8Only }));
  app.use((req: Request, res: Response) => api.handle(req, res));
  app.use(errorRenderer());

  /** What start() begins, and close() ends. */
  const timers: NodeJS.Timeout[] = [];
  let stopDelivery: (() => Promise<void>) | undefined;
  let stopBilling: (() => Promise<void>) | undefined;
  let listener: ChangeListener | undefined;
  const every = (ms: number, run: () => void) => {
    const timer = setInterval(run, ms);
    timer.unref();
    timers.push(timer);
  };

  async function begin(wait: StartWait | undefined): Promise<void> {
    if (!overrides.skipMigrations) {
      if (wait && ownsDb && config.databaseUrl) {
        await migrateWhenReachable(db, {
          url: config.databaseUrl,
          schema: config.databaseSchema,
          timeoutMs: wait.timeoutMs,
          logger,
          onWaiting: wait.onWaiting,
        });
      } else {
        await migrateLatest(db, config.databaseSchema);
      }
    }
    if (ownsDb && !config.databaseUrl) {
      // The embedded database is this process's alone (its data dir is locked): a quota lease still HELD there was
      // left by a process that died (killed, crashed), and is released now rather than after its TTL.
      const reclaimed = await services.quota.sweepExpired(clock.now(), true);
      await services.rates.sweepExpired(clock.now(), true);
      if (reclaimed.leases)
        logger.info({ msg: 'reclaimed the quota leases of a process that stopped without releasing them', ...reclaimed });
    }
    // The gateway's process-wide parts, composed once beside the domain's (src/gateway/gateway-parts.ts).
    const gatewayParts = createGatewayParts({
      db,
      config,
      clock,
      logger,
      hasher: services.hasher,
      changes: services.changes,
      metrics,
      checkBudgets: (workspaceIds) => services.budgets.checkSpend(workspaceIds),
      onBreakerTransition: (transition) => announceBreaker(services.events, db, logger, transition),
    });
    const built = createGateway({
      parts: gatewayParts,
      config,
      clock,
      quota: services.quota,
      rates: services.rates,
      secretBox: services.secretBox,
      tracer,
    });
    gateway = built;
    // A process that died holding quota leases: after their TTL, its calls in flight are charged and what they held returns.
    every(
      Math.max(250, Math.floor(config.leaseTtlMs / 4)),
      () =>
        void built
          .sweepExpired()
          .then((reclaimed) => {
            if (reclaimed.leases) logger.info({ msg: 'reclaimed the quota leases of a process that stopped', ...reclaimed });
          })
          .catch((err: Error) => logger.warn({ msg: 'quota lease sweep failed', error: err.message })),
    );
    // Records a process that stopped left in the spool, while PostgreSQL was away.
    void built.recover();
    // Accesses whose accessEndsAt or last quota period has passed become EXPIRED (reads apply it lazily too).
    every(
      60_000,
      () =>
        void services.accesses.expireDue().catch((err: Error) => logger.warn({ msg: 'access expiry sweep failed', error: err.message })),
    );
    // Idempotency rows past their 24 h window: their sealed answers (a key's plaintext, sometimes) go.
    every(
      10 * 60_000,
      () =>
        void services.idempotency
          .purgeExpired()
          .catch((err: Error) => logger.warn({ msg: 'idempotency purge failed', error: err.message })),
    );
    // Outbound events: this process's delivery worker (docs/events.md), and the keys entering their last days.
    stopDelivery = services.webhookDelivery.start();
    every(
      60_000,
      () =>
        void services.inferenceKeyExpiry
          .announceExpiring()
          .catch((err: Error) => logger.warn({ msg: 'inference key expiry announcement failed', error: err.message })),
    );
    stopBilling = services.billing.startBackground();
    // The other processes' changes (src/domain/changes/change-feed.ts); the embedded database has no other process.
    const { channel } = services.changes;
    if (channel && config.databaseListenUrl && !isEmbedded(db)) {
      listener = startChangeListener({
        url: config.databaseListenUrl,
        channel,
        logger,
        onPayload: (payload) => services.changes.received(payload),
        onListening: () => services.changes.missed(),
      });
      await listener.ready;
    }
    started = true;
  }

  let starting: Promise<void> | undefined;
  eventLoop.start();
  return {
    handler,
    app,
    db,
    services,
    logger,
    inflight,
    publicUrl,
    get gateway(): Gateway {
      if (!gateway) throw new Error('Nexus has not started: start() builds the gateway');
      return gateway;
    },
    bodyTimeoutMs: config.bodyTimeoutMs,
    start(wait?: StartWait) {
      starting ??= begin(wait);
      return starting;
    },
    started: () => started,
    async close() {
      eventLoop.close();
      for (const timer of timers) clearInterval(timer);
      await stopDelivery?.();
      await stopBilling?.();
      await listener?.close();
      await gateway?.close();
      if (ownsDb) await db.destroy();
      await tracing?.shutdown();
    },
  };
}

export interface RunningServer {
  server: Server;
  url: string;
  /** Stops accepting, lets in-flight requests (streams too) finish within the bound, then closes. */
  shutdown(): Promise<void>;
}

export async function listen(nexus: NexusApp, port: number, host: string, shutdownTimeoutMs: number): Promise<RunningServer> {
  const server = createServer(
    {
      // A request whose body trickles in is answered 408 and its connection closed once the time is up
      // (node checks its connections every connectionsCheckingInterval), instead of node's 300 s.
      requestTimeout: nexus.bodyTimeoutMs,
      headersTimeout: Math.min(60_000, nexus.bodyTimeoutMs),
      connectionsCheckingInterval: Math.min(1000, Math.max(100, Math.floor(nexus.bodyTimeoutMs / 10))),
    },
    nexus.handler,
  );
  server.keepAliveTimeout = 65_000;
  server.on('clientError', clientErrorHandler());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
  nexus.publicUrl.listeningAt(url);
  let closing: Promise<void> | undefined;
  return {
    server,
    url,
    shutdown() {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const deadline = Date.now() + shutdownTimeoutMs;
        while (nexus.inflight.count > 0 && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 20));
          server.closeIdleConnections();
        }
        // Past the deadline: the calls still under way are cut first, so they are recorded as cut by the
        // shutdown, not as left by their clients, and none is read on to its end.
        if (nexus.started()) nexus.gateway.cutCalls();
        server.closeAllConnections();
        await closed;
        await nexus.close();
      })();
      return closing;
    },
  };
}

/**
 * Without NEXUS_MANAGEMENT_KEY, the first start creates the root Management Key and prints it, once, to the
 * terminal (never to the log). src/server.ts calls it once the server listens: a start that cannot listen
 * (its port taken) exits before any key exists, so no key is printed by a process that then dies.
 */
export async function announceRootKey(nexus: NexusApp, config: Config): Promise<void> {
  const rootKey = await nexus.services.managementKeys.ensureRootKey();
  if (rootKey) {
    process.stdout.write(
      `\nNexus generated a root Management Key (shown only this once, stored hashed):\n\n  ${rootKey}\n\n` +
        `Set NEXUS_MANAGEMENT_KEY to use a key of your own instead.\n\n`,
    );
  } else if (!config.managementKey) {
    nexus.logger.info({
      msg: 'a root Management Key exists: it was printed once, on the first start. Lost it? Set NEXUS_MANAGEMENT_KEY to use a key of your own',
    });
  }
}

/**
 * A route breaker that opens on a healthy target is `provider_connection.unhealthy`; one that closes again is
 * `.recovered` (docs/events.md). Written by the process whose write made the transition (route-registry.ts: of
 * processes making it at once, one), off the call's path: a failure to write it is logged, never the call's.
 */
function announceBreaker(events: Services['events'], db: Db, logger: Logger, t: BreakerTransition): void {
  const data = { providerConnectionId: t.connectionId, source: 'breaker' as const, routeId: t.routeId };
  const written =
    t.to === 'open' && t.from === 'closed'
      ? events.emit(db, t.workspaceId, 'provider_connection.unhealthy', data)
      : t.to === 'closed' && t.from !== 'closed'
        ? events.emit(db, t.workspaceId, 'provider_connection.recovered', data)
        : null;
  written?.catch((err: Error) => logger.warn({ msg: 'could not write a breaker event', routeId: t.routeId, error: err.message }));
}

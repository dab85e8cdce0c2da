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
import type { Duplex } from 'node:stream';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Document } from 'openapi-backend';
import type { Config } from './config.js';
import { createDatabase, type Db } from './db/database.js';
import { migrateLatest } from './db/migrate.js';
import { migrateWhenReachable } from './db/wait-for-database.js';
import { systemClock, type Clock } from './domain/actor.js';
import { createDomain, type Domain, type Services } from './domain/services.js';
import { announceBreaker } from './domain/routes/breaker-events.js';
import { createHandlers } from './handlers/index.js';
import { billingWebhookReceiver } from './handlers/billing/billing.js';
import { createGateway, type Gateway } from './gateway/gateway.js';
import { createGatewayParts } from './gateway/gateway-parts.js';
import { warmHttp } from './warm-http.js';
import { createRealtime, type Realtime } from './realtime/realtime-gateway.js';
import { createBatches, type Batches, type BatchesDeps } from './batches/batches.js';
import { createApi, type Api } from './http/api.js';
import { createPublicUrl, type PublicUrl } from './http/public-url.js';
import { servePages } from './http/pages.js';
import { serveSignIn } from './http/sign-in-routes.js';
import { createAdminAuthentication } from './http/session-auth.js';
import { createFrontDoor } from './front-door.js';
import { createJobs, type Jobs } from './jobs.js';
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
import { createMetrics, registerEventLoopMetrics, registerRealtimeMetrics, type Metrics } from './observability/metrics.js';
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
  /** The services, built over the same db, config, clock, logger and fetch (the test harness, keeping the domain's test hooks). */
  domain?: Domain;
  /** Traces go to this tracer (tests: an in-memory exporter's) instead of the configured one. */
  tracer?: Tracer;
  /** The batches' settlement's chunk and its hook after each (tests: a process that dies midway). */
  batchSettlement?: BatchesDeps['settlement'];
  /** false: the history job makes its months but applies no retention (tests that seed rows older than a policy). */
  historyRetention?: boolean;
}

export interface NexusApp {
  /** The server's request listener: the gateway's paths, then everything else through `app`. */
  handler: (req: IncomingMessage, res: ServerResponse) => void;
  /** The server's 'upgrade' listener: WebSocket handshakes (a Realtime session's, docs/realtime.md). */
  upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** The Admin API, /docs, /metrics, health and the billing receiver. */
  app: Express;
  db: Db;
  services: Services;
  logger: Logger;
  inflight: { count: number };
  /** Where clients reach this Nexus; listen() tells it the address it listens at. */
  publicUrl: PublicUrl;
  /**
   * The gateway (tests: drain() waits for settlements, sweepExpired() runs the sweeper once) and the Batch API above
   * it (tests: settle() runs a round of its settlement), built by start(): reading either before throws.
   */
  readonly gateway: Gateway;
  readonly batches: Batches;
  /**
   * A shutdown's deadline has come: the gateway's calls still under way are cut, and the Realtime sessions closed
   * (1001), each turn in flight charged for what was delivered.
   */
  cutCalls(): void;
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

/**
 * How a start waits for a PostgreSQL it cannot reach (src/db/wait-for-database.ts; the embedded database is never
 * waited for), and whether it warms the gateway before it opens.
 */
interface StartWait {
  /** How long (NEXUS_DATABASE_STARTUP_TIMEOUT_MS): past it, start() throws DatabaseWaitTimeout. */
  timeoutMs: number;
  /** Called once, when the database is first found unavailable (src/server.ts listens then). */
  onWaiting?: () => void;
  /** Warm the gateway before the app opens (src/gateway/warm-up.ts): src/server.ts's start; the tests' apps do not. */
  warmUp?: boolean;
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

/** The database of the configuration: PostgreSQL, or the embedded PGlite in the data dir. */
function openDatabase(config: Config, logger: Logger): Db {
  return createDatabase({
    databaseUrl: config.databaseUrl,
    schema: config.databaseSchema,
    pgliteDir: config.databaseUrl ? undefined : join(config.dataDir, 'pgdata'),
    poolMax: config.databasePoolMax,
    // knex's own warnings (a failed connection) as log lines like the others: the first line, without its stack.
    log: (level, message) => logger.log(level, { msg: 'database', detail: message.split('\n')[0] }),
  });
}

/** The event loop's monitor, its stalls logged and counted. */
function watchEventLoop(config: Config, logger: Logger, metrics: Metrics) {
  let countStall = () => {};
  const eventLoop = createEventLoopMonitor({
    blockedMs: config.eventLoopBlockedMs,
    onStall: (stall) => {
      countStall();
      logger.error({ msg: 'the event loop was blocked', ms: stall.ms });
    },
  });
  countStall = registerEventLoopMetrics(metrics.registry, eventLoop.lagSeconds);
  return eventLoop;
}

/** What express serves, in order: the request observer, the start's gate, /metrics, the pages, the billing receiver, the API. */
function mountExpress(
  app: Express,
  deps: {
    config: Config;
    services: Services;
    api: Api;
    observer: ReturnType<typeof requestObserver>;
    gate: (req: Request, res: Response, next: (err?: unknown) => void) => void;
    metrics: Metrics;
    definition: Document;
    publicUrl: PublicUrl;
  },
): void {
  const { config, api, metrics } = deps;
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use(deps.observer.middleware((req) => api.operationIdOf(req)));
  // First, so that every Admin API answer has them, a refusal by any later middleware too.
  app.use('/admin/v1', adminAnswerHeaders());
  app.use(deps.gate);
  app.get('/metrics', async (_req: Request, res: Response) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  servePages(app, deps);
  // People's sign-in (/auth/...): the providers' redirects and callbacks, the session, sign-out, login links.
  serveSignIn(app, { config, people: deps.services.people, publicUrl: deps.publicUrl });
  // Billing webhooks are verified on their raw bytes: mounted before the JSON body parser.
  app.post(
    '/webhooks/billing/:connectionId',
    express.raw({ type: () => true, limit: config.bodyLimitBytes }),
    billingWebhookReceiver(deps.services),
  );
  app.use(jsonBodiesOnly());
  app.use(express.json({ limit: config.bodyLimitBytes, type: JSON_TYPES, verify: utf8Only }));
  app.use((req: Request, res: Response) => api.handle(req, res));
  app.use(errorRenderer());
}

/** What start() works with. */
interface StartContext {
  config: Config;
  overrides: Overrides;
  db: Db;
  services: Services;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  tracer: Tracer | undefined;
}

/** What start() builds and begins, and close() ends: set as each is made, so a start that fails half-way closes what it made. */
interface Started {
  gateway?: Gateway;
  realtime?: Realtime;
  batches?: Batches;
  jobs?: Jobs;
}

/** The migrations applied: with `wait`, once PostgreSQL answers (the embedded database is never waited for). */
async function migrate({ config, overrides, db, logger }: StartContext, wait: StartWait | undefined): Promise<void> {
  if (overrides.skipMigrations) return;
  if (wait && !overrides.db && config.databaseUrl) {
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

/**
 * The embedded database is this process's alone (its data dir is locked): a quota lease still HELD there was
 * left by a process that died (killed, crashed), and is released now rather than after its TTL. Before the
 * gateway takes any lease of its own.
 */
async function reclaimEmbedded({ config, overrides, services, clock, logger }: StartContext): Promise<void> {
  if (overrides.db || config.databaseUrl) return;
  const reclaimed = await services.quota.sweepExpired(clock.now(), true);
  await services.rates.sweepExpired(clock.now(), true);
  if (reclaimed.leases) logger.info({ msg: 'reclaimed the quota leases of a process that stopped without releasing them', ...reclaimed });
}

/** The gateway, and the layers above it that it does not import: the Batch API (src/batches/) and Realtime sessions. */
function buildGateway({ config, db, services, clock, logger, metrics, tracer, overrides }: StartContext): Required<Omit<Started, 'jobs'>> {
  // The gateway's process-wide parts, composed once beside the domain's (src/gateway/gateway-parts.ts).
  const parts = createGatewayParts({
    db,
    config,
    clock,
    logger,
    hasher: services.hasher,
    secretBox: services.secretBox,
    changes: services.changes,
    metrics,
    checkBudgets: (workspaceIds) => services.budgets.checkSpend(workspaceIds),
    onBreakerTransition: (transition) => announceBreaker({ db, events: services.events, logger }, transition),
  });
  const batches = createBatches({ db, parts, config, clock, logger, secretBox: services.secretBox, settlement: overrides.batchSettlement });
  const gateway = createGateway({
    parts,
    config,
    clock,
    quota: services.quota,
    rates: services.rates,
    secretBox: services.secretBox,
    tracer,
    batches: batches.paths,
  });
  const realtime = createRealtime({ parts, refuse: gateway.refuse, config, secretBox: services.secretBox });
  registerRealtimeMetrics(metrics.registry, () => realtime.size);
  return { gateway, realtime, batches };
}

/** start(): the database reached and migrated, the gateway built, the background jobs begun. */
async function begin(ctx: StartContext, started: Started, wait: StartWait | undefined): Promise<ReturnType<typeof buildGateway>> {
  await migrate(ctx, wait);
  await reclaimEmbedded(ctx);
  const built = buildGateway(ctx);
  Object.assign(started, built);
  started.jobs = createJobs({ ...ctx, ...built, historyRetention: ctx.overrides.historyRetention ?? true });
  await started.jobs.start();
  if (wait?.warmUp) {
    const began = performance.now();
    const [connections] = await Promise.all([built.gateway.warmUp(), warmHttp()]);
    ctx.logger.info({ msg: 'warmed up', connections, ms: Math.round(performance.now() - began) });
  }
  return built;
}

/**
 * The app, built as far as it goes without its database: the domain's services (which touch it only when
 * called), the contract's router and validators (the slow part of a start), the express app. start() does the
 * rest once the database answers; buildApp does both.
 */
export async function createApp(config: Config, overrides: Overrides = {}): Promise<NexusApp> {
  const logger = overrides.logger ?? createLogger(config.logLevel);
  const clock = overrides.clock ?? systemClock;
  const db = overrides.db ?? openDatabase(config, logger);
  const { services } = overrides.domain ?? createDomain({ db, config, clock, logger, fetch: overrides.fetch ?? globalThis.fetch });
  const definition = loadContract();
  // Traces off: the SDK is not loaded and no span is made.
  const tracing = overrides.tracer ? undefined : await startTracing(config.tracing, definition.info.version);
  const tracer = overrides.tracer ?? tracing?.tracer;
  const publicUrl = createPublicUrl(config);
  const metrics = createMetrics({ defaultMetrics: true, build: buildInfo(config.commit) });
  const eventLoop = watchEventLoop(config, logger, metrics);
  const api = createApi({
    definition,
    handlers: createHandlers(services, { clock, eventLoop }),
    authentication: createAdminAuthentication({
      config,
      managementKeys: services.managementKeys,
      sessions: services.people.sessions,
      members: services.people.members,
    }),
    idempotency: services.idempotency,
    publicUrl,
  });
  await api.init();

  metrics.watchPool('main', db);
  const inflight = { count: 0 };
  const app = express();
  const observer = requestObserver({ logger, metrics, inflight, tracer });
  const door = createFrontDoor({ app, observer });
  mountExpress(app, { config, services, api, observer, gate: door.gate, metrics, definition, publicUrl });

  const ctx: StartContext = { config, overrides, db, services, clock, logger, metrics, tracer };
  const started: Started = {};
  let starting: Promise<void> | undefined;
  eventLoop.start();
  return {
    handler: door.handler,
    upgrade: door.upgrade,
    app,
    db,
    services,
    logger,
    inflight,
    publicUrl,
    get gateway(): Gateway {
      if (!started.gateway) throw new Error('Nexus has not started: start() builds the gateway');
      return started.gateway;
    },
    get batches(): Batches {
      if (!started.batches) throw new Error('Nexus has not started: start() builds the Batch API');
      return started.batches;
    },
    bodyTimeoutMs: config.bodyTimeoutMs,
    start(wait?: StartWait) {
      starting ??= begin(ctx, started, wait).then(({ gateway, realtime }) => door.open(gateway, realtime));
      return starting;
    },
    started: door.isOpen,
    cutCalls() {
      started.gateway?.cutCalls();
      started.realtime?.shutDown();
    },
    async close() {
      eventLoop.close();
      await started.jobs?.stop();
      await started.gateway?.close();
      if (!overrides.db) await db.destroy();
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
  server.on('upgrade', nexus.upgrade);
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
        if (nexus.started()) nexus.cutCalls();
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

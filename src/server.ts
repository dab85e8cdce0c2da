/**
 * `npm start` (node dist/server.js): one process serving the Admin API, the Gateway, webhooks and docs; or, with
 * NEXUS_WORKERS=N (PostgreSQL only), a primary that serves nothing itself and N workers sharing the port
 * (src/workers.ts).
 */
import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import type { NexusApp, RunningServer } from './app.js';

/** How long closing the app may take after the drain's deadline before the process exits anyway. */
const CLOSE_GRACE_MS = 5000;

/** The line for a listen that failed for a reason the operator can fix; undefined for another failure. */
function cannotListen(err: unknown, host: string, port: number): string | undefined {
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  switch ((err as NodeJS.ErrnoException).code) {
    case 'EADDRINUSE':
      return `Nexus cannot listen on ${address}: port ${port} is in use. Set PORT to a free port (or stop what holds it).`;
    case 'EACCES':
      return `Nexus cannot listen on ${address}: permission denied (ports below 1024 need privileges). Set PORT to 1024 or above.`;
    case 'EADDRNOTAVAIL':
      return `Nexus cannot listen on ${address}: this machine has no such address. Set HOST to one of its addresses (or 0.0.0.0).`;
    case undefined:
    default:
      return undefined;
  }
}

async function main() {
  // The signal handlers come first, before the application's modules load. As PID 1 (a container without an
  // init), node gets no default action for SIGTERM: a signal that came while the modules loaded or the
  // migrations ran would be dropped, and the container killed when the runtime's grace period ran out.
  // Until the app has started there is nothing to drain: the process ends at once (a migration under way is
  // one transaction, rolled back; while the start waits for its database, its server answers each request at once).
  let serving: { nexus: NexusApp; running: RunningServer; shutdownTimeoutMs: number } | undefined;
  let stopping = false;
  let primary: { stop(signal: string): void } | undefined;
  const stop = (signal: string) => {
    if (primary) return primary.stop(signal);
    if (stopping) {
      // A worker's second signal is the primary's SIGTERM after the terminal's SIGINT (Ctrl-C reaches the whole
      // process group): the drain goes on, and the primary bounds it.
      if (cluster.isWorker) return;
      // A second signal: the drain is not waited for.
      serving?.nexus.logger.warn({ msg: 'second signal during the shutdown: exiting now', signal });
      process.exit(1);
    }
    stopping = true;
    if (!serving) process.exit(0);
    const { nexus, running, shutdownTimeoutMs } = serving;
    nexus.logger.info({ msg: 'shutting down', signal, inflight: nexus.inflight.count });
    // The drain is bounded by NEXUS_SHUTDOWN_TIMEOUT_MS; closing what the app holds (the records' last writes,
    // the database) gets CLOSE_GRACE_MS more, then the process exits whatever still waits.
    setTimeout(() => {
      nexus.logger.error({ msg: 'the shutdown did not finish in time: exiting now', timeoutMs: shutdownTimeoutMs + CLOSE_GRACE_MS });
      process.exit(1);
    }, shutdownTimeoutMs + CLOSE_GRACE_MS).unref();
    running.shutdown().then(
      () => process.exit(0),
      (err) => {
        nexus.logger.error({ msg: 'shutdown failed', error: String(err) });
        process.exit(1);
      },
    );
  };
  const onSigterm = () => stop('SIGTERM');
  const onSigint = () => stop('SIGINT');
  process.on('SIGTERM', onSigterm);
  process.on('SIGINT', onSigint);

  const { ConfigError, loadConfig } = await import('./config.js');
  const { startLoopWatchdog } = await import('./observability/event-loop.js');
  try {
    if (existsSync('.env')) process.loadEnvFile('.env');
    const config = loadConfig();
    if (config.workers > 1) {
      const { runPrimary, writeWholeLines } = await import('./workers.js');
      writeWholeLines();
      if (cluster.isPrimary) {
        primary = runPrimary(config);
        return;
      }
    }
    const { announceRootKey, createApp, listen } = await import('./app.js');
    const { DatabaseWaitTimeout } = await import('./db/wait-for-database.js');
    const { createLogger } = await import('./observability/logger.js');
    // A worker's lines say which worker wrote them: the workers share the primary's stdout.
    const logger = cluster.isWorker
      ? createLogger(config.logLevel, undefined, { worker: cluster.worker!.id, pid: process.pid })
      : undefined;
    const nexus = await createApp(config, logger ? { logger } : {});
    // The server listens once the app has started; or as soon as the database is found unreachable, while the
    // start waits for it: /healthz answers 200 then, /readyz and what needs the database 503 (src/app.ts).
    let listening: Promise<RunningServer> | undefined;
    const serve = () =>
      (listening ??= listen(nexus, config.port, config.host, config.shutdownTimeoutMs).catch(async (err: unknown) => {
        const reason = cannotListen(err, config.host, config.port);
        if (!reason) throw err;
        // An operator's mistake, not a crash: one line, no stack, and no root key was made.
        console.error(reason);
        await nexus.close().catch(() => {});
        process.exit(1);
      }));
    try {
      await nexus.start({
        timeoutMs: config.databaseStartupTimeoutMs,
        // /readyz says ready once the gateway pool's connections are open and the call's path compiled.
        warmUp: true,
        onWaiting: () =>
          void serve().catch((err: unknown) => {
            console.error(err);
            process.exit(1);
          }),
      });
    } catch (err) {
      if (!(err instanceof DatabaseWaitTimeout)) throw err;
      // The database never came within NEXUS_DATABASE_STARTUP_TIMEOUT_MS: one line, no stack.
      console.error(err.message);
      process.exit(1);
    }
    const running = await serve();
    serving = { nexus, running, shutdownTimeoutMs: config.shutdownTimeoutMs };
    // Once the app has started and the server listens: a first start that cannot listen dies before it makes the
    // root key. Of a cluster's workers the first makes it (the others start once it serves); a worker forked later
    // finds it.
    if (!cluster.isWorker || cluster.worker!.id === 1) await announceRootKey(nexus, config);
    // While the event loop is blocked no signal handler can run: the watchdog thread has the handlers
    // dropped meanwhile, so that SIGTERM and SIGINT take their default action (the process ends).
    startLoopWatchdog({
      blockedMs: config.eventLoopBlockedMs,
      onBlocked: () => {
        process.off('SIGTERM', onSigterm);
        process.off('SIGINT', onSigint);
      },
      onRuns: () => {
        nexus.logger.warn({ msg: 'the event loop turns again: SIGTERM and SIGINT drain the process again' });
        process.on('SIGTERM', onSigterm);
        process.on('SIGINT', onSigint);
      },
    });
    nexus.logger.info({
      msg: 'listening',
      url: running.url,
      database: config.databaseUrl ? 'postgresql' : `embedded PGlite in ${config.dataDir}`,
      console: `${nexus.publicUrl.get()}/console/`,
      docs: `${nexus.publicUrl.get()}/docs`,
    });
    if (!config.publicUrl && config.trustProxy === false && (config.host === '0.0.0.0' || config.host === '::')) {
      // Every address of the machine: none a client can be told to use, and no request header is believed instead.
      nexus.logger.warn({
        msg: 'NEXUS_PUBLIC_URL is unset: the URLs Nexus writes (gatewayBaseUrl, webhookUrl, the server of /openapi.json and /docs) name the listen address. Set NEXUS_PUBLIC_URL to the origin clients use (or NEXUS_TRUST_PROXY behind a proxy)',
        url: running.url,
      });
    }
    // The primary starts the other workers once the first serves (its migrations are done).
    if (cluster.isWorker) process.send?.({ nexus: 'listening' });
  } catch (err) {
    console.error(err instanceof ConfigError ? err.message : err);
    process.exit(1);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

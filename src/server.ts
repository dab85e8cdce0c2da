/** `npm start` (node dist/server.js): one process serving the Admin API, the Gateway, webhooks and docs. */
import { existsSync } from 'node:fs';
import type { NexusApp, RunningServer } from './app.js';

async function main() {
  // The signal handlers come first, before the application's modules load. As PID 1 (a container without an
  // init), node gets no default action for SIGTERM: a signal that came while the modules loaded or the
  // migrations ran would be dropped, and the container killed when the runtime's grace period ran out.
  // Until the server listens there is nothing to drain: the process ends at once (a migration under way is
  // one transaction, rolled back).
  let serving: { nexus: NexusApp; running: RunningServer } | undefined;
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    if (!serving) process.exit(0);
    const { nexus, running } = serving;
    nexus.logger.info({ msg: 'shutting down', signal, inflight: nexus.inflight.count });
    running.shutdown().then(
      () => process.exit(0),
      (err) => {
        nexus.logger.error({ msg: 'shutdown failed', error: String(err) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  const { buildApp, listen } = await import('./app.js');
  const { ConfigError, loadConfig } = await import('./config.js');
  try {
    if (existsSync('.env')) process.loadEnvFile('.env');
    const config = loadConfig();
    const nexus = await buildApp(config);
    const running = await listen(nexus, config.port, config.host, config.shutdownTimeoutMs);
    serving = { nexus, running };
    nexus.logger.info({
      msg: 'listening',
      url: running.url,
      database: config.databaseUrl ? 'postgresql' : `embedded PGlite in ${config.dataDir}`,
      docs: `${nexus.publicUrl.get()}/docs`,
    });
  } catch (err) {
    console.error(err instanceof ConfigError ? err.message : err);
    process.exit(1);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

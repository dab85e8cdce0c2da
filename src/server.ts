/** `npm start`: one process serving the Admin API, the Gateway, webhooks and docs. */
import { existsSync } from 'node:fs';
import { buildApp, listen } from './app.js';
import { ConfigError, loadConfig } from './config.js';

async function main() {
  if (existsSync('.env')) process.loadEnvFile('.env');
  const config = loadConfig();
  const nexus = await buildApp(config);
  const running = await listen(nexus, config.port, config.host, config.shutdownTimeoutMs);
  nexus.logger.info({
    msg: 'listening',
    url: running.url,
    database: config.databaseUrl ? 'postgresql' : `embedded PGlite in ${config.dataDir}`,
    docs: `${nexus.publicUrl.get()}/docs`,
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
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
}

main().catch((err) => {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(1);
});

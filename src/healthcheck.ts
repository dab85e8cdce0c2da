/**
 * `node dist/healthcheck.js`: exits 0 when the Nexus of this machine (or container) answers /readyz
 * with 200 within 3 s, 1 otherwise. It is the image's HEALTHCHECK: the image has node, not curl.
 * It reads the configuration the server reads, so it asks the port the server listens on.
 */
import { existsSync } from 'node:fs';
import { loadConfig } from './config.js';

/** The address to ask: a server listening on every interface answers on loopback. */
function probeHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

async function main(): Promise<number> {
  if (existsSync('.env')) process.loadEnvFile('.env');
  const config = loadConfig(process.env, () => {});
  const url = `http://${probeHost(config.host)}:${config.port}/readyz`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
    if (res.status === 200) return 0;
    console.error(`${url}: ${res.status} ${await res.text()}`);
  } catch (err) {
    console.error(`${url}: ${(err as Error).message}`);
  }
  return 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);

/** Starting `npm run bench`'s processes: Nexus builds through their real entry point, and the bench's own roles. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { startArgs } from '../lib/nexus-process.js';
import { DATABASE_URL, ROOT_KEY } from './config.js';

const projectRoot = join(fileURLToPath(import.meta.url), '..', '..', '..');

/** A port free now (the server binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** The checkout a build runs from: this one, or another's for checkout=<dir>. */
export function checkoutRoot(build: string): string {
  return build.startsWith('checkout=') ? resolve(build.slice('checkout='.length)) : projectRoot;
}

export function buildLabel(build: string): string {
  if (build === 'compiled') return 'nexus';
  if (build === 'tsx') return 'nexus (tsx)';
  return `nexus (${basename(checkoutRoot(build))})`;
}

/**
 * Each Nexus process connects as a PostgreSQL role of its own (trust auth, dropped at the end), so the backends
 * that serve it, and their CPU, are told apart from everything else the cluster serves.
 */
export function asRole(role: string): string {
  const url = new URL(DATABASE_URL);
  url.username = role;
  return url.toString();
}

/**
 * Nexus through its real entry point: the compiled build with `npm start`'s own command line, or
 * src/server.ts through tsx. Ready when /readyz answers 200.
 */
export async function startNexus(build: string, schema: string, databaseUrl = DATABASE_URL): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const flags = process.env.BENCH_NODE_FLAGS ? process.env.BENCH_NODE_FLAGS.split(' ') : [];
  if (process.env.BENCH_PROFILE) flags.push('--cpu-prof', '--cpu-prof-dir=bench-profiles');
  const root = checkoutRoot(build);
  let args: string[];
  if (build !== 'tsx') {
    args = [...flags, ...startArgs(root)];
  } else {
    args = [...flags, '--import', 'tsx', 'src/server.ts'];
  }
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      NEXUS_PUBLIC_URL: url,
      DATABASE_URL: databaseUrl,
      NEXUS_DATABASE_SCHEMA: schema,
      NEXUS_MANAGEMENT_KEY: ROOT_KEY,
      NEXUS_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
      NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
      NEXUS_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      NEXUS_SHUTDOWN_TIMEOUT_MS: '2000',
      // The one durability knob, to compare (off by default, as in production).
      ...(process.env.NEXUS_GATEWAY_ASYNC_COMMIT ? { NEXUS_GATEWAY_ASYNC_COMMIT: process.env.NEXUS_GATEWAY_ASYNC_COMMIT } : {}),
      // The key cache's life while every change is heard (off by default), to compare.
      ...(process.env.NEXUS_AUTH_CACHE_LISTENING_TTL_MS
        ? { NEXUS_AUTH_CACHE_LISTENING_TTL_MS: process.env.NEXUS_AUTH_CACHE_LISTENING_TTL_MS }
        : {}),
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nexus (${build}) exited with ${child.exitCode}`);
    const status = await request(`${url}/readyz`).then(
      async (res) => (await res.body.dump(), res.statusCode),
      () => 0,
    );
    if (status === 200) return { child, url };
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One of the bench's own processes (scripts/bench/roles.ts), started from scripts/bench.ts with `--role=<name>`. */
export function startRole(name: string, args: string[], env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string }> {
  const self = join(projectRoot, 'scripts', 'bench.ts');
  const child = spawn(process.execPath, ['--import', 'tsx', self, `--role=${name}`, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let buffer = '';
    const onData = (d: Buffer) => {
      buffer += d.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop()!;
      for (const line of lines) {
        let port: number | undefined;
        try {
          port = (JSON.parse(line) as { port?: number }).port;
        } catch {
          // not our line
        }
        if (!port) {
          process.stderr.write(line + '\n');
          continue;
        }
        // What the process prints from now on (its warnings, a node flag's trace) goes to stderr, as it comes.
        child.stdout.off('data', onData);
        child.stdout.pipe(process.stderr);
        return resolve({ child, url: `http://127.0.0.1:${port}` });
      }
    };
    child.stdout.on('data', onData);
    child.on('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
  });
}

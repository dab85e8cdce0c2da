/**
 * A Nexus as its own process, for the tests and scripts that must kill one or run
 * several: wherever DATABASE_URL points. It runs `src/server.ts` through tsx, or with
 * `built` the compiled `dist/server.js` with plain node (the caller built it: the e2e
 * tests' global setup does, test/support/build-setup.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const projectRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The node arguments of `npm start` in checkout `root` (its package.json's start script, `node <flags> dist/server.js`):
 * the flags it runs the server with (its heap's young generation, source maps), then the entry.
 */
export function startArgs(root = projectRoot): string[] {
  const start = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start.split(' ');
  if (start[0] !== 'node') throw new Error(`npm start is not a node command line: ${start.join(' ')}`);
  return start.slice(1);
}

export interface NexusProcess {
  url: string;
  child: ChildProcess;
  /** Everything it printed so far (its log lines are JSON). */
  output(): string;
  /** Its JSON log lines so far (stdout), whole lines only: a line still arriving is left for the next read. */
  logLines(): Record<string, unknown>[];
  /** Resolves with its exit code (or the signal's name) when it exits. */
  exited: Promise<number | string>;
  /** SIGKILL: it dies at once, leaving whatever it held. */
  kill(): Promise<void>;
  /** SIGTERM, then waits for it to exit. */
  stop(): Promise<number | string>;
}

/** A free port on 127.0.0.1 (bound, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface StartOptions {
  /** Run dist/server.js (already built) instead of src/server.ts through tsx. */
  built?: boolean;
  /** Another checkout of Nexus to run (a git worktree of an earlier commit, say), with its own build and migrations. */
  root?: string;
}

/** Starts Nexus with this environment (plus PATH, HOME, HOST and a free PORT); resolves once /healthz answers. */
export async function startNexusProcess(env: Record<string, string>, options: StartOptions = {}): Promise<NexusProcess> {
  const port = await freePort();
  const entry = options.built ? startArgs(options.root) : ['--import', 'tsx', 'src/server.ts'];
  const child = spawn(process.execPath, entry, {
    cwd: options.root ?? projectRoot,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, HOST: '127.0.0.1', PORT: String(port), ...env },
  });
  let output = '';
  let stdout = '';
  child.stdout.on('data', (d) => {
    output += d;
    stdout += d;
  });
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (Date.now() > deadline || child.exitCode !== null || child.signalCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`Nexus did not start:\n${output}`);
    }
    const up = await fetch(`${url}/healthz`).then(
      (res) => res.ok,
      () => false,
    );
    if (up) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    child,
    output: () => output,
    logLines: () =>
      stdout
        .slice(0, stdout.lastIndexOf('\n') + 1)
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>),
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

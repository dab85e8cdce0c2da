/**
 * The container image's start sequence, as plain processes (no container runtime runs where Nexus is
 * tested): scripts/release.sh, the script the Dockerfile's build stage runs, assembles the release in a
 * temporary directory; the Dockerfile's own CMD and HEALTHCHECK, read from it, run there with its ENV,
 * node as PID 1 of a PID namespace of its own (as in a container), on a schema of the test PostgreSQL.
 * What is not run here is the image build itself (the base image, COPY, USER).
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createNetServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../support/paths.js';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
/** Whether this machine lets the test give node a PID namespace of its own (util-linux unshare, as root). */
const pidNamespaces = spawnSync('unshare', ['--fork', '--pid', 'true']).status === 0;

interface Dockerfile {
  /** Each stage's instructions, continuation lines joined, comments dropped. */
  stages: { name: string | undefined; instructions: { keyword: string; args: string }[] }[];
}

function parseDockerfile(text: string): Dockerfile {
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const stages: Dockerfile['stages'] = [];
  for (const line of lines) {
    const [, keyword, args] = /^(\S+)\s+(.*)$/.exec(line)!;
    if (keyword!.toUpperCase() === 'FROM') stages.push({ name: / AS (\S+)$/i.exec(args!)?.[1], instructions: [] });
    stages.at(-1)?.instructions.push({ keyword: keyword!.toUpperCase(), args: args! });
  }
  return { stages };
}

/** An exec-form command (`["node", "x.js"]`) after an instruction's options. */
function execForm(args: string): string[] {
  const json = args.slice(args.indexOf('['));
  return JSON.parse(json) as string[];
}

/** `ENV A=1 B=2` lines of a stage, as one object. */
function envOf(instructions: { keyword: string; args: string }[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { args } of instructions.filter((i) => i.keyword === 'ENV')) {
    for (const pair of args.split(/\s+/)) {
      const eq = pair.indexOf('=');
      env[pair.slice(0, eq)] = pair.slice(eq + 1);
    }
  }
  return env;
}

const dockerfile = parseDockerfile(readFileSync(join(projectRoot, 'Dockerfile'), 'utf8'));
const buildStage = dockerfile.stages.find((s) => s.name === 'build')!;
const finalStage = dockerfile.stages.at(-1)!;
const imageCmd = execForm(finalStage.instructions.find((i) => i.keyword === 'CMD')!.args);
const healthcheck = execForm(finalStage.instructions.find((i) => i.keyword === 'HEALTHCHECK')!.args);
const imageEnv = envOf(finalStage.instructions);

describe('the Dockerfile', () => {
  it('builds with scripts/release.sh and runs what npm start runs, as the node user, with a HEALTHCHECK that needs no curl', () => {
    expect(buildStage.instructions.map((i) => `${i.keyword} ${i.args}`)).toContain('RUN scripts/release.sh /release');
    expect(finalStage.instructions.map((i) => `${i.keyword} ${i.args}`)).toContain('COPY --from=build /release /app');
    expect(finalStage.instructions.find((i) => i.keyword === 'USER')?.args).toBe('node');
    expect(finalStage.instructions.find((i) => i.keyword === 'WORKDIR')?.args).toBe('/app');
    const start = (JSON.parse(readFileSync(join(projectRoot, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
    expect(imageCmd.join(' ')).toBe(start);
    expect(healthcheck).toEqual(['node', 'dist/healthcheck.js']);
    expect(imageEnv).toMatchObject({ NODE_ENV: 'production', HOST: '0.0.0.0' });
  });
});

describe.runIf(usesPostgres)('the release, started as the image starts it', () => {
  const databaseUrl = process.env.TEST_DATABASE_URL!;
  const schema = `t_release_${randomBytes(5).toString('hex')}`;
  const managementKey = `nx-mgmt-${randomBytes(24).toString('hex')}`;
  const encryptionKey = randomBytes(32).toString('base64');
  let release: string;
  let port: number;

  beforeAll(async () => {
    release = mkdtempSync(join(tmpdir(), 'nexus-release-'));
    // As the image's build stage runs it (the test's checkout has run npm ci already).
    await promisify(execFile)('sh', ['scripts/release.sh', release], { cwd: projectRoot, maxBuffer: 16 * 2 ** 20 });
  }, 180_000);

  afterAll(async () => {
    rmSync(release, { recursive: true, force: true });
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(`drop schema if exists "${schema}" cascade`).finally(() => client.end());
  });

  /** The container's environment: the image's ENV, then what a deployment sets. */
  function containerEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH,
      ...imageEnv,
      PORT: String(port),
      NEXUS_DATA_DIR: join(release, 'data'),
      DATABASE_URL: databaseUrl,
      NEXUS_DATABASE_SCHEMA: schema,
      NEXUS_ENCRYPTION_KEY: encryptionKey,
      NEXUS_MANAGEMENT_KEY: managementKey,
      ...extra,
    };
  }

  it('holds the compiled server, its migrations and production dependencies, and no TypeScript sources', () => {
    expect(existsSync(join(release, 'dist', 'server.js'))).toBe(true);
    expect(existsSync(join(release, 'src'))).toBe(false);
    const sources = readdirSync(join(projectRoot, 'migrations')).filter((f) => f.endsWith('.ts'));
    const compiled = readdirSync(join(release, 'dist', 'migrations')).filter((f) => f.endsWith('.js'));
    expect(compiled.map((f) => f.replace(/\.js$/, '.ts'))).toEqual(sources);
    for (const dev of ['tsx', 'vitest', 'esbuild', '@hey-api/openapi-ts'])
      expect(existsSync(join(release, 'node_modules', dev)), dev).toBe(false);
    for (const runtime of ['express', 'knex', 'pg']) expect(existsSync(join(release, 'node_modules', runtime)), runtime).toBe(true);
    // The API reference is one prebuilt file in dist/: none of its build tool chain is installed.
    expect(existsSync(join(release, 'dist', 'docs', 'standalone.js'))).toBe(true);
    for (const toolChain of ['@scalar/api-reference', 'vue', '@phosphor-icons/core', 'typescript']) {
      expect(existsSync(join(release, 'node_modules', toolChain)), toolChain).toBe(false);
    }
  });

  it('takes at most 150 MB on disk', () => {
    const du = spawnSync('du', ['-sk', release], { encoding: 'utf8' });
    expect(du.status, du.stderr).toBe(0);
    const megabytes = Number(du.stdout.split(/\s/)[0]) / 1024;
    console.log(`release directory: ${megabytes.toFixed(1)} MB (du -sk)`);
    expect(megabytes).toBeLessThanOrEqual(150);
  });

  it('is healthy once ready, answers, records its migrations by their source names, and stops on SIGTERM with 0', async () => {
    port = await freePort();
    // Nothing listens yet: the HEALTHCHECK fails.
    expect(runHealthcheck(containerEnv()).status).toBe(1);

    const server = startRelease(containerEnv());
    try {
      await waitUntilReady(server, port);
      expect(runHealthcheck(containerEnv()).status).toBe(0);

      const created = await fetch(`http://127.0.0.1:${port}/admin/v1/workspaces`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${managementKey}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: 'from-the-release' }),
      });
      expect(created.status).toBe(201);
      const reference = await fetch(`http://127.0.0.1:${port}/docs/standalone.js`);
      expect(reference.status).toBe(200);
      expect(reference.headers.get('content-type')).toMatch(/^application\/javascript/);
      expect((await reference.text()).length).toBeGreaterThan(100_000);

      // A database migrated from dist/ is up to date for the sources, and the other way round.
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      const { rows } = await client.query(`select name from "${schema}".knex_migrations order by name`).finally(() => client.end());
      expect(rows.map((r) => r.name)).toEqual(readdirSync(join(projectRoot, 'migrations')).filter((f) => f.endsWith('.ts')));

      const started = Date.now();
      server.node().kill('SIGTERM');
      expect(await server.exited).toBe(0);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(server.output()).toContain('"msg":"shutting down"');
    } finally {
      server.stop();
    }
  }, 90_000);

  it('ends at once on a SIGTERM that comes while it starts (the database not answering yet)', async () => {
    // A database that accepts connections and never answers holds the start-up in its first query.
    const held = new Set<Socket>();
    const blackhole: Server = createNetServer((socket) => {
      held.add(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((r) => blackhole.listen(0, '127.0.0.1', r));
    const silent = new URL(databaseUrl);
    silent.port = String((blackhole.address() as AddressInfo).port);
    port = await freePort();
    const server = startRelease(containerEnv({ DATABASE_URL: silent.toString() }));
    try {
      for (let i = 0; i < 300 && held.size === 0; i++) await new Promise((r) => setTimeout(r, 100));
      expect(held.size, 'the server connected to the database').toBeGreaterThan(0);
      const started = Date.now();
      server.node().kill('SIGTERM');
      expect(await server.exited).toBe(0);
      expect(Date.now() - started).toBeLessThan(3000);
      expect(server.output()).not.toContain('"msg":"listening"');
    } finally {
      server.stop();
      for (const s of held) s.destroy();
      blackhole.close();
    }
  }, 60_000);

  function runHealthcheck(env: NodeJS.ProcessEnv) {
    const [command, ...args] = healthcheck;
    return spawnSync(command!, args, { cwd: release, env, encoding: 'utf8', timeout: 10_000 });
  }

  /**
   * The image's CMD in the release directory: node as PID 1 of a new PID namespace where the machine
   * allows one (there, a signal without a handler is dropped, as in a container), a plain child otherwise.
   */
  function startRelease(env: NodeJS.ProcessEnv) {
    const [command, ...args] = imageCmd;
    const child: ChildProcess = pidNamespaces
      ? spawn('unshare', ['--fork', '--pid', '--kill-child', '--', command!, ...args], { cwd: release, env })
      : spawn(command!, args, { cwd: release, env });
    let output = '';
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    /** The node process: unshare's only child (unshare waits for it and exits with its status). */
    const node = (): { kill(signal: NodeJS.Signals): void } => {
      if (!pidNamespaces) return child;
      const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).map(Number);
      expect(children).toHaveLength(1);
      return { kill: (signal) => process.kill(children[0]!, signal) };
    };
    return {
      node,
      exited,
      output: () => output,
      stop: () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      },
    };
  }
});

async function waitUntilReady(server: { output(): string; exited: Promise<number | null> }, port: number): Promise<void> {
  let exited = false;
  void server.exited.then(() => (exited = true));
  for (let i = 0; i < 600; i++) {
    if (exited) throw new Error(`the release exited before it was ready:\n${server.output()}`);
    // Its own listening line first: a free port found earlier may have been taken since by another file's process,
    // whose /readyz would answer for it.
    if (!server.output().includes('"msg":"listening"')) {
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    const status = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (res) => res.status,
      () => 0,
    );
    if (status === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the release was not ready within 60 s:\n${server.output()}`);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

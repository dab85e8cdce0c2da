/**
 * The real entry points as separate processes: `npm start` (dist/server.js) and the
 * CLI (dist/cli.js), as built by the e2e projects' global setup, on their own schema
 * of the test PostgreSQL.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../generated/client/client/index.js';
import { createWorkspace, getWorkspace, listWorkspaces } from '../support/sdk.js';
import { contractFetch } from '../support/contract.js';
import { projectRoot } from '../support/paths.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';
import { TEST_ENCRYPTION_KEY } from '../support/test-app.js';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: database.url,
    NEXUS_DATABASE_SCHEMA: database.schema,
    NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    NEXUS_LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    ...extra,
  };
}

function run(
  script: string,
  args: string[],
  extra: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script, ...args], { cwd: projectRoot, env: env(extra) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

async function startServer(
  port: number,
  extra: Record<string, string> = {},
): Promise<{ child: ChildProcess; output: () => string; exited: Promise<number> }> {
  const child = spawn(process.execPath, ['dist/server.js'], { cwd: projectRoot, env: env({ PORT: String(port), ...extra }) });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
  const deadline = Date.now() + 45_000;
  while (!output.includes('"msg":"listening"')) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`server did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, output: () => output, exited };
}

/**
 * A port free as it is asked for, which the system picked: a random one was, at times, one another test's server had
 * been given by the system meanwhile.
 */
async function port(): Promise<number> {
  const probe = createNetServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port: free } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return free;
}

describe.runIf(usesPostgres)('npm start and the CLI', () => {
  it('generates a root key on first start, prints it once, and stops cleanly on SIGTERM', async () => {
    const p = await port();
    // A first start on a port another server holds: one line naming the address, exit 1, and no key made or printed.
    const holder = createNetServer();
    await new Promise<void>((r) => holder.listen(p, '127.0.0.1', r));
    const taken = await run('dist/server.js', [], { PORT: String(p) });
    await new Promise((r) => holder.close(r));
    expect(taken.code).toBe(1);
    expect(taken.stderr.trim().split('\n')).toEqual([
      `Nexus cannot listen on 127.0.0.1:${p}: port ${p} is in use. Set PORT to a free port (or stop what holds it).`,
    ]);
    expect(taken.stdout + taken.stderr).not.toMatch(/nx-mgmt-|\bat .*\(|Error:/);
    expect(await database.db('management_keys').where({ is_root: true }).count({ n: '*' })).toEqual([{ n: 0n }]);

    const first = await startServer(p);
    const key = /nx-mgmt-[A-Za-z0-9_-]{43}/.exec(first.output())?.[0];
    expect(key).toBeTruthy();
    // The startup line names where the console and the API reference are.
    const listening = JSON.parse(
      first
        .output()
        .split('\n')
        .find((l) => l.includes('"msg":"listening"'))!,
    );
    expect(listening).toMatchObject({
      url: `http://127.0.0.1:${p}`,
      console: `http://127.0.0.1:${p}/console/`,
      docs: `http://127.0.0.1:${p}/docs`,
    });
    const client = createClient({ baseUrl: `http://127.0.0.1:${p}`, fetch: contractFetch(), headers: { Authorization: `Bearer ${key}` } });
    const ws = await createWorkspace({ client, body: { name: 'from-process' } });
    expect(ws.response.status).toBe(201);
    // The key is printed, never logged: no JSON log line holds it.
    for (let i = 0; i < 50 && !first.output().includes('"msg":"request"'); i++) await new Promise((r) => setTimeout(r, 50));
    const logLines = first
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'));
    expect(logLines.some((l) => l.includes('"msg":"request"'))).toBe(true);
    expect(logLines.join('\n')).not.toContain(key);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const second = await startServer(p, { NEXUS_DATABASE_POOL_MAX: '3' });
    expect(second.output()).not.toMatch(/nx-mgmt-/);
    // Warmed before it says ready: the gateway pool's connections are open before its first call.
    const warmed = JSON.parse(
      second
        .output()
        .split('\n')
        .find((l) => l.includes('"msg":"warmed up"'))!,
    ) as { connections: number };
    expect(warmed.connections).toBe(3);
    const metrics = await (await fetch(`http://127.0.0.1:${p}/metrics`)).text();
    expect(metrics).toContain('nexus_db_pool_connections_idle{pool="gateway"} 3');
    expect(second.output()).toContain('a root Management Key exists: it was printed once, on the first start');
    const again = await getWorkspace({ client, path: { workspaceId: ws.data!.id } });
    expect(again.response.status).toBe(200);

    // A scoped key from the CLI sees only its workspace.
    const other = await createWorkspace({ client, body: { name: 'not-for-the-scoped-key' } });
    const cli = await run('dist/cli.js', ['management-keys', 'create', '--workspace', ws.data!.id, '--name', 'ci']);
    expect(cli.code).toBe(0);
    const scopedKey = /nx-mgmt-[A-Za-z0-9_-]{43}/.exec(cli.stdout)?.[0];
    expect(scopedKey).toBeTruthy();
    const scoped = createClient({
      baseUrl: `http://127.0.0.1:${p}`,
      fetch: contractFetch(),
      headers: { Authorization: `Bearer ${scopedKey}` },
    });
    const list = await listWorkspaces({ client: scoped, query: { limit: 100 } });
    expect(list.data!.map((w) => w.id)).toEqual([ws.data!.id]);
    expect((await getWorkspace({ client: scoped, path: { workspaceId: other.data!.id } })).response.status).toBe(404);
    const stored = await database.db('management_keys').where({ name: 'ci' }).first();
    expect(stored.key_hash).not.toContain(scopedKey!.slice(8));

    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 120_000);

  it('with the database gone, /readyz answers 503 within its bound and the log stays one JSON object per line', async () => {
    // The server reaches PostgreSQL through a relay this test can cut (refuse) or black-hole (accept, never answer).
    const target = new URL(database.url!);
    let mode: 'up' | 'cut' | 'blackhole' = 'up';
    const sockets = new Set<Socket>();
    const relay = createNetServer((client) => {
      if (mode === 'cut') return void client.destroy();
      sockets.add(client);
      client.on('close', () => sockets.delete(client));
      client.on('error', () => {});
      if (mode === 'blackhole') return;
      const upstream = connect(Number(target.port || 5432), target.hostname);
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const relayUrl = new URL(database.url!);
    relayUrl.port = String((relay.address() as AddressInfo).port);
    const p = await port();
    const server = await startServer(p, { DATABASE_URL: relayUrl.toString(), NEXUS_MANAGEMENT_KEY: 'nx-mgmt-relay-test-0123456789abcdef' });
    try {
      expect((await fetch(`http://127.0.0.1:${p}/readyz`)).status).toBe(200);
      const cut = (next: typeof mode) => {
        mode = next;
        for (const s of sockets) s.destroy();
      };
      cut('cut');
      const refused = await fetch(`http://127.0.0.1:${p}/readyz`);
      expect(refused.status).toBe(503);
      expect((await refused.json()).error.code).toBe('not_ready');
      const admin = await fetch(`http://127.0.0.1:${p}/admin/v1/workspaces`, {
        headers: { Authorization: 'Bearer nx-mgmt-not-a-key-0123456789abcdef' },
      });
      // The key cannot be checked: the database is unavailable, not the key wrong (503, to be retried).
      expect(admin.status).toBe(503);
      expect(admin.headers.get('retry-after')).toBe('2');
      expect((await admin.json()).error.code).toBe('database_unavailable');
      cut('blackhole');
      const started = Date.now();
      expect((await fetch(`http://127.0.0.1:${p}/readyz`)).status).toBe(503);
      expect(Date.now() - started).toBeLessThan(5000);
      expect((await fetch(`http://127.0.0.1:${p}/healthz`)).status).toBe(200);
      cut('up');
      expect((await fetch(`http://127.0.0.1:${p}/readyz`)).status).toBe(200);
      // knex's own connection warnings come as log lines too, not as stack traces on stdout.
      const lines = server
        .output()
        .split('\n')
        .filter((l) => l.trim());
      expect(lines.filter((l) => !l.startsWith('{'))).toEqual([]);
      expect(lines.some((l) => l.includes('"msg":"database"'))).toBe(true);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      relay.close();
      for (const s of sockets) s.destroy();
    }
  }, 120_000);

  it('with PostgreSQL unreachable at start, it serves /healthz meanwhile and gives up after NEXUS_DATABASE_STARTUP_TIMEOUT_MS with one line', async () => {
    const p = await port();
    const child = spawn(process.execPath, ['dist/server.js'], {
      cwd: projectRoot,
      env: env({ PORT: String(p), DATABASE_URL: 'postgres://postgres@127.0.0.1:1/postgres', NEXUS_DATABASE_STARTUP_TIMEOUT_MS: '5000' }),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
    try {
      // It listens while it waits: alive, not ready, and what needs the database is refused 503.
      const deadline = Date.now() + 30_000;
      while (
        !(await fetch(`http://127.0.0.1:${p}/healthz`).then(
          (r) => r.ok,
          () => false,
        ))
      ) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`server did not listen:\n${stdout}${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const waitingSince = Date.now();
      const ready = await fetch(`http://127.0.0.1:${p}/readyz`);
      expect(ready.status).toBe(503);
      expect((await ready.json()).error.code).toBe('not_ready');
      expect(await exited).toBe(1);
      // About 5 s after it began to wait (it listened a little after).
      expect(Date.now() - waitingSince).toBeGreaterThan(3000);
      expect(stderr.trim().split('\n')).toEqual([
        'Nexus cannot start: the database did not answer within 5 s (NEXUS_DATABASE_STARTUP_TIMEOUT_MS): connect ECONNREFUSED 127.0.0.1:1',
      ]);
      const lines = stdout.split('\n').filter(Boolean);
      expect(lines.every((l) => l.startsWith('{'))).toBe(true);
      expect(lines.filter((l) => l.includes('the database is unavailable: waiting for it'))).toHaveLength(1);
      expect(stdout + stderr).not.toMatch(/\bat .*\(|Error:/);
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);

  it('refuses bad configuration with a clear message', async () => {
    const bad = await run('dist/server.js', [], { PORT: 'not-a-port' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('PORT must be integer');
    const prod = await run('dist/server.js', [], { NODE_ENV: 'production', NEXUS_ENCRYPTION_KEY: '' });
    expect(prod.code).toBe(1);
    expect(prod.stderr).toContain('NEXUS_ENCRYPTION_KEY is required');
    const wait = await run('dist/server.js', [], { NEXUS_DATABASE_STARTUP_TIMEOUT_MS: '-1' });
    expect(wait.code).toBe(1);
    expect(wait.stderr.trim()).toBe('Invalid configuration: NEXUS_DATABASE_STARTUP_TIMEOUT_MS must be >= 0');
  }, 30_000);

  it('the CLI refuses an unknown workspace and unknown commands', async () => {
    const missing = await run('dist/cli.js', ['management-keys', 'create', '--workspace', '01a20000-0000-7000-8000-000000000000']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('not found');
    // An id that is not a UUID gets a plain message, not a database error.
    const malformed = await run('dist/cli.js', ['management-keys', 'create', '--workspace', 'notauuid']);
    expect(malformed.code).toBe(1);
    expect(malformed.stderr.trim()).toBe("error: workspace id 'notauuid' is not a UUID");
    const badRevoke = await run('dist/cli.js', ['management-keys', 'revoke', 'notauuid']);
    expect(badRevoke.code).toBe(1);
    expect(badRevoke.stderr.trim()).toBe("error: key id 'notauuid' is not a UUID");
    const migrate = await run('dist/cli.js', ['migrate']);
    expect(migrate.code).toBe(0);
    expect(migrate.stdout).toContain('already up to date');
  }, 60_000);

  it('the CLI answers --help and a wrong command line at once, with the usage and no stack', async () => {
    // Read before any database is opened: a data dir that does not exist stays so.
    const dataDir = join(mkdtempSync(join(tmpdir(), 'nexus-cli-')), 'data');
    const embedded = { DATABASE_URL: '', NEXUS_DATABASE_SCHEMA: '', NEXUS_DATA_DIR: dataDir };
    try {
      const help = await run('dist/cli.js', ['--help'], embedded);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('usage:');
      expect(help.stderr).toBe('');
      const answer = await run('dist/cli.js', ['management-keys', 'create', '--workspace', 'x', '--bogus'], embedded);
      expect(answer.code).toBe(2);
      expect(answer.stderr.startsWith("error: Unknown option '--bogus'"), answer.stderr).toBe(true);
      expect(answer.stderr).toContain('usage:');
      expect(answer.stderr).not.toContain('    at ');
      expect(existsSync(dataDir)).toBe(false);
    } finally {
      rmSync(dirname(dataDir), { recursive: true, force: true });
    }
  }, 60_000);

  it('the CLI says in one line that the database cannot be reached', async () => {
    const down = await run('dist/cli.js', ['management-keys', 'list'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/postgres' });
    expect(down.code).toBe(1);
    expect(down.stderr.trim()).toBe('error: connect ECONNREFUSED 127.0.0.1:1 (ECONNREFUSED)');
    expect(down.stdout).toBe('');
  }, 30_000);
});

describe('the embedded database', () => {
  it('processes starting at once on a new data dir all take the one encryption key it keeps', async () => {
    const root = mkdtempSync(join(tmpdir(), 'nexus-key-'));
    try {
      const dirs = Array.from({ length: 20 }, (_, i) => join(root, String(i)));
      const go = join(root, 'go');
      // Each process, once loaded, waits for the go file, then loads the configuration on each new data dir at the
      // same instants as the others.
      const script =
        `import { existsSync, readFileSync } from 'node:fs';\n` +
        `import { loadConfig } from './dist/config.js';\n` +
        `console.log('ready');\n` +
        `while (!existsSync(${JSON.stringify(go)})) {}\n` +
        `const at = Number(readFileSync(${JSON.stringify(go)}, 'utf8'));\n` +
        `for (const [i, dir] of ${JSON.stringify(dirs)}.entries()) {\n` +
        `  while (Date.now() < at + i * 25) {}\n` +
        `  console.log(loadConfig({ NEXUS_DATA_DIR: dir }, () => {}).encryptionKey.toString('base64'));\n` +
        `}\n`;
      const children = Array.from({ length: 8 }, () => {
        // The built configuration (dist/, as `npm start` runs it), with plain node: no transform in each of the eight.
        const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: projectRoot, env: env() });
        let stdout = '';
        child.stdout.on('data', (d) => (stdout += d));
        return { stdout: () => stdout, exited: new Promise<void>((resolve) => child.on('exit', () => resolve())) };
      });
      for (
        const deadline = Date.now() + 45_000;
        !children.every((c) => c.stdout().startsWith('ready'));
        await new Promise((r) => setTimeout(r, 50))
      ) {
        if (Date.now() > deadline) throw new Error('the processes did not start');
      }
      writeFileSync(go, String(Date.now() + 300));
      await Promise.all(children.map((c) => c.exited));
      const outputs = children.map((c) => c.stdout().trim().split('\n').slice(1));
      dirs.forEach((dir, i) => {
        const kept = readFileSync(join(dir, 'encryption.key'), 'utf8').trim();
        expect(outputs.map((lines) => lines[i])).toEqual(outputs.map(() => kept));
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 60_000);

  it('is used by one process at a time: a start on a taken port leaves it (and makes no key), the CLI refuses while the server runs, and takes over a dead holder (its pid reused or not)', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'nexus-lock-'));
    const embedded = { DATABASE_URL: '', NEXUS_DATABASE_SCHEMA: '', NEXUS_DATA_DIR: dataDir };
    try {
      // A first start on a taken port: one line, exit 1, the data dir left free, and no key made (the next start makes it).
      const p = await port();
      const holder = createNetServer();
      await new Promise<void>((r) => holder.listen(p, '127.0.0.1', r));
      const taken = await run('dist/server.js', [], { ...embedded, PORT: String(p) });
      await new Promise((r) => holder.close(r));
      expect(taken.code).toBe(1);
      expect(taken.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(new RegExp(`^Nexus cannot listen on 127\\.0\\.0\\.1:${p}: port ${p} is in use`)),
      ]);
      expect(taken.stdout + taken.stderr).not.toMatch(/nx-mgmt-/);
      const server = await startServer(p, embedded);
      expect(server.output()).toMatch(/Nexus generated a root Management Key[^]*nx-mgmt-[A-Za-z0-9_-]{43}/);
      const refused = await run('dist/cli.js', ['management-keys', 'list'], embedded);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        `error: The embedded database in ${join(dataDir, 'pgdata')} is in use by another Nexus process (pid ${server.child.pid})`,
      );
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      // Its stderr beside the exit code, so a failure says why.
      const after = await run('dist/cli.js', ['management-keys', 'list'], embedded);
      expect({ code: after.code, stderr: after.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
      // A lock left by a process that is gone (killed, crashed) is taken over.
      const gone = spawnSync(process.execPath, ['-e', '']).pid;
      writeFileSync(join(dataDir, 'pgdata', 'nexus.pid'), String(gone));
      expect((await run('dist/cli.js', ['management-keys', 'list'], embedded)).code).toBe(0);
      // A server killed (-9) leaves its lock; by the next start its pid may be another live process's (pids repeat
      // after a reboot, and from one start of a container to the next). That process is not the holder: taken over.
      const crashed = await startServer(await port(), embedded);
      crashed.child.kill('SIGKILL');
      await crashed.exited;
      const lock = join(dataDir, 'pgdata', 'nexus.pid');
      writeFileSync(lock, readFileSync(lock, 'utf8').replace(/^\d+/, String(process.pid)));
      const reused = await run('dist/cli.js', ['management-keys', 'list'], embedded);
      expect(reused.stderr).toBe('');
      expect(reused.code).toBe(0);
      expect(existsSync(lock)).toBe(false);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});

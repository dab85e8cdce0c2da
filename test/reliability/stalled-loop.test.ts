/**
 * A Nexus process whose event loop is held up, with real processes. The loop is blocked by a test-only
 * module loaded into the child (test/support/block-loop.mjs, through NODE_OPTIONS: on SIGUSR2 a chain of
 * promises that never leaves the microtask queue); nothing of it is in the server. Each child has its own
 * schema on the test PostgreSQL (or, without one, its own embedded database).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startNexusProcess, type NexusProcess } from '../support/nexus-process.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';
import { TEST_ROOT_KEY } from '../support/test-app.js';

const BLOCK_LOOP = join(import.meta.dirname, '..', 'support', 'block-loop.mjs');
const BLOCKED_MS = 1000;
// Each test starts its own child process (the built server: a second or more on a busy machine).

let database: TestDatabase;
let dataDir: string;
const children: NexusProcess[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'nexus-stalled-'));
});
afterAll(async () => {
  for (const child of children) await child.kill();
  await database?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function child(env: Record<string, string> = {}): Promise<NexusProcess> {
  const nexus = await startNexusProcess({
    ...(database.url ? { DATABASE_URL: database.url, NEXUS_DATABASE_SCHEMA: database.schema! } : {}),
    NEXUS_DATA_DIR: mkdtempSync(join(dataDir, 'child-')),
    NEXUS_EVENT_LOOP_BLOCKED_MS: String(BLOCKED_MS),
    NODE_OPTIONS: `--import ${BLOCK_LOOP}`,
    ...env,
  });
  children.push(nexus);
  return nexus;
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const blockedLogged = (nexus: NexusProcess) => nexus.logLines().some((l) => String(l.msg).startsWith('the event loop is blocked'));

function metric(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
}

it('a stalled loop shows in /metrics and /healthz (503 event_loop_blocked), and the watchdog logs it with its stack', async () => {
  const nexus = await child({ BLOCK_LOOP_MS: '3000' });
  expect((await fetch(`${nexus.url}/healthz`)).status).toBe(200);
  expect(await (await fetch(`${nexus.url}/metrics`)).text()).toContain('nexus_event_loop_lag_seconds');

  nexus.child.kill('SIGUSR2');
  await until('the watchdog to log the stall', () => blockedLogged(nexus));
  // Answered once the loop turns again.
  const health = await fetch(`${nexus.url}/healthz`);
  expect(health.status).toBe(503);
  expect((await health.json()).error).toMatchObject({ code: 'event_loop_blocked', type: 'api_error' });
  const metrics = await (await fetch(`${nexus.url}/metrics`)).text();
  expect(metric(metrics, 'nexus_event_loop_lag_seconds')).toBeGreaterThanOrEqual(2);
  expect(metric(metrics, 'nexus_event_loop_stalls_total')).toBeGreaterThanOrEqual(1);

  const lines = nexus.logLines();
  // The main thread's stack, taken while it was held up: the test module's loop.
  expect(lines.find((l) => l.msg === 'where the blocked event loop is')?.stack).toContain('block-loop.mjs');
  expect(lines.some((l) => l.msg === 'the event loop was blocked' && Number(l.ms) >= 2000)).toBe(true);
  await until('the watchdog to see the loop turn', () =>
    nexus.logLines().some((l) => String(l.msg).startsWith('the event loop turns again')),
  );
  // Twice NEXUS_EVENT_LOOP_BLOCKED_MS after the stall, healthy again.
  await until('/healthz to answer 200 again', async () => (await fetch(`${nexus.url}/healthz`)).status === 200);
  expect(await nexus.stop()).toBe(0);
}, 120_000);

it('SIGTERM ends a process whose loop is blocked', async () => {
  const nexus = await child({ BLOCK_LOOP_MS: '600000' });
  nexus.child.kill('SIGUSR2');
  await until('the watchdog to log the stall', () => blockedLogged(nexus));
  nexus.child.kill('SIGTERM');
  const exit = await Promise.race([nexus.exited, new Promise((r) => setTimeout(() => r('still running'), 10_000))]);
  expect(exit).toBe('SIGTERM');
}, 120_000);

it('a second SIGTERM during the drain exits at once', async () => {
  const nexus = await child({ NEXUS_SHUTDOWN_TIMEOUT_MS: '120000' });
  // A request in flight (headers read, body pending) holds the drain.
  const { port } = new URL(nexus.url);
  const socket = connect(Number(port), '127.0.0.1');
  socket.on('error', () => {});
  await new Promise((r) => socket.once('connect', r));
  const body = JSON.stringify({ name: 'in-flight' });
  socket.write(
    `POST /admin/v1/workspaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_ROOT_KEY}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
  );
  await new Promise((r) => setTimeout(r, 200));
  nexus.child.kill('SIGTERM');
  await until('the shutdown to start', () => nexus.logLines().some((l) => l.msg === 'shutting down'));
  await new Promise((r) => setTimeout(r, 300));
  expect(nexus.child.exitCode).toBeNull();

  nexus.child.kill('SIGTERM');
  const exit = await Promise.race([nexus.exited, new Promise((r) => setTimeout(() => r('still running'), 10_000))]);
  expect(exit).toBe(1);
  socket.destroy();
}, 120_000);

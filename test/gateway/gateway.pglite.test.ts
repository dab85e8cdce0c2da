/**
 * The embedded default (`npm start` without DATABASE_URL) runs the gateway on
 * PGlite, where the gateway shares the one connection and its named statements
 * run as ordinary queries: a metered call there is admitted on a lease, settled
 * exactly, and the lease comes back. A process killed holding a lease leaves it
 * to the next start on the data dir, which releases it at once.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, listen, type NexusApp, type RunningServer } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/observability/logger.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { projectRoot } from '../support/paths.js';
import { TEST_ENCRYPTION_KEY, TEST_ROOT_KEY } from '../support/test-app.js';

const KEY = `${SECRET_MARKER}-upstream-pglite-0123456789`;
let up: FakeUpstream;
let nexus: NexusApp;
let running: RunningServer;
let dataDir: string;

function embeddedEnv(dir: string): Record<string, string> {
  return {
    NODE_ENV: 'test',
    PORT: '0',
    NEXUS_DATA_DIR: dir,
    NEXUS_MANAGEMENT_KEY: TEST_ROOT_KEY,
    NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
    NEXUS_KEY_ENVIRONMENT: 'test',
    NEXUS_LOG_LEVEL: 'warn',
  };
}

async function admin(method: string, path: string, body?: unknown, base = running.url): Promise<any> {
  const res = await fetch(`${base}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const json = res.status === 204 ? null : await res.json();
  expect(res.status, `${method} ${path}: ${JSON.stringify(json)}`).toBeLessThan(300);
  return json;
}

beforeAll(async () => {
  up = await startOpenAiUpstream({ apiKey: KEY });
  dataDir = mkdtempSync(join(tmpdir(), 'nexus-pglite-'));
  const config = loadConfig(embeddedEnv(dataDir));
  nexus = await buildApp(config, { logger: createLogger('warn') });
  running = await listen(nexus, 0, '127.0.0.1', 2000);
}, 120_000);
afterAll(async () => {
  await running?.shutdown();
  await up?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** A workspace, a connection to the fake upstream and a user with a key on a 1000-unit plan, on the server at `base`. */
async function tenant(base: string) {
  const ws = await admin('POST', '/workspaces', { name: 'embedded' }, base);
  const conn = await admin(
    'POST',
    `/workspaces/${ws.id}/provider-connections`,
    {
      name: 'upstream',
      protocolProfile: 'openai',
      baseUrl: up.url,
      apiKey: KEY,
    },
    base,
  );
  const plan = await admin('POST', `/workspaces/${ws.id}/plans`, { key: 'p', name: 'P', billingInterval: 'MONTH' }, base);
  const strategy = await admin(
    'POST',
    `/workspaces/${ws.id}/plan-strategies/quota`,
    {
      key: 'q',
      resetInterval: 'MONTH',
      quotaUnits: '1000',
      inputMultiplierPpm: '1000000',
      outputMultiplierPpm: '2000000',
      cachedInputMultiplierPpm: '1000000',
      maxOutputTokens: 100,
    },
    base,
  );
  await admin('POST', `/plan-strategies/${strategy.id}/publish`, undefined, base);
  await admin(
    'POST',
    `/plans/${plan.id}/strategy-bindings`,
    { strategyId: strategy.id, effectiveFrom: new Date(Date.now() - 86_400_000).toISOString() },
    base,
  );
  await admin('POST', `/plans/${plan.id}/publish`, undefined, base);
  const user = await admin(
    'POST',
    `/workspaces/${ws.id}/users`,
    { externalUserId: 'u', email: 'u@example.com', planId: plan.id, issueInferenceKey: true },
    base,
  );
  return { ws, conn, user };
}

describe('the gateway on embedded PGlite', () => {
  it('meters calls on a lease and returns every unit', async () => {
    const { conn, user, ws } = await tenant(running.url);
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${conn.gatewayBaseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${user.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0' },
        body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-nexus-metering-status')).toBe('metered');
      await res.text();
    }
    await nexus.gateway.drain();
    const quota = await admin('GET', `/workspace-accesses/${user.access.id}/quota`);
    expect(quota).toMatchObject({ grantedUnits: '1000', reservedUnits: '0', consumedUnits: '60' });
    const events = await admin('GET', `/workspaces/${ws.id}/usage-events?limit=10`);
    expect(events.map((e: { units: string }) => e.units)).toEqual(['20', '20', '20']);
    // The summaries read along the rollup's index (in a transaction of their own) and sum with sum_int8 there too.
    for (const groupBy of ['key', 'access', 'model']) {
      const summary = await admin('GET', `/workspaces/${ws.id}/usage-summary?granularity=hour&groupBy=${groupBy}`);
      const buckets = summary.buckets as { units: string; calls: number }[];
      expect(
        buckets.reduce((n, b) => n + BigInt(b.units), 0n),
        groupBy,
      ).toBe(60n);
      expect(
        buckets.reduce((n, b) => n + b.calls, 0),
        groupBy,
      ).toBe(3);
    }
  }, 60_000);

  it('a server killed holding a lease leaves it to the next start on the data dir, which releases it at once', async () => {
    const crashDir = mkdtempSync(join(tmpdir(), 'nexus-pglite-crash-'));
    // `npm start` in its own process, keeping an unused lease for a minute: the kill finds it HELD.
    const child = spawn(process.execPath, ['dist/server.js'], {
      cwd: projectRoot,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ...embeddedEnv(crashDir),
        // A port the system picks (the server logs it): a random one was taken by another test's server at times.
        PORT: '0',
        HOST: '127.0.0.1',
        NEXUS_QUOTA_LEASE_IDLE_MS: '60000',
        NEXUS_LOG_LEVEL: 'info',
      },
    });
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    try {
      let output = '';
      child.stdout.on('data', (d) => (output += d));
      child.stderr.on('data', (d) => (output += d));
      // The whole line that says where it listens.
      const listening = () => /^.*"msg":"listening".*\n/m.exec(output)?.[0];
      for (const deadline = Date.now() + 45_000; !listening(); await new Promise((r) => setTimeout(r, 100))) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`server did not start:\n${output}`);
      }
      const base = (JSON.parse(listening()!) as { url: string }).url;
      const { conn, user } = await tenant(base);
      const res = await fetch(`${conn.gatewayBaseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${user.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0' },
        body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 }),
      });
      expect(res.status).toBe(200);
      await res.text();
      let before: any;
      for (
        const deadline = Date.now() + 10_000;
        before?.consumedUnits !== '20' && Date.now() < deadline;
        await new Promise((r) => setTimeout(r, 50))
      ) {
        before = await admin('GET', `/workspace-accesses/${user.access.id}/quota`, undefined, base);
      }
      expect(before.consumedUnits).toBe('20');
      expect(BigInt(before.reservedUnits)).toBeGreaterThan(0n);
      child.kill('SIGKILL');
      await exited;

      // The next start: the lock says no other process can hold the lease, so it is released before the first call,
      // not 15 minutes later (the lease TTL); the call recorded before the kill stays charged.
      const config = loadConfig(embeddedEnv(crashDir));
      const restarted = await buildApp(config, { logger: createLogger('warn') });
      const again = await listen(restarted, 0, '127.0.0.1', 2000);
      try {
        const after = await admin('GET', `/workspace-accesses/${user.access.id}/quota`, undefined, again.url);
        expect(after).toMatchObject({ grantedUnits: '1000', reservedUnits: '0', consumedUnits: '20', availableUnits: '980' });
      } finally {
        await again.shutdown();
      }
    } finally {
      child.kill('SIGKILL');
      await exited;
      rmSync(crashDir, { recursive: true, force: true });
    }
  }, 120_000);
});

/**
 * The embedded default (`npm start` without DATABASE_URL) runs the gateway on
 * PGlite, where the gateway shares the one connection and its named statements
 * run as ordinary queries: a metered call there is admitted on a lease, settled
 * exactly, and the lease comes back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, listen, type NexusApp, type RunningServer } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/observability/logger.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { TEST_ENCRYPTION_KEY, TEST_ROOT_KEY } from '../support/test-app.js';

const KEY = `${SECRET_MARKER}-upstream-pglite-0123456789`;
let up: FakeUpstream;
let nexus: NexusApp;
let running: RunningServer;
let dataDir: string;

async function admin(method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${running.url}/admin/v1${path}`, {
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
  const config = loadConfig({
    NODE_ENV: 'test',
    PORT: '0',
    NEXUS_DATA_DIR: dataDir,
    NEXUS_MANAGEMENT_KEY: TEST_ROOT_KEY,
    NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
    NEXUS_KEY_ENVIRONMENT: 'test',
    NEXUS_LOG_LEVEL: 'warn',
  });
  nexus = await buildApp(config, { logger: createLogger('warn'), skipRootKey: true });
  running = await listen(nexus, 0, '127.0.0.1', 2000);
  config.publicUrl = running.url;
}, 120_000);
afterAll(async () => {
  await running?.shutdown();
  await up?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('the gateway on embedded PGlite', () => {
  it('meters calls on a lease and returns every unit', async () => {
    const ws = await admin('POST', '/workspaces', { name: 'embedded' });
    const conn = await admin('POST', `/workspaces/${ws.id}/provider-connections`, {
      name: 'upstream',
      protocolProfile: 'openai',
      baseUrl: up.url,
      apiKey: KEY,
    });
    const plan = await admin('POST', `/workspaces/${ws.id}/plans`, { key: 'p', name: 'P', billingInterval: 'MONTH' });
    const strategy = await admin('POST', `/workspaces/${ws.id}/plan-strategies/quota`, {
      key: 'q',
      resetInterval: 'MONTH',
      quotaUnits: '1000',
      inputMultiplierPpm: '1000000',
      outputMultiplierPpm: '2000000',
      cachedInputMultiplierPpm: '1000000',
      maxOutputTokens: 100,
    });
    await admin('POST', `/plan-strategies/${strategy.id}/publish`);
    await admin('POST', `/plans/${plan.id}/strategy-bindings`, { strategyId: strategy.id, effectiveFrom: new Date(Date.now() - 86_400_000).toISOString() });
    await admin('POST', `/plans/${plan.id}/publish`);
    const user = await admin('POST', `/workspaces/${ws.id}/users`, { externalUserId: 'u', email: 'u@example.com', planId: plan.id, issueInferenceKey: true });

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
  }, 60_000);
});

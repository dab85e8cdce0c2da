/**
 * The request log through HTTP: paths whole (the console's /console prefix too), health probes at debug,
 * the workspace and access ids on a refusal whose key or path named them, and an expected condition
 * (the database away: 503 database_unavailable) in one line without a stack, rate-limited per message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Transport from 'winston-transport';
import { revokeInferenceKey, suspendWorkspaceAccess } from '../../generated/client/sdk.gen.js';
import { buildApp, listen } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createDatabase } from '../../src/db/database.js';
import { createLogger } from '../../src/observability/logger.js';
import { startTcpProxy, type TcpProxy } from '../../scripts/lib/tcp-proxy.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, TEST_ENCRYPTION_KEY, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { createTenant } from '../gateway/gateway-support.js';

const KEY = `${SECRET_MARKER}-logs-upstream-0123456789`;
const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';

let t: TestApp;
let up: FakeUpstream;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

type Line = Record<string, unknown>;

/** The request lines of this app so far (the capture is synchronous; the line is written when the answer closes). */
async function requestLines(logs: string[]): Promise<Line[]> {
  await new Promise((r) => setTimeout(r, 50));
  return logs.map((l) => JSON.parse(l) as Line).filter((l) => l.msg === 'request');
}

async function lineOf(logs: string[], res: Response): Promise<Line> {
  await res.text();
  const id = res.headers.get('x-request-id');
  const line = (await requestLines(logs)).find((l) => l.requestId === id);
  expect(line, `no request line for ${id}`).toBeDefined();
  return line!;
}

describe('request lines', () => {
  it("log the whole path, a mounted router's prefix (/console) included", async () => {
    for (const path of ['/console/', '/console/no-such-file.js']) {
      const line = await lineOf(t.logs, await fetch(`${t.url}${path}?q=secret`));
      expect(line.path).toBe(path);
    }
  });

  it('log health probes at debug: none at info', async () => {
    const ids: string[] = [];
    for (const path of ['/healthz', '/readyz']) {
      const res = await fetch(`${t.url}${path}`);
      expect(res.status).toBe(200);
      await res.text();
      ids.push(res.headers.get('x-request-id')!);
    }
    const lines = await requestLines(t.logs);
    expect(lines.filter((l) => ids.includes(l.requestId as string))).toEqual([]);
    // An ordinary request of the same moment is logged.
    expect(
      await lineOf(t.logs, await fetch(`${t.url}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } })),
    ).toMatchObject({
      level: 'info',
      status: 200,
    });
  });
});

describe('401 and 403 lines', () => {
  it('carry the workspace and access of a key whose row was found: a suspended access, a revoked key', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const call = () =>
      fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-logs', messages: [{ role: 'user', content: 'x' }], max_tokens: 5 }),
      });
    const ids = { workspaceId: tenant.workspaceId, accessId: tenant.accessId };

    expect((await suspendWorkspaceAccess({ client: t.client, path: { accessId: tenant.accessId } })).response.status).toBe(200);
    t.nexus.gateway.clearCache();
    const suspended = await call();
    expect(suspended.status).toBe(403);
    expect(await lineOf(t.logs, suspended)).toMatchObject({ status: 403, errorCode: 'access_suspended', ...ids });

    const revoked = await revokeInferenceKey({ client: t.client, path: { accessId: tenant.accessId, keyId: tenant.apiKeyId } });
    expect(revoked.response.status).toBe(204);
    t.nexus.gateway.clearCache();
    const refused = await call();
    expect(refused.status).toBe(401);
    expect(await lineOf(t.logs, refused)).toMatchObject({ status: 401, errorCode: 'invalid_inference_key', ...ids });
  });

  it('carry the workspace and access of a call refused for its model', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, allowedModels: ['gpt-allowed'] });
    const res = await fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-other', messages: [{ role: 'user', content: 'x' }], max_tokens: 5 }),
    });
    expect(res.status).toBe(403);
    await t.nexus.gateway.drain();
    expect(await lineOf(t.logs, res)).toMatchObject({
      status: 403,
      errorCode: 'model_not_allowed',
      workspaceId: tenant.workspaceId,
      accessId: tenant.accessId,
    });
  });

  it("carry the workspace and access an Admin API path names, whoever's key it was", async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const res = await fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}`, {
      headers: { authorization: 'Bearer nx-mgmt-wrong-0123456789abcdefghijkl' },
    });
    expect(res.status).toBe(401);
    expect(await lineOf(t.logs, res)).toMatchObject({ status: 401, errorCode: 'invalid_management_key', workspaceId: tenant.workspaceId });
    const access = await fetch(`${t.url}/admin/v1/workspace-accesses/${tenant.accessId}`, { headers: {} });
    expect(access.status).toBe(401);
    expect(await lineOf(t.logs, access)).toMatchObject({ status: 401, accessId: tenant.accessId });
  });

  it('carry no ids for a key nobody has', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const res = await fetch(`${tenant.gatewayBaseUrl}/v1/models`, {
      headers: { authorization: 'Bearer nx-test-nobody-0123456789abcdefghij' },
    });
    expect(res.status).toBe(401);
    const line = await lineOf(t.logs, res);
    expect(line.workspaceId).toBeUndefined();
    expect(line.accessId).toBeUndefined();
  });
});

describe.runIf(usesPostgres)('the database away', () => {
  let proxy: TcpProxy;
  const logs: string[] = [];
  let close: (() => Promise<void>) | undefined;

  afterAll(async () => {
    await close?.();
    await proxy?.close();
  });

  it('is one warn line per request without a stack (database_unavailable), rate-limited, for the Admin API and the gateway', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const url = new URL(t.database.directUrl ?? t.database.url!);
    proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.port);
    class Capture extends Transport {
      override log(info: Record<string, unknown>, next: () => void) {
        logs.push(JSON.stringify(info));
        next();
      }
    }
    const config = loadConfig({
      NODE_ENV: 'test',
      NEXUS_MANAGEMENT_KEY: TEST_ROOT_KEY,
      NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
      NEXUS_KEY_ENVIRONMENT: 'test',
      DATABASE_URL: url.toString(),
      ...(t.database.schema ? { NEXUS_DATABASE_SCHEMA: t.database.schema } : {}),
      NEXUS_DATA_DIR: t.config.dataDir,
    });
    const logger = createLogger('debug', [new Capture()], undefined, { lines: 5, windowMs: 3000 });
    // As buildApp makes its own: knex's warnings (a failed connection) as log lines, their first line.
    const db = createDatabase({
      databaseUrl: url.toString(),
      schema: t.database.schema,
      poolMax: 2,
      log: (level, message) => logger.log(level, { msg: 'database', detail: message.split('\n')[0] }),
    });
    const nexus = await buildApp(config, { db, logger, skipMigrations: true });
    const running = await listen(nexus, 0, '127.0.0.1', 2000);
    close = async () => {
      await running.shutdown();
      await db.destroy();
    };

    await proxy.cut();
    // A probe's line is at debug, its 503 (the database away) too.
    const ready = await fetch(`${running.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await lineOf(logs, ready)).toMatchObject({ level: 'debug', status: 503, operationId: 'getReadiness' });
    const gatewayBase = tenant.gatewayBaseUrl.replace(t.url, running.url);
    for (let i = 0; i < 12; i++) {
      const admin = await fetch(`${running.url}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
      expect(admin.status).toBe(503);
      await admin.text();
      // A key this process never saw: its lookup needs the database.
      const gateway = await fetch(`${gatewayBase}/v1/models`, {
        headers: { authorization: `Bearer nx-test-outage-${i}-0123456789abcdefghij` },
      });
      expect(gateway.status).toBe(503);
      await gateway.text();
    }
    // The last window's summary comes when it closes (3 s): every one of the 24 is then a line or counted.
    const accounted = () => {
      const all = logs.map((l) => JSON.parse(l) as Line);
      const shown = all.filter((l) => l.msg === 'request' && l.errorCode === 'database_unavailable' && l.operationId !== 'getReadiness');
      const counted = all.filter(
        (l) => l.msg === 'log lines suppressed' && l.repeated === 'request' && l.errorCode === 'database_unavailable',
      );
      return shown.length + counted.reduce((sum, l) => sum + (l.suppressed as number), 0);
    };
    await expect.poll(accounted, { timeout: 10_000, interval: 100 }).toBe(24);
    const lines = logs.map((l) => JSON.parse(l) as Line);
    const unavailable = lines.filter(
      (l) => l.msg === 'request' && l.errorCode === 'database_unavailable' && l.operationId !== 'getReadiness',
    );
    // 24 answers (admin and gateway lines are one message and code): at most 5 lines a window, the rest counted.
    const summaries = lines.filter(
      (l) => l.msg === 'log lines suppressed' && l.repeated === 'request' && l.errorCode === 'database_unavailable',
    );
    expect(summaries.length).toBeGreaterThan(0);
    expect(unavailable.length).toBeGreaterThan(0);
    expect(unavailable.length).toBeLessThanOrEqual(5 * (summaries.length + 1));
    expect(unavailable.length + summaries.reduce((sum, l) => sum + (l.suppressed as number), 0)).toBe(24);
    for (const summary of summaries) expect(summary).toMatchObject({ level: 'warn', windowMs: 3000 });
    for (const line of unavailable) {
      expect(line).toMatchObject({ level: 'warn', status: 503 });
      expect(line.error).toBeUndefined();
      expect(JSON.stringify(line)).not.toContain('    at ');
    }
    // No line of the outage has a stack, whatever it says.
    expect(logs.join('\n')).not.toMatch(/"stack"/);
    await proxy.restore();
  });
});

/**
 * Changes take effect on the next call, on every process (docs/reliability.md).
 * The gateway caches its key lookups for NEXUS_AUTH_CACHE_TTL_MS, set here to its
 * longest (5 s), so only the change feed can explain a change seen sooner:
 * - on the process that made the change, the very next call sees it (no wait);
 * - another process (a real Nexus child on the same database) sees it through
 *   LISTEN/NOTIFY within a short poll;
 * - a listener whose session is killed reconnects and drops the whole cache (the
 *   notifications sent meanwhile are lost).
 * Callers are the official openai SDK; the upstream is a fake on 127.0.0.1.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { LISTENER_APPLICATION_NAME } from '../../src/db/change-listener.js';
import { changeChannel } from '../../src/domain/changes/change-feed.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startNexusProcess, type NexusProcess } from '../support/nexus-process.js';
import { accessOf, at, deliverStripe, freeAndProWorkspace, HOUR, provision, startBillingWorld } from '../billing/billing-fixture.js';
import {
  activateWorkspaceAccess,
  archiveProviderConnection,
  archiveWorkspace,
  createProviderConnection,
  issueInferenceKey,
  revokeInferenceKey,
  rotateProviderSecret,
  setPlanPassthroughClasses,
  suspendWorkspaceAccess,
  updateWorkspace,
} from '../support/sdk.js';
import { startTestApp, TEST_ENCRYPTION_KEY, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';
import { createTenant, gatewayFetch, until, type Tenant } from './gateway-support.js';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
const CACHE_TTL_MS = 5000;
/** How soon another process must apply a change: well under the cache's TTL. */
const ELSEWHERE_WITHIN_MS = 1000;

let database: TestDatabase;
let t: TestApp;
let up: FakeUpstream;
let dataDir: string;

beforeAll(async () => {
  database = await createTestDatabase();
  t = await startTestApp({
    database,
    env: {
      NEXUS_AUTH_CACHE_TTL_MS: String(CACHE_TTL_MS),
      // The test harness hands the app its database; these give its listener the same schema's channel (through
      // PgBouncer, a direct session: LISTEN needs one).
      ...(database.url ? { NEXUS_DATABASE_LISTEN_URL: database.directUrl ?? database.url } : {}),
      ...(database.schema ? { NEXUS_DATABASE_SCHEMA: database.schema } : {}),
    },
  });
  up = await startOpenAiUpstream({ apiKeys: [] });
  dataDir = mkdtempSync(join(tmpdir(), 'nexus-changes-'));
});
afterAll(async () => {
  await t?.close();
  await database?.drop();
  await up?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function tenant(): Promise<Tenant & { providerKey: string }> {
  const providerKey = testProviderKey('changes');
  up.keys.add(providerKey);
  return { ...(await createTenant(t, { baseUrl: up.url, providerKey })), providerKey };
}

/** The tenant's gateway on another Nexus (its base URL names the test app). */
const on = (x: Tenant, nexusUrl: string) => x.gatewayBaseUrl.replace(t.url, nexusUrl);

/** One chat completion through the official SDK: 200, or the status of the error it threw (no retries). */
async function chat(x: Tenant, base = x.gatewayBaseUrl): Promise<number> {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: x.apiKey, fetch: gatewayFetch(), maxRetries: 0 });
  return client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 }).then(
    () => 200,
    (err: unknown) => {
      if (err instanceof OpenAI.APIError && err.status !== undefined) return err.status;
      throw err;
    },
  );
}

describe('on the process that made the change, the very next call sees it', () => {
  it('a revoked key is refused at once', async () => {
    const x = await tenant();
    expect(await chat(x)).toBe(200);
    const revoked = await revokeInferenceKey({ client: t.client, path: { accessId: x.accessId, keyId: x.apiKeyId } });
    expect(revoked.response.status).toBe(204);
    expect(await chat(x)).toBe(401);
  });

  it('a suspended access is refused at once, and an activated one admitted at once', async () => {
    const x = await tenant();
    expect(await chat(x)).toBe(200);
    expect((await suspendWorkspaceAccess({ client: t.client, path: { accessId: x.accessId } })).data!.status).toBe('SUSPENDED');
    expect(await chat(x)).toBe(403);
    expect((await activateWorkspaceAccess({ client: t.client, path: { accessId: x.accessId } })).data!.status).toBe('ACTIVE');
    expect(await chat(x)).toBe(200);
  });

  it('an archived connection is refused at once', async () => {
    const x = await tenant();
    expect(await chat(x)).toBe(200);
    const archived = await archiveProviderConnection({ client: t.client, path: { providerConnectionId: x.connectionId } });
    expect(archived.response.status).toBe(204);
    expect(await chat(x)).toBe(404);
  });

  it('an archived workspace is refused at once', async () => {
    const x = await tenant();
    expect(await chat(x)).toBe(200);
    expect((await archiveWorkspace({ client: t.client, path: { workspaceId: x.workspaceId } })).response.status).toBe(204);
    expect(await chat(x)).toBe(403);
  });

  it('a rotated provider key is the one the next call sends (the decrypted key is not kept)', async () => {
    const x = await tenant();
    expect(await chat(x)).toBe(200);
    expect(up.requests.at(-1)!.headers.authorization).toBe(`Bearer ${x.providerKey}`);
    const newKey = testProviderKey('changes-rotated');
    up.keys.add(newKey);
    up.keys.delete(x.providerKey);
    const rotated = await rotateProviderSecret({
      client: t.client,
      path: { providerConnectionId: x.connectionId },
      body: { apiKey: newKey },
    });
    expect(rotated.response.status).toBe(200);
    expect(await chat(x)).toBe(200);
    expect(up.requests.at(-1)!.headers.authorization).toBe(`Bearer ${newKey}`);
  });
});

describe('a billing webhook that suspends an access', () => {
  it('is applied when its processing commits: the next call is refused', async () => {
    const w = await startBillingWorld({ NEXUS_AUTH_CACHE_TTL_MS: String(CACHE_TTL_MS) });
    try {
      const { workspaceId, proPlan, conn } = await freeAndProWorkspace(w);
      const accessId = await provision(w, workspaceId, proPlan);
      const providerKey = testProviderKey('changes-billing');
      up.keys.add(providerKey);
      const connection = await createProviderConnection({
        client: w.t.client,
        path: { workspaceId },
        body: { name: 'upstream', protocolProfile: 'openai', baseUrl: up.url, apiKey: providerKey },
      });
      const key = await issueInferenceKey({ client: w.t.client, path: { accessId }, body: {} });
      const x = { gatewayBaseUrl: connection.data!.gatewayBaseUrl, apiKey: key.data!.apiKey } as Tenant;
      const start = w.clock.advance(HOUR);
      const sub = w.stripe.createSubscription({
        price: 'price_pro',
        metadata: { nexus_workspace_access_id: accessId },
        period: { start, end: at(start, 30 * 24 * HOUR) },
      });
      await deliverStripe(w, conn, w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), start));
      expect(await chat(x)).toBe(200);

      const unpaid = w.stripe.event(
        'customer.subscription.updated',
        w.stripe.update(sub.id, { status: 'unpaid' }),
        w.clock.advance(60_000),
      );
      await deliverStripe(w, conn, unpaid);
      expect((await accessOf(w, accessId)).status).toBe('SUSPENDED');
      expect(await chat(x)).toBe(403);
    } finally {
      await w.close();
    }
  });
});

/** The listening sessions of this file's schema and database (through PgBouncer each file has a database, all on one channel). */
async function listeners(): Promise<{ pid: number; state: string }[]> {
  const sql = `select pid, state from pg_stat_activity where datname = current_database() and application_name = ? and query ilike ?`;
  const { rows } = await database.db.raw(sql, [LISTENER_APPLICATION_NAME, `%${changeChannel(database.schema)}%`]);
  return rows;
}

describe.runIf(usesPostgres)('another process applies the change through LISTEN/NOTIFY', () => {
  let b: NexusProcess;
  beforeAll(async () => {
    b = await startNexusProcess({
      DATABASE_URL: database.url!,
      ...(database.schema ? { NEXUS_DATABASE_SCHEMA: database.schema } : {}),
      ...(database.directUrl ? { NEXUS_DATABASE_LISTEN_URL: database.directUrl } : {}),
      NEXUS_DATA_DIR: mkdtempSync(join(dataDir, 'b-')),
      NEXUS_AUTH_CACHE_TTL_MS: String(CACHE_TTL_MS),
    });
  });
  afterAll(async () => {
    await b?.stop();
  });

  /** Calls through `base` until one is refused with `status`; the milliseconds since `from`. */
  async function refusedAfter(x: Tenant, base: string, status: number, from: number): Promise<number> {
    for (;;) {
      const got = await chat(x, base);
      const elapsed = Date.now() - from;
      if (got === status) return elapsed;
      expect(got).toBe(200);
      if (elapsed > CACHE_TTL_MS) throw new Error(`still ${got} after ${elapsed} ms`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  it('an access suspended on A is refused by B well within the cache TTL', async () => {
    const x = await tenant();
    expect(await chat(x, on(x, b.url))).toBe(200);
    expect(await chat(x, on(x, b.url))).toBe(200);
    const suspended = await suspendWorkspaceAccess({ client: t.client, path: { accessId: x.accessId } });
    expect(suspended.response.status).toBe(200);
    const elapsed = await refusedAfter(x, on(x, b.url), 403, Date.now());
    expect(elapsed).toBeLessThan(ELSEWHERE_WITHIN_MS);
  });

  it('an output bound learned on A (an upstream answering past the cap): B admits calls to that model at it', async () => {
    const providerKey = testProviderKey('changes');
    up.keys.add(providerKey);
    // One unit a token: a call at its cap of 10 tokens needs under 100 units; at the 2000 A saw, over 2000.
    const x = await createTenant(t, { baseUrl: up.url, providerKey, quotaUnits: 2500n, inputPpm: 1_000_000n, outputPpm: 1_000_000n });
    const call = (base: string, usage: string) =>
      new OpenAI({
        baseURL: `${base}/v1`,
        apiKey: x.apiKey,
        fetch: gatewayFetch(),
        maxRetries: 0,
        defaultHeaders: { 'x-fake-usage': usage },
      }).chat.completions
        .create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 })
        .then(
          () => ({ status: 200, message: '' }),
          (err: InstanceType<typeof OpenAI.APIError>) => ({ status: err.status ?? 0, message: err.message }),
        );
    expect((await call(on(x, b.url), '10,5,0')).status).toBe(200);
    // On A: 2000 output tokens for max_tokens 10, charged as reported (2025 of 2500 units used now).
    expect((await call(x.gatewayBaseUrl, '10,2000,0')).status).toBe(200);
    // B, told by A, admits the next call at 2000 output tokens: more than the period has left.
    const from = Date.now();
    for (;;) {
      const got = await call(on(x, b.url), '10,5,0');
      if (got.status === 429) {
        const need = /may need up to (\d+) units/.exec(got.message)?.[1];
        expect(Number(need)).toBeGreaterThan(2000);
        break;
      }
      expect(got.status).toBe(200);
      if (Date.now() - from > ELSEWHERE_WITHIN_MS) throw new Error(`B still admits at the cap after ${Date.now() - from} ms`);
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(Date.now() - from).toBeLessThan(ELSEWHERE_WITHIN_MS);
  });

  it("a workspace's passthrough class let through on A, and a plan's taken away, reach B well within the cache TTL", async () => {
    const x = await tenant();
    const files = async () => (await fetch(`${on(x, b.url)}/v1/files`, { headers: { authorization: `Bearer ${x.apiKey}` } })).status;
    expect(await files()).toBe(409);
    const opened = await updateWorkspace({
      client: t.client,
      path: { workspaceId: x.workspaceId },
      body: { passthroughClasses: ['files'] },
    });
    expect(opened.response.status).toBe(200);
    let from = Date.now();
    await until(async () => (await files()) === 200, ELSEWHERE_WITHIN_MS);
    expect(Date.now() - from).toBeLessThan(ELSEWHERE_WITHIN_MS);
    // The plan's classes: the workspace lets evals through no more, the plan does, then stops.
    const evals = async () => (await fetch(`${on(x, b.url)}/v1/evals`, { headers: { authorization: `Bearer ${x.apiKey}` } })).status;
    await setPlanPassthroughClasses({ client: t.client, path: { planId: x.planId }, body: { passthroughClasses: ['evals'] } });
    await until(async () => (await evals()) === 200, ELSEWHERE_WITHIN_MS);
    from = Date.now();
    await setPlanPassthroughClasses({ client: t.client, path: { planId: x.planId }, body: { passthroughClasses: [] } });
    await until(async () => (await evals()) === 409, ELSEWHERE_WITHIN_MS);
    expect(Date.now() - from).toBeLessThan(ELSEWHERE_WITHIN_MS);
  });

  it('a key revoked on B is refused by A well within the cache TTL', async () => {
    const x = await tenant();
    expect(await chat(x)).toBe(200);
    const revoked = await fetch(`${b.url}/admin/v1/workspace-accesses/${x.accessId}/api-keys/${x.apiKeyId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}` },
    });
    expect(revoked.status).toBe(204);
    const elapsed = await refusedAfter(x, x.gatewayBaseUrl, 401, Date.now());
    expect(elapsed).toBeLessThan(ELSEWHERE_WITHIN_MS);
  });

  it('a connection archived and a provider key rotated on A reach B within the TTL', async () => {
    const rotatedTenant = await tenant();
    const archivedTenant = await tenant();
    for (const x of [rotatedTenant, archivedTenant]) expect(await chat(x, on(x, b.url))).toBe(200);
    const newKey = testProviderKey('changes-rotated-b');
    up.keys.add(newKey);
    up.keys.delete(rotatedTenant.providerKey);
    const from = Date.now();
    await rotateProviderSecret({ client: t.client, path: { providerConnectionId: rotatedTenant.connectionId }, body: { apiKey: newKey } });
    await archiveProviderConnection({ client: t.client, path: { providerConnectionId: archivedTenant.connectionId } });
    // The old key is refused by the upstream (relayed as its 401) until B drops its decrypted copy.
    await until(async () => (await chat(rotatedTenant, on(rotatedTenant, b.url))) === 200, ELSEWHERE_WITHIN_MS);
    expect(up.requests.at(-1)!.headers.authorization).toBe(`Bearer ${newKey}`);
    expect(await refusedAfter(archivedTenant, on(archivedTenant, b.url), 404, from)).toBeLessThan(ELSEWHERE_WITHIN_MS);
  });
});

describe.runIf(usesPostgres)('a process that hears every change keeps its lookups past the TTL', () => {
  let c: NexusProcess;
  const TTL_MS = 1000;
  beforeAll(async () => {
    c = await startNexusProcess({
      DATABASE_URL: database.url!,
      ...(database.schema ? { NEXUS_DATABASE_SCHEMA: database.schema } : {}),
      ...(database.directUrl ? { NEXUS_DATABASE_LISTEN_URL: database.directUrl } : {}),
      NEXUS_DATA_DIR: mkdtempSync(join(dataDir, 'c-')),
      NEXUS_AUTH_CACHE_TTL_MS: String(TTL_MS),
      NEXUS_AUTH_CACHE_LISTENING_TTL_MS: '60000',
    });
  });
  afterAll(async () => {
    await c?.stop();
  });

  it('while its lease on the period is held: a change no process announced is not read again, an announced one applies at once', async () => {
    const x = await tenant();
    expect(await chat(x, on(x, c.url))).toBe(200);
    // A change no process announced: the entry read before it answers past the TTL while calls keep the lease.
    await database.db('inference_keys').where({ id: x.apiKeyId }).update({ revoked_at: new Date() });
    const from = Date.now();
    while (Date.now() - from < TTL_MS * 2) {
      expect(await chat(x, on(x, c.url))).toBe(200);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Announced (as another process's revocation is): refused well within the TTL.
    const announced = Date.now();
    await database.db.raw('select pg_notify(?, ?)', [changeChannel(database.schema), `elsewhere k ${x.apiKeyId}`]);
    await until(async () => (await chat(x, on(x, c.url))) === 401, ELSEWHERE_WITHIN_MS);
    expect(Date.now() - announced).toBeLessThan(ELSEWHERE_WITHIN_MS);
  });

  it('once its lease on the period is released, the entry read before answers no longer than the TTL', async () => {
    const x = await tenant();
    expect(await chat(x, on(x, c.url))).toBe(200);
    await database.db('inference_keys').where({ id: x.apiKeyId }).update({ revoked_at: new Date() });
    // The lease goes after NEXUS_QUOTA_LEASE_IDLE_MS (1 s) without a call; the entry is then past its TTL.
    await new Promise((r) => setTimeout(r, TTL_MS * 2.5));
    expect(await chat(x, on(x, c.url))).toBe(401);
  });
});

describe.runIf(usesPostgres)('a listener whose session is killed', () => {
  it('reconnects, and drops the whole cache: a change whose notification it missed takes effect', async () => {
    // The other process of the tests before has stopped: this app's is the one listener on the channel.
    await until(async () => (await listeners()).length === 1);
    const x = await tenant();
    const cachedAt = Date.now();
    expect(await chat(x)).toBe(200);
    // A change no process announced stands for one whose notification was lost with the session.
    await database.db('inference_keys').where({ id: x.apiKeyId }).update({ revoked_at: new Date() });
    expect(await chat(x)).toBe(200);

    const [before] = await listeners();
    expect(before).toBeDefined();
    const reconnectsBefore = t.logs.filter((l) => l.includes('change listener reconnected')).length;
    await database.db.raw('select pg_terminate_backend(?)', [before!.pid]);
    await until(async () => t.logs.filter((l) => l.includes('change listener reconnected')).length > reconnectsBefore, 3000);
    const after = await listeners();
    expect(after.map((l) => l.pid)).not.toContain(before!.pid);
    expect(after).toHaveLength(1);

    expect(await chat(x)).toBe(401);
    // Within the TTL of the entry cached before: only the cleared cache explains the refusal.
    expect(Date.now() - cachedAt).toBeLessThan(CACHE_TTL_MS);

    // Listening again: a notification as another process sends it (its origin, kind and id) drops the entry.
    const y = await tenant();
    expect(await chat(y)).toBe(200);
    await database.db('inference_keys').where({ id: y.apiKeyId }).update({ revoked_at: new Date() });
    expect(await chat(y)).toBe(200);
    await database.db.raw('select pg_notify(?, ?)', [changeChannel(database.schema), `elsewhere k ${y.apiKeyId}`]);
    await until(async () => (await chat(y)) === 401, ELSEWHERE_WITHIN_MS);
  });
});

describe('NEXUS_DATABASE_LISTEN_URL', () => {
  const base = { NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, DATABASE_URL: 'postgres://app@pgbouncer:6432/nexus' };

  it('defaults to DATABASE_URL, and takes a URL of its own', () => {
    expect(loadConfig(base, () => {}).databaseListenUrl).toBe(base.DATABASE_URL);
    const direct = 'postgresql://app@postgres:5432/nexus';
    expect(loadConfig({ ...base, NEXUS_DATABASE_LISTEN_URL: direct }, () => {}).databaseListenUrl).toBe(direct);
    expect(loadConfig({ NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY }, () => {}).databaseListenUrl).toBeUndefined();
  });

  it('refuses what is not a PostgreSQL URL, with a clear message', () => {
    expect(() => loadConfig({ ...base, NEXUS_DATABASE_LISTEN_URL: 'http://postgres:5432/nexus' }, () => {})).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, NEXUS_DATABASE_LISTEN_URL: 'mysql://x' }, () => {})).toThrow(
      'NEXUS_DATABASE_LISTEN_URL must be a postgres:// or postgresql:// URL',
    );
  });

  it.runIf(usesPostgres)(
    'a listener that cannot connect does not keep Nexus from serving; the changing process still applies its changes',
    async () => {
      const other = await t.withEnv({ NEXUS_DATABASE_LISTEN_URL: 'postgres://postgres@127.0.0.1:1/postgres' });
      try {
        expect(other.logs.some((l) => l.includes('change listener cannot listen'))).toBe(true);
        const x = await tenant();
        const gateway = on(x, other.url);
        expect(await chat(x, gateway)).toBe(200);
        const revoked = await revokeInferenceKey({ client: other.client, path: { accessId: x.accessId, keyId: x.apiKeyId } });
        expect(revoked.response.status).toBe(204);
        expect(await chat(x, gateway)).toBe(401);
      } finally {
        await other.close();
      }
    },
  );
});

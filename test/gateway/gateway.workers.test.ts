/**
 * NEXUS_WORKERS=2 (src/workers.ts) as `npm start` runs it, a real process on the test database: concurrent
 * gateway calls (the official openai SDK) against a small quota are served by both workers, and the quota
 * stays exact across them (no overspend, consumed == the charges recorded); SIGTERM stops every worker and
 * the primary exits 0; a log reader that stops reading for a while still gets every line whole. And the embedded
 * database refuses NEXUS_WORKERS>1 at start.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startNexusProcess, type NexusProcess } from '../support/nexus-process.js';
import { projectRoot } from '../support/paths.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, periodOf, until } from './gateway-support.js';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
const KEY = `${SECRET_MARKER}-upstream-workers-0123456789`;
const CALLS = 200;

let t: TestApp;
let up: FakeUpstream;
let dataDir: string;
let nexus: NexusProcess | undefined;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'nexus-workers-'));
  if (!usesPostgres) return;
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await nexus?.kill();
  await t?.close();
  await up?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** NEXUS_WORKERS=2 on the test database, its data in `data`. */
const startWorkers = (data: string, env: Record<string, string> = {}) =>
  startNexusProcess({
    DATABASE_URL: t.database.url!,
    ...(t.database.schema ? { NEXUS_DATABASE_SCHEMA: t.database.schema } : {}),
    ...(t.database.directUrl ? { NEXUS_DATABASE_LISTEN_URL: t.database.directUrl } : {}),
    NEXUS_DATA_DIR: data,
    NEXUS_WORKERS: '2',
    ...env,
  });

describe.skipIf(!usesPostgres)('NEXUS_WORKERS=2 on PostgreSQL', () => {
  it('serves concurrent calls on both workers with the quota exact across them; SIGTERM stops them all', async () => {
    nexus = await startWorkers(dataDir, { NEXUS_QUOTA_LEASE_IDLE_MS: '200' });
    const p = nexus;
    // /healthz answered: the first worker listens. The second starts after it.
    await until(async () => p.logLines().filter((l) => l.msg === 'listening').length === 2, 60_000);
    const workers = new Set(
      p
        .logLines()
        .filter((l) => l.msg === 'listening')
        .map((l) => l.pid),
    );
    expect(workers.size).toBe(2);

    // Each call consumes 10 + 2 * 5 = 20 units (input and cached priced alike): room for at most 100 of the 200, and
    // enough that each worker's lease gets a share.
    const quota = 2000n;
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: quota, cachedPpm: 1_000_000n });
    const openai = new OpenAI({
      baseURL: `${tenant.gatewayBaseUrl.replace(t.url, p.url)}/v1`,
      apiKey: tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
      defaultHeaders: { 'x-fake-usage': '10,5,0' },
    });
    const upstreamBefore = up.requests.length;
    const outcomes = await Promise.all(
      Array.from({ length: CALLS }, async () => {
        try {
          const answer = await openai.chat.completions.create({
            model: 'gpt-test',
            messages: [{ role: 'user', content: 'workers' }],
            max_tokens: 10,
          });
          expect(answer.usage?.total_tokens).toBe(15);
          return 200;
        } catch (err) {
          if (err instanceof OpenAI.APIError) return err.status;
          throw err;
        }
      }),
    );
    const ok = outcomes.filter((s) => s === 200).length;
    expect(ok + outcomes.filter((s) => s === 429).length, `statuses: ${outcomes.join(',')}`).toBe(CALLS);
    expect(ok).toBeGreaterThan(0);
    expect(up.requests.length - upstreamBefore).toBe(ok);

    // Both workers answered gateway calls (a worker's request lines carry its pid); which of them got the quota
    // first depends on timing, so an answer is a 200 or a 429.
    const served = new Set(
      p
        .logLines()
        .filter((l) => l.msg === 'request' && String(l.path).startsWith('/providers/'))
        .map((l) => l.pid),
    );
    expect(served).toEqual(workers);

    // Once each worker has recorded its calls (refusals too) and its idle lease has gone back: nothing reserved,
    // consumed is exactly the charges, within the quota.
    const recorded = async (status: string) =>
      Number(
        (await t.database.db('invocations').where({ workspace_access_id: tenant.accessId, status }).count<{ n: string }[]>('* as n'))[0]!.n,
      );
    await until(async () => (await recorded('SUCCEEDED')) === ok && (await recorded('REJECTED')) === CALLS - ok, 20_000);
    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 20_000);
    const period = await periodOf(t, tenant.accessId);
    expect(period.consumed).toBe(20n * BigInt(ok));
    expect(period.consumed).toBeLessThanOrEqual(quota);
    const usage = await t.database
      .db('usage_events')
      .where({ workspace_access_id: tenant.accessId })
      .sum<{ sum: string }[]>('units as sum');
    expect(BigInt(usage[0]!.sum)).toBe(period.consumed);
    // None of the leases is left HELD (how many the workers took depends on which got to the quota first).
    const leases = await t.database.db('quota_leases').where({ workspace_access_id: tenant.accessId });
    expect(leases.length).toBeGreaterThanOrEqual(1);
    expect(leases.every((l) => l.status === 'RELEASED')).toBe(true);

    // SIGTERM: forwarded to both workers, each drains, the primary exits 0 and no worker is left.
    expect(await p.stop()).toBe(0);
    const lines = p.logLines();
    expect(new Set(lines.filter((l) => l.msg === 'shutting down').map((l) => l.pid))).toEqual(workers);
    expect(lines.some((l) => l.msg === 'all workers stopped')).toBe(true);
    for (const pid of workers) expect(() => process.kill(pid as number, 0)).toThrow();
  }, 180_000);

  it('a log reader that stops reading for a while: every line the primary and its workers write stays whole', async () => {
    nexus = await startWorkers(join(dataDir, 'slow-reader'));
    const p = nexus;
    await until(async () => p.logLines().filter((l) => l.msg === 'listening').length === 2, 60_000);
    // The pipe (64 KiB) fills while its reader pauses; 4,000 refused requests write a line each, on both workers.
    // Written asynchronously, the lines that waited went out in large writes the kernel cut, and a line of one
    // worker landed inside a line of the other.
    p.child.stdout!.pause();
    const statuses = Promise.all(
      Array.from({ length: 4000 }, () =>
        fetch(`${p.url}/admin/v1/workspaces`, { headers: { authorization: 'Bearer nope' } }).then((r) => r.status),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 3000));
    p.child.stdout!.resume();
    expect(new Set(await statuses)).toEqual(new Set([401]));
    const refusals = () => p.logLines().filter((l) => l.msg === 'request' && l.status === 401);
    await until(async () => refusals().length === 4000, 20_000);
    expect(new Set(refusals().map((l) => l.pid)).size).toBe(2);
    // Every line is one whole JSON object (logLines parses each line that begins with '{').
    const written = p.output().split('\n').filter(Boolean);
    expect(written.filter((line) => !line.startsWith('{'))).toEqual([]);
    expect(await p.stop()).toBe(0);
  }, 120_000);
});

describe('NEXUS_WORKERS on the embedded database', () => {
  it('is refused at start with a clear error', () => {
    const run = spawnSync(process.execPath, ['dist/server.js'], {
      cwd: projectRoot,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, NEXUS_WORKERS: '2', NEXUS_DATA_DIR: dataDir, PORT: '0' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('NEXUS_WORKERS=2 needs PostgreSQL (DATABASE_URL)');
  });

  it('refuses bad values of the scale-out settings, naming each', () => {
    const run = spawnSync(process.execPath, ['dist/server.js'], {
      cwd: projectRoot,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        NEXUS_WORKERS: '0',
        NEXUS_DATABASE_PREPARED_STATEMENTS: 'maybe',
        NEXUS_DATABASE_POOL_MAX: 'ten',
        NEXUS_DATA_DIR: dataDir,
        PORT: '0',
      },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('NEXUS_WORKERS must be >= 1');
    expect(run.stderr).toContain('NEXUS_DATABASE_PREPARED_STATEMENTS must be true or false');
    expect(run.stderr).toContain('NEXUS_DATABASE_POOL_MAX must be integer');
  });
});

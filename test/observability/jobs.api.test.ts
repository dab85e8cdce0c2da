/**
 * The background jobs (src/jobs.ts) as GET /metrics shows them: each round counted by job and outcome and the
 * last one timed; a round that fails is counted `failed` and logged with its job's name, and the job goes on; the
 * change listener's sessions count `ok` when it listens and `failed` when its session is lost. And the jobs stop
 * with the app: no round runs after close().
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LISTENER_APPLICATION_NAME } from '../../src/db/change-listener.js';
import { changeChannel } from '../../src/domain/changes/change-feed.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';
import { until } from '../gateway/gateway-support.js';
import { has, parseMetrics, sumOf } from './prom-text.js';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
/** The lease sweep runs every quarter of the lease TTL: 250 ms at NEXUS_LEASE_TTL_MS=1000. */
const FAST_JOBS = { NEXUS_LEASE_TTL_MS: '1000', NEXUS_EVENTS_POLL_MS: '50' };

let database: TestDatabase;
let t: TestApp;

beforeAll(async () => {
  database = await createTestDatabase();
  t = await startTestApp({
    database,
    env: {
      ...FAST_JOBS,
      // The test harness hands the app its database; these give its change listener the same schema's channel.
      ...(database.url ? { NEXUS_DATABASE_LISTEN_URL: database.directUrl ?? database.url } : {}),
      ...(database.schema ? { NEXUS_DATABASE_SCHEMA: database.schema } : {}),
    },
  });
});
afterAll(async () => {
  await t?.close();
  await database?.drop();
});

async function runs(app: TestApp, job: string, outcome: 'ok' | 'failed'): Promise<number> {
  const samples = parseMetrics(await (await fetch(`${app.url}/metrics`)).text());
  return sumOf(samples, 'nexus_job_runs_total', { job, outcome });
}

/** Until it is undone, the lease sweep's statement on rate_allowances fails: its table is gone. */
async function breakLeaseSweep(): Promise<() => Promise<void>> {
  await database.db.raw('alter table rate_allowances rename to rate_allowances_away');
  return async () => void (await database.db.raw('alter table rate_allowances_away rename to rate_allowances'));
}

describe('the background jobs', () => {
  it('count and time each round, by job and outcome', async () => {
    await until(async () => (await runs(t, 'lease-sweep', 'ok')) >= 2 && (await runs(t, 'webhook-delivery', 'ok')) >= 2);
    const samples = parseMetrics(await (await fetch(`${t.url}/metrics`)).text());
    // The spool's recovery runs once, at start.
    expect(sumOf(samples, 'nexus_job_runs_total', { job: 'spool-recovery', outcome: 'ok' })).toBe(1);
    for (const job of ['lease-sweep', 'webhook-delivery', 'spool-recovery']) {
      expect(has(samples, 'nexus_job_last_run_duration_seconds', { job })).toBe(true);
      expect(sumOf(samples, 'nexus_job_last_run_duration_seconds', { job })).toBeGreaterThanOrEqual(0);
    }
    expect(sumOf(samples, 'nexus_job_runs_total', { job: 'lease-sweep', outcome: 'failed' })).toBe(0);
  });

  it('count a failed round `failed` and log it with the job, and go on', async () => {
    const restore = await breakLeaseSweep();
    try {
      await until(async () => (await runs(t, 'lease-sweep', 'failed')) >= 1);
    } finally {
      await restore();
    }
    const line = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'quota lease sweep failed');
    expect(line).toMatchObject({ level: 'warn', job: 'lease-sweep' });
    expect(String(line!.error)).toMatch(/rate_allowances/);
    const ok = await runs(t, 'lease-sweep', 'ok');
    await until(async () => (await runs(t, 'lease-sweep', 'ok')) > ok);
  });

  it('stop with the app: after close(), no round runs', async () => {
    const other = await t.withEnv({ NEXUS_DATABASE_LISTEN_URL: '', NEXUS_DATABASE_SCHEMA: '' });
    await until(async () => (await runs(other, 'lease-sweep', 'ok')) >= 1);
    await other.close();
    const seen = other.logs.length;
    // A sweep of the closed app would fail now, and log it.
    const restore = await breakLeaseSweep();
    try {
      await new Promise((r) => setTimeout(r, 1000));
    } finally {
      await restore();
    }
    expect(other.logs.slice(seen).filter((l) => l.includes('"job"'))).toEqual([]);
  });
});

describe.runIf(usesPostgres)('the change listener', () => {
  it('counts a session that listens `ok`, and one that is lost `failed`', async () => {
    await until(async () => (await runs(t, 'change-listener', 'ok')) >= 1);
    const { rows } = await database.db.raw(`select pid from pg_stat_activity where application_name = ? and query ilike ?`, [
      LISTENER_APPLICATION_NAME,
      `%${changeChannel(database.schema)}%`,
    ]);
    expect(rows).toHaveLength(1);
    await database.db.raw('select pg_terminate_backend(?)', [rows[0].pid]);
    await until(async () => (await runs(t, 'change-listener', 'failed')) >= 1 && (await runs(t, 'change-listener', 'ok')) >= 2);
  });
});

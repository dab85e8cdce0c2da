/**
 * Quota leases (src/domain/quota/quota-leases.ts): a process admits calls against a
 * slice of the period it holds, so the hot path makes no database round trip per call.
 * These tests hold it to the same contract as a hold per call: exactly
 * the same calls admitted and refused, the same headers, no overspend across
 * processes, every unit back once the leases are released, and a lease the
 * sweeper expired charges nothing. A plan change while leases are held loses
 * none of their unused units (docs/decisions.md "Changing plan").
 */
import { SECRET_MARKER } from '../security/secret-marker.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeAccessPlan } from '../support/sdk.js';
import { buildApp, listen, type RunningServer } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { splitPeriodForPlanChange } from '../../src/domain/quota/quota-math.js';
import { createLogger } from '../../src/observability/logger.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { activePlan } from '../support/tenant.js';
import { poolerEnv, startTestApp, TEST_ENCRYPTION_KEY, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { chatInputBound, createTenant, gatewayFetch, periodOf, reclaimLease, until, type Tenant } from './gateway-support.js';

let t: TestApp;
let up: FakeUpstream;
const KEY = `${SECRET_MARKER}-upstream-leases-0123456789`;
// Each call reserves its input bound + 2 * 10 units and consumes 10 + 2 * 5 = 20 (input and cached priced alike).
const BODY = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'lease' }], max_tokens: 10 });
const INPUT_BOUND = chatInputBound(BODY);
const BOUND = INPUT_BOUND + 20n;

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_QUOTA_LEASE_IDLE_MS: '100', NEXUS_LEASE_TTL_MS: '1000' } });
  up = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const tenantWith = (quotaUnits: bigint) => createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits, cachedPpm: 1_000_000n });

function call(who: Tenant, base = who.gatewayBaseUrl, headers: Record<string, string> = {}, body = BODY) {
  return gatewayFetch()(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${who.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0', ...headers },
    body,
  });
}

/** How many lease statements of this kind the app has made (its /metrics). */
async function leaseStatements(kind: 'acquire' | 'extend' | 'renew' | 'release', app = t): Promise<number> {
  const metrics = await (await fetch(`${app.url}/metrics`)).text();
  return Number(new RegExp(`^nexus_quota_lease_statements_total\\{kind="${kind}"\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);
}

/**
 * `run` against a second app on the same database whose idle bound (60 s) outlasts any pause between two calls of a
 * loaded machine: a lease released between them would be taken again, and a test of one lease would see two. The app
 * is closed (its leases released) when `run` ends.
 */
async function onBusyApp(who: Tenant, run: (base: string, app: TestApp) => Promise<void>): Promise<void> {
  const busy = await t.withEnv({ NEXUS_QUOTA_LEASE_IDLE_MS: '60000' });
  try {
    await run(who.gatewayBaseUrl.replace(t.url, busy.url), busy);
    await busy.nexus.gateway.drain();
  } finally {
    await busy.close();
  }
}

const leasesOf = (accessId: string) => t.database.db('quota_leases').where({ workspace_access_id: accessId }).orderBy('created_at');

describe('one process', () => {
  it('admits and refuses exactly the calls a hold per call would, with the same remaining header', async () => {
    // Room for 8 calls: the 9th finds BOUND - 15 available.
    const quota = BOUND + 20n * 7n + 5n;
    const tenant = await tenantWith(quota);
    const statuses: number[] = [];
    const remaining: string[] = [];
    await onBusyApp(tenant, async (base) => {
      for (let i = 0; i < 9; i++) {
        const res = await call(tenant, base);
        await res.text();
        statuses.push(res.status);
        remaining.push(res.headers.get('x-nexus-quota-remaining')!);
      }
    });
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 429]);
    // While a call runs its whole bound is counted; the refusal shows what is left.
    expect(remaining).toEqual([...Array.from({ length: 8 }, (_, i) => String(quota - 20n * BigInt(i) - BOUND)), String(BOUND - 15n)]);
    const period = await periodOf(t, tenant.accessId);
    expect(period).toEqual({ granted: quota, reserved: 0n, consumed: 160n });
  });

  it('records each call on the lease (no row of its own), with one usage event, and the lease keeps the total', async () => {
    const tenant = await tenantWith(100_000n);
    await onBusyApp(tenant, async (base) => {
      for (let i = 0; i < 5; i++) expect((await call(tenant, base)).status).toBe(200);
    });
    const [lease, ...others] = await leasesOf(tenant.accessId);
    expect(others).toHaveLength(0);
    expect(lease).toMatchObject({ status: 'RELEASED' });
    expect(BigInt(lease.consumed_units)).toBe(100n);
    const invocations = await t.database.db('invocations').where({ lease_id: lease.id });
    expect(invocations).toHaveLength(5);
    expect(invocations.every((i) => BigInt(i.quota_units) === 20n && i.attempt_status === 'SUCCEEDED')).toBe(true);
    const events = await t.database.db('usage_events').where({ lease_id: lease.id });
    expect(events).toHaveLength(5);
    expect(events.every((e) => e.kind === 'USAGE' && BigInt(e.units) === 20n)).toBe(true);
    expect(events.map((e) => e.invocation_id).sort()).toEqual(invocations.map((i) => i.id).sort());
  });

  it("grows a busy access's lease: 200 calls that each use their whole bound take a few extensions, not one per 16 calls", async () => {
    const tenant = await tenantWith(10_000_000n);
    // On a Nexus whose idle bound outlasts any pause between two calls of a loaded machine: a lease released
    // between them would be taken again with the first headroom, and the count would measure the pauses.
    await onBusyApp(tenant, async (base, busy) => {
      const whole = { 'x-fake-usage': `${INPUT_BOUND},10,0` };
      for (let i = 0; i < 200; i++) expect((await call(tenant, base, whole)).status).toBe(200);
      // The headroom doubles at each extension (16, 32, 64, 128 bounds...): four here, where a fixed 16 took eleven.
      expect(await leaseStatements('acquire', busy)).toBe(1);
      expect(await leaseStatements('extend', busy)).toBeLessThanOrEqual(5);
    });
    expect(await periodOf(t, tenant.accessId)).toEqual({ granted: 10_000_000n, reserved: 0n, consumed: 200n * BOUND });
  });

  it('returns an idle lease to the period by itself, within the idle bound', async () => {
    const tenant = await tenantWith(100_000n);
    expect((await call(tenant)).status).toBe(200);
    // No drain: the recorder writes the call, then the idle lease (100 ms here) is released.
    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n);
    const period = await periodOf(t, tenant.accessId);
    expect(period.consumed).toBe(20n);
    const [lease] = await leasesOf(tenant.accessId);
    expect(lease.status).toBe('RELEASED');
  });

  it('a lease reclaimed under a running call (its heartbeats missed) charges the call once; the next call takes a new lease', async () => {
    const tenant = await tenantWith(100_000n);
    const streamBody = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'lease' }], max_tokens: 10, stream: true });
    const slow = call(tenant, tenant.gatewayBaseUrl, { 'x-fake-fault': 'slow', 'x-fake-delay-ms': '250' }, streamBody);
    const res = await slow;
    expect(res.status).toBe(200);
    // As if its heartbeats had not reached the database for a TTL: another process's sweeper reclaims the lease.
    await until(async () => (await leasesOf(tenant.accessId)).length === 1);
    await reclaimLease(t, tenant.accessId);
    await res.text();
    await t.nexus.gateway.drain();
    // Recorded and charged once: by the reclaim, as its last heartbeat left it, or by its own process, directly.
    const invocations = await t.database.db('invocations').where({ request_id: res.headers.get('x-nexus-request-id')! });
    expect(invocations).toHaveLength(1);
    const [invocation] = invocations;
    expect(['SUCCEEDED', 'FAILED']).toContain(invocation.status);
    if (invocation.status === 'FAILED') expect(invocation.error_code).toBe('gateway_lost');
    const units = BigInt(invocation.quota_units);
    expect(units).toBeGreaterThan(0n);
    const events = await t.database.db('usage_events').where({ invocation_id: invocation.id });
    expect(events.map((e) => [e.kind, BigInt(e.units)])).toEqual([['USAGE', units]]);
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: units });

    expect((await call(tenant)).status).toBe(200);
    await t.nexus.gateway.drain();
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: units + 20n });
    const leases = await leasesOf(tenant.accessId);
    expect(leases.map((l) => l.status)).toEqual(['EXPIRED', 'RELEASED']);
  });
});

describe('a burst at an exhausted quota', () => {
  it('is refused from the last refusal, without a database round trip per call', async () => {
    // Time stands still here, so the refusal's figure stays trusted however slow the machine is.
    const still = new Date();
    const frozen = await startTestApp({ clock: { now: () => still } });
    try {
      const tenant = await createTenant(frozen, { baseUrl: up.url, providerKey: KEY, quotaUnits: BOUND - 1n });
      const first = await call(tenant);
      expect(first.status).toBe(429);
      await first.text();
      // The periods locked even against reads: a call that asked the database now would wait for the lock.
      const lock = await frozen.database.db.transaction();
      try {
        await lock.raw('lock table quota_periods in access exclusive mode');
        const burst = await Promise.race([
          Promise.all(Array.from({ length: 20 }, () => call(tenant).then(async (res) => [res.status, await res.json()] as const))),
          new Promise<'waited'>((r) => setTimeout(() => r('waited'), 3000)),
        ]);
        expect(burst, 'the calls waited for the locked period').not.toBe('waited');
        for (const [status, body] of burst as (readonly [number, any])[]) {
          expect(status).toBe(429);
          expect(body.error).toMatchObject({
            code: 'quota_insufficient',
            message: `This call may need up to ${BOUND} units; ${BOUND - 1n} are available`,
          });
        }
      } finally {
        await lock.rollback();
      }
    } finally {
      await frozen.close();
    }
  });
});

describe('a call admitted late on its lease', () => {
  it('is charged when it ends within the TTL: the lease is renewed while its calls run', async () => {
    const tenant = await tenantWith(100_000n);
    const start = Date.now();
    expect((await call(tenant)).status).toBe(200);
    // Busy (the idle bound is 100 ms) up to just before half the lease's 1 s TTL: no call arriving renews it.
    while (Date.now() - start < 350) await (await call(tenant)).text();
    // 800 ms: shorter than the TTL, but ending after the lease's first expiry. The sweeper runs meanwhile.
    let done = false;
    const late = call(tenant, tenant.gatewayBaseUrl, { 'x-fake-fault': 'late', 'x-fake-delay-ms': '800' }).finally(() => (done = true));
    while (!done) {
      await t.nexus.gateway.sweepExpired();
      await new Promise((r) => setTimeout(r, 25));
    }
    const res = await late;
    expect(res.status).toBe(200);
    await t.nexus.gateway.drain();
    const invocation = await t.database
      .db('invocations')
      .where({ request_id: res.headers.get('x-nexus-request-id')! })
      .first();
    expect(BigInt(invocation.quota_units)).toBe(20n);
    expect(await t.database.db('usage_events').where({ invocation_id: invocation.id, kind: 'USAGE' })).toHaveLength(1);
    expect((await leasesOf(tenant.accessId)).map((l) => l.status)).toEqual(['RELEASED']);
    const period = await periodOf(t, tenant.accessId);
    const calls = await t.database
      .db('invocations')
      .where({ workspace_access_id: tenant.accessId })
      .count<{ count: string }[]>('* as count');
    expect(period).toMatchObject({ reserved: 0n, consumed: 20n * BigInt(calls[0]!.count) });
  });
});

type SecondProcess = { close(): Promise<void>; drain(): Promise<void>; running: RunningServer };

/** Another gateway process on the app's database. */
async function secondProcess(on: TestApp, env: Record<string, string> = {}): Promise<SecondProcess> {
  const config = loadConfig({
    NODE_ENV: 'test',
    PORT: '0',
    NEXUS_MANAGEMENT_KEY: TEST_ROOT_KEY,
    NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'true',
    NEXUS_KEY_ENVIRONMENT: 'test',
    NEXUS_LOG_LEVEL: 'warn',
    ...poolerEnv(),
    ...env,
  });
  const nexus = await buildApp(config, { db: on.database.db, logger: createLogger('warn'), skipMigrations: true });
  const running = await listen(nexus, 0, '127.0.0.1', 2000);
  return {
    running,
    drain: () => nexus.gateway.drain(),
    async close() {
      await running.shutdown();
    },
  };
}

describe('two processes on one database', () => {
  let second: SecondProcess;

  beforeAll(async () => {
    second = await secondProcess(t);
  });
  afterAll(async () => {
    await second?.close();
  });

  it('share a small quota without overspending, and every unit comes back', async () => {
    const quota = 2000n;
    const tenant = await tenantWith(quota);
    const secondBase = tenant.gatewayBaseUrl.replace(t.url, second.running.url);
    const upstreamBefore = up.requests.length;
    const results = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const res = await call(tenant, i % 2 ? secondBase : tenant.gatewayBaseUrl);
        await res.text();
        return res.status;
      }),
    );
    await Promise.all([t.nexus.gateway.drain(), second.drain()]);
    const ok = results.filter((s) => s === 200).length;
    expect(ok + results.filter((s) => s === 429).length).toBe(200);
    expect(ok).toBeGreaterThan(0);
    expect(up.requests.length - upstreamBefore).toBe(ok);
    const period = await periodOf(t, tenant.accessId);
    expect(period.reserved).toBe(0n);
    expect(period.consumed).toBe(20n * BigInt(ok));
    expect(period.consumed).toBeLessThanOrEqual(quota);
    // Both processes held leases, and none is left HELD.
    const leases = await leasesOf(tenant.accessId);
    expect(leases.length).toBeGreaterThanOrEqual(2);
    expect(leases.every((l) => l.status === 'RELEASED')).toBe(true);
    const usage = await t.database
      .db('usage_events')
      .where({ workspace_access_id: tenant.accessId })
      .sum<{ sum: string }[]>('units as sum');
    expect(BigInt(usage[0]!.sum)).toBe(period.consumed);
  });
});

describe('a plan change while leases are held', () => {
  // Leases stay held until drained: the change always finds them. No auth cache in `app` (each call
  // reads the period); `cached` keeps its rows 5 s, so a call after the change starts from the old period.
  const HELD = { NEXUS_QUOTA_LEASE_IDLE_MS: '60000', NEXUS_AUTH_CACHE_TTL_MS: '0' };
  let app: TestApp;
  let second: SecondProcess;
  /** With the auth cache on (5 s): its row of the access names the period before the change. */
  let cached: TestApp;

  beforeAll(async () => {
    app = await startTestApp({ env: HELD });
    second = await secondProcess(app, HELD);
    cached = await startTestApp({ env: { ...HELD, NEXUS_AUTH_CACHE_TTL_MS: '5000' } });
  });
  afterAll(async () => {
    await second?.close();
    await app?.close();
    await cached?.close();
  });

  const drainAll = () => Promise.all([app.nexus.gateway.drain(), second.drain()]);

  /** A tenant on plan A (3000 units) and a published plan B (9000 units) in its workspace. */
  async function tenantAndPlanB(on: TestApp = app) {
    const tenant = await createTenant(on, { baseUrl: up.url, providerKey: KEY, quotaUnits: 3000n, cachedPpm: 1_000_000n });
    const { plan } = await activePlan(on.client, tenant.workspaceId, {
      key: 'b',
      strategyKey: 'b-quota',
      quotaUnits: '9000',
      outputMultiplierPpm: '2000000',
      maxOutputTokens: 1000,
    });
    return { tenant, planB: plan.id };
  }

  async function changeTo(accessId: string, planId: string, on: TestApp = app) {
    const res = await changeAccessPlan({ client: on.client, path: { accessId }, body: { planId } });
    expect(res.response.status, JSON.stringify(res.error)).toBe(200);
  }

  const appLeasesOf = (accessId: string) => app.database.db('quota_leases').where({ workspace_access_id: accessId }).orderBy('created_at');
  const partsOf = (accessId: string, on: TestApp = app) =>
    on.database.db('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_start');

  /** The split rule with used = what was consumed: the grants a change made with no lease held would give. */
  async function expectNoLeaseGrants(accessId: string) {
    const [old, next, ...others] = await partsOf(accessId);
    expect(others).toHaveLength(0);
    const expected = splitPeriodForPlanChange({
      cycleStart: old.cycle_start,
      periodStart: old.period_start,
      periodEnd: next.period_end,
      effectiveAt: next.period_start,
      oldGranted: 3000n,
      oldUsed: BigInt(old.consumed_units),
      newQuotaUnits: 9000n,
    });
    expect(BigInt(old.reserved_units)).toBe(0n);
    expect(BigInt(next.reserved_units)).toBe(0n);
    expect({ old: BigInt(old.granted_units), next: BigInt(next.granted_units) }).toEqual({
      old: expected.oldGranted,
      next: expected.newGranted,
    });
    return { old, next };
  }

  async function expectNoOverspend(accessId: string) {
    for (const p of await partsOf(accessId)) {
      expect(BigInt(p.consumed_units) + BigInt(p.reserved_units)).toBeLessThanOrEqual(BigInt(p.granted_units));
    }
  }

  const callOn = (who: Tenant, base = who.gatewayBaseUrl, headers: Record<string, string> = {}, body = BODY) =>
    gatewayFetch()(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${who.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0', ...headers },
      body,
    });

  it("an idle lease's unused units go to the new part once it is released: the same grants as with no lease", async () => {
    const { tenant, planB } = await tenantAndPlanB();
    const res = await callOn(tenant);
    await res.text();
    expect(res.status).toBe(200);
    // The call is recorded; its lease still holds the rest of its slice (an eighth of the period).
    await until(async () => (await periodOf(app, tenant.accessId)).consumed === 20n);
    expect(await periodOf(app, tenant.accessId)).toEqual({ granted: 3000n, reserved: 355n, consumed: 20n });

    await changeTo(tenant.accessId, planB);
    // At the change the lease counted as used: the old part kept it, the new part was charged for it.
    const [oldAtChange, nextAtChange] = await partsOf(tenant.accessId);
    expect(BigInt(oldAtChange.granted_units)).toBe(375n);
    await expectNoOverspend(tenant.accessId);

    await drainAll();
    const { old, next } = await expectNoLeaseGrants(tenant.accessId);
    expect(BigInt(old.granted_units)).toBe(20n);
    expect(BigInt(next.granted_units) - BigInt(nextAtChange.granted_units)).toBe(355n);
    expect((await appLeasesOf(tenant.accessId)).map((l) => l.status)).toEqual(['RELEASED']);
    // Releasing again (a retried release) moves nothing more.
    await drainAll();
    expect((await partsOf(tenant.accessId)).map((p) => BigInt(p.granted_units))).toEqual(
      [old.granted_units, next.granted_units].map(BigInt),
    );
  });

  it('a call right after the change, its access cached with the old period, is admitted on the new part', async () => {
    const { tenant, planB } = await tenantAndPlanB(cached);
    expect((await callOn(tenant)).status).toBe(200);
    // The lease is released, so the next call must hold on the period its cached row names: the old one.
    await cached.nexus.gateway.drain();
    await changeTo(tenant.accessId, planB, cached);
    const res = await callOn(tenant);
    await res.text();
    expect(res.status).toBe(200);
    await cached.nexus.gateway.drain();
    const [old, next] = await partsOf(tenant.accessId, cached);
    expect([BigInt(old.consumed_units), BigInt(next.consumed_units)]).toEqual([20n, 20n]);
    expect(res.headers.get('x-nexus-quota-reset')).toBe(next.period_end.toISOString());
  });

  it('with no lease held at the change the grants are the same rule (the reference)', async () => {
    const { tenant, planB } = await tenantAndPlanB();
    expect((await callOn(tenant)).status).toBe(200);
    await drainAll();
    await changeTo(tenant.accessId, planB);
    const { old } = await expectNoLeaseGrants(tenant.accessId);
    expect(BigInt(old.granted_units)).toBe(20n);
  });

  it('a call in flight during the change settles on the old part without overspend; the rest of its lease moves on', async () => {
    const { tenant, planB } = await tenantAndPlanB();
    const streamBody = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'lease' }], max_tokens: 10, stream: true });
    const res = await callOn(tenant, tenant.gatewayBaseUrl, { 'x-fake-fault': 'slow', 'x-fake-delay-ms': '100' }, streamBody);
    expect(res.status).toBe(200);
    // The stream is running: its bound is held on the old period through the lease.
    expect((await periodOf(app, tenant.accessId)).reserved).toBe(375n);
    await changeTo(tenant.accessId, planB);
    await expectNoOverspend(tenant.accessId);
    await res.text();
    await drainAll();

    const invocation = await app.database
      .db('invocations')
      .where({ request_id: res.headers.get('x-nexus-request-id')! })
      .first();
    expect(invocation.status).toBe('SUCCEEDED');
    const units = BigInt(invocation.quota_units);
    expect(units).toBeGreaterThan(0n);
    const { old, next } = await expectNoLeaseGrants(tenant.accessId);
    // Charged on the old part, where it was admitted; the old part keeps exactly that.
    expect(BigInt(old.consumed_units)).toBe(units);
    expect(BigInt(old.granted_units)).toBe(units);
    expect(BigInt(next.consumed_units)).toBe(0n);
    const usage = await app.database.db('usage_events').where({ invocation_id: invocation.id });
    expect(usage.map((u) => [u.quota_period_id, BigInt(u.units)])).toEqual([[old.id, units]]);
    await expectNoOverspend(tenant.accessId);
  });

  it("two processes' leases on the period: each release gives back its own unused units", async () => {
    const { tenant, planB } = await tenantAndPlanB();
    const secondBase = tenant.gatewayBaseUrl.replace(app.url, second.running.url);
    for (const base of [tenant.gatewayBaseUrl, secondBase, tenant.gatewayBaseUrl, secondBase]) {
      const res = await callOn(tenant, base);
      await res.text();
      expect(res.status).toBe(200);
    }
    await until(async () => (await periodOf(app, tenant.accessId)).consumed === 80n);
    expect((await appLeasesOf(tenant.accessId)).filter((l) => l.status === 'HELD')).toHaveLength(2);
    await changeTo(tenant.accessId, planB);
    await expectNoOverspend(tenant.accessId);
    // One process lets go of its lease, then the other.
    await second.drain();
    await expectNoOverspend(tenant.accessId);
    await app.nexus.gateway.drain();
    const { old } = await expectNoLeaseGrants(tenant.accessId);
    expect(BigInt(old.granted_units)).toBe(80n);
    // The new part serves calls (through either process) on its own leases.
    const after = await callOn(tenant, secondBase);
    expect(after.status, await after.text()).toBe(200);
    await drainAll();
    const [, next] = await partsOf(tenant.accessId);
    expect(BigInt(next.consumed_units)).toBe(20n);
  });
});

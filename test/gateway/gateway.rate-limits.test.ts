/**
 * Rate limits per plan (docs/rate-limits.md), through HTTP with the official openai
 * SDK as the caller, against a fake upstream, on two processes: the in-process test
 * app and a Nexus child on the same database. Requests per minute and concurrent
 * calls must hold across both; a refusal is 429 `rate_limited` with Retry-After (the
 * seconds until the call fits, GCRA) and `x-should-retry: true`, and the SDK's own
 * retry gets through once the limit frees, within seconds. Also: the plan's limits in
 * the Admin API and changed on a published plan, the TPM correction in the headers,
 * the access quota snapshot's rateLimits, and GET /v1/me.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../generated/client/client/index.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startNexusProcess, type NexusProcess } from '../support/nexus-process.js';
import {
  createPlan,
  getMe,
  getPlan,
  getWorkspaceAccessQuota,
  listPlans,
  revokeInferenceKey,
  setPlanRateLimits,
  suspendWorkspaceAccess,
  updatePlan,
} from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { contractFetch } from '../support/contract.js';
import { createTenant, gatewayFetch, until, type Tenant } from './gateway-support.js';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
const KEY = testProviderKey('rate-limits');

let t: TestApp;
let up: FakeUpstream;
let b: NexusProcess | undefined;
let dataDir: string;

/** Processes give back unused allowance after this much idle time (NEXUS_QUOTA_LEASE_IDLE_MS, 1 s by default). */
const IDLE = { NEXUS_QUOTA_LEASE_IDLE_MS: '250' };

beforeAll(async () => {
  t = await startTestApp({ env: IDLE });
  up = await startOpenAiUpstream({ apiKey: KEY });
  if (usesPostgres) {
    dataDir = mkdtempSync(join(tmpdir(), 'nexus-rate-limits-'));
    b = await startNexusProcess({
      DATABASE_URL: t.database.url!,
      NEXUS_DATABASE_SCHEMA: t.database.schema!,
      NEXUS_DATA_DIR: dataDir,
      ...IDLE,
    });
  }
}, 90_000);
afterAll(async () => {
  await b?.stop();
  await t?.close();
  await up?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The tenant's gateway on process A (in-process) or B (the child). */
const baseOn = (tenant: Tenant, on: 'a' | 'b') => (on === 'a' ? tenant.gatewayBaseUrl : tenant.gatewayBaseUrl.replace(t.url, b!.url));

const sdk = (tenant: Tenant, on: 'a' | 'b', options: { maxRetries?: number; headers?: Record<string, string> } = {}) =>
  new OpenAI({
    baseURL: baseOn(tenant, on) + '/v1',
    apiKey: tenant.apiKey,
    fetch: gatewayFetch(),
    maxRetries: options.maxRetries ?? 0,
    defaultHeaders: options.headers ?? {},
  });

const CHAT = { model: 'gpt-test', messages: [{ role: 'user' as const, content: 'Hello' }], max_tokens: 20 };

type Outcome = { ok: true; headers: Headers } | { ok: false; status: number; code: string | undefined; headers: Headers };

/** One chat completion through the SDK (no retries unless asked), as an outcome instead of a throw. */
async function chat(tenant: Tenant, on: 'a' | 'b', headers: Record<string, string> = {}): Promise<Outcome> {
  try {
    const { response } = await sdk(tenant, on, { headers }).chat.completions.create(CHAT).withResponse();
    return { ok: true, headers: response.headers };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    return { ok: false, status: err.status!, code: (err.error as { code?: string } | undefined)?.code, headers: err.headers as Headers };
  }
}

async function tenantWith(rateLimits: { requestsPerMinute?: number; tokensPerMinute?: number; concurrentCalls?: number }) {
  return createTenant(t, { baseUrl: up.url, providerKey: KEY, rateLimits });
}

describe("the plan's limits in the Admin API", () => {
  it('creates, reads, lists and replaces them', async () => {
    const tenant = await tenantWith({ requestsPerMinute: 60, tokensPerMinute: 10_000, concurrentCalls: 3 });
    const plan = await getPlan({ client: t.client, path: { planId: tenant.planId } });
    expect(plan.data!.rateLimits).toEqual({ requestsPerMinute: 60, tokensPerMinute: 10_000, concurrentCalls: 3 });
    const listed = await listPlans({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    expect(listed.data!.find((p) => p.id === tenant.planId)!.rateLimits).toEqual({
      requestsPerMinute: 60,
      tokensPerMinute: 10_000,
      concurrentCalls: 3,
    });

    const draft = await createPlan({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { key: 'draft-rl', name: 'Draft', billingInterval: 'MONTH' },
    });
    expect(draft.response.status).toBe(201);
    expect(draft.data!.rateLimits).toEqual({});
    const set = await updatePlan({ client: t.client, path: { planId: draft.data!.id }, body: { rateLimits: { concurrentCalls: 2 } } });
    expect(set.response.status).toBe(200);
    expect(set.data!.rateLimits).toEqual({ concurrentCalls: 2 });
    const cleared = await updatePlan({ client: t.client, path: { planId: draft.data!.id }, body: { rateLimits: {} } });
    expect(cleared.data!.rateLimits).toEqual({});
  });

  describe.each([
    ['zero', { requestsPerMinute: 0 }],
    ['negative', { tokensPerMinute: -5 }],
    ['fractional', { concurrentCalls: 1.5 }],
    ['a string', { requestsPerMinute: '10' }],
    ['too large', { tokensPerMinute: 2_147_483_648 }],
    ['an unknown field', { requestsPerHour: 10 }],
    ['not an object', 5],
  ])('refuses %s', (_label, rateLimits) => {
    it('with 400 and no plan made or changed', async () => {
      const tenant = await tenantWith({});
      const created = await createPlan({
        client: t.client,
        path: { workspaceId: tenant.workspaceId },
        body: { key: `bad-${Math.random().toString(36).slice(2, 8)}`, name: 'Bad', billingInterval: 'MONTH', rateLimits } as never,
      });
      expect(created.response.status).toBe(400);
      expect(created.error).toMatchObject({ error: { type: 'invalid_request_error' } });
      const plans = await listPlans({ client: t.client, path: { workspaceId: tenant.workspaceId } });
      expect(plans.data!).toHaveLength(1);
      const draft = await createPlan({
        client: t.client,
        path: { workspaceId: tenant.workspaceId },
        body: { key: 'good', name: 'Good', billingInterval: 'MONTH' },
      });
      const updated = await updatePlan({ client: t.client, path: { planId: draft.data!.id }, body: { rateLimits } as never });
      expect(updated.response.status).toBe(400);
      expect((await getPlan({ client: t.client, path: { planId: draft.data!.id } })).data!.rateLimits).toEqual({});
    });
  });
});

describe.skipIf(!usesPostgres)('requests per minute across two processes', () => {
  it('admits exactly the limit, counts down in the headers, and refuses the rest with 429 rate_limited and Retry-After', async () => {
    const tenant = await tenantWith({ requestsPerMinute: 5 });
    const outcomes: Outcome[] = [];
    for (let i = 0; i < 10; i++) outcomes.push(await chat(tenant, i % 2 === 0 ? 'a' : 'b'));
    const admitted = outcomes.filter((o) => o.ok);
    expect(admitted).toHaveLength(5);
    // The first five, alternately on each process, each seeing what the other used.
    expect(outcomes.slice(0, 5).every((o) => o.ok)).toBe(true);
    expect(admitted.map((o) => o.headers.get('x-ratelimit-remaining-requests'))).toEqual(['4', '3', '2', '1', '0']);
    for (const o of admitted) {
      expect(o.headers.get('x-ratelimit-limit-requests')).toBe('5');
      expect(o.headers.get('x-ratelimit-reset-requests')).toMatch(/^((\d+m)?\d+s|\d+ms)$/);
      // The provider's own (x-ratelimit-remaining-requests: 999) is gone.
      expect(o.headers.get('x-ratelimit-limit-tokens')).toBeNull();
    }
    for (const o of outcomes.slice(5)) {
      expect(o).toMatchObject({ ok: false, status: 429, code: 'rate_limited' });
      // GCRA: a request frees every 60 / 5 = 12 s, so the wait is at most that, not the minute's end.
      const retryAfter = Number(o.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(12);
      expect(o.headers.get('x-should-retry')).toBe('true');
      expect(o.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    }
    // Refused calls never reached the provider and are recorded REJECTED rate_limited.
    await t.nexus.gateway.drain();
    await until(async () => (await t.database.db('invocations').where({ workspace_access_id: tenant.accessId })).length === 10);
    const rows = await t.database.db('invocations').where({ workspace_access_id: tenant.accessId });
    expect(rows.filter((r) => r.error_code === 'rate_limited')).toHaveLength(5);
    expect(rows.filter((r) => r.status === 'SUCCEEDED')).toHaveLength(5);
  });

  it('a quota refusal still says x-should-retry: false, a rate refusal true', async () => {
    const quotaTenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      quotaUnits: 1n,
      rateLimits: { requestsPerMinute: 100 },
    });
    const refused = await chat(quotaTenant, 'a');
    expect(refused).toMatchObject({ ok: false, status: 429, code: 'quota_insufficient' });
    expect(refused.headers.get('x-should-retry')).toBe('false');
    expect(refused.headers.get('x-ratelimit-limit-requests')).toBe('100');
  });
});

describe.skipIf(!usesPostgres)("the openai SDK's own retry of a requests-per-minute refusal", () => {
  it("gets through within 5 s, not at the minute's end", async () => {
    const tenant = await tenantWith({ requestsPerMinute: 20 });
    // Use the whole limit, on both processes, until a call is refused.
    let refused: Outcome | undefined;
    for (let i = 0; i < 60 && !refused; i++) {
      const o = await chat(tenant, i % 2 === 0 ? 'a' : 'b');
      if (!o.ok) refused = o;
    }
    expect(refused).toMatchObject({ ok: false, status: 429, code: 'rate_limited' });
    // A request comes back every 60 / 20 = 3 s: that is the longest wait, whatever the clock's minute.
    const retryAfter = Number(refused!.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(3);
    expect(refused!.headers.get('x-should-retry')).toBe('true');
    const refusals = async () =>
      (await t.database.db('invocations').where({ workspace_access_id: tenant.accessId, error_code: 'rate_limited' })).length;
    await t.nexus.gateway.drain();
    const before = await refusals();
    // The SDK as a new user has it (2 retries, honouring Retry-After): refused, waits, retries, succeeds.
    const started = Date.now();
    const { response } = await sdk(tenant, 'a', { maxRetries: 2 }).chat.completions.create(CHAT).withResponse();
    const took = Date.now() - started;
    expect(response.status).toBe(200);
    expect(took).toBeLessThan(5_000);
    await until(async () => (await refusals()) > before);
  });
});

describe.skipIf(!usesPostgres)("a published plan's limits changed", () => {
  it('apply on the next call, on this process and on another, and the change is audited', async () => {
    const tenant = await tenantWith({ requestsPerMinute: 2 });
    expect((await getPlan({ client: t.client, path: { planId: tenant.planId } })).data!.status).toBe('ACTIVE');
    expect((await chat(tenant, 'a')).ok).toBe(true);
    expect((await chat(tenant, 'b')).ok).toBe(true);
    expect(await chat(tenant, 'a')).toMatchObject({ ok: false, status: 429, code: 'rate_limited' });
    expect(await chat(tenant, 'b')).toMatchObject({ ok: false, status: 429, code: 'rate_limited' });

    // Raised: the next call is admitted, here at once, on the other process once its notification lands.
    const raised = await setPlanRateLimits({ client: t.client, path: { planId: tenant.planId }, body: { requestsPerMinute: 600 } });
    expect(raised.response.status).toBe(200);
    expect(raised.data).toMatchObject({ id: tenant.planId, status: 'ACTIVE', rateLimits: { requestsPerMinute: 600 } });
    const onA = await chat(tenant, 'a');
    expect(onA.ok).toBe(true);
    expect(onA.headers.get('x-ratelimit-limit-requests')).toBe('600');
    let onB: Outcome | undefined;
    // (A call B admits before the notification lands, at the old pace as time refilled it, says so in its headers.)
    await until(async () => {
      onB = await chat(tenant, 'b');
      return onB.ok && onB.headers.get('x-ratelimit-limit-requests') === '600';
    }, 2_000);
    expect(onB!.headers.get('x-ratelimit-limit-requests')).toBe('600');

    // Lowered to 1 a minute: the next calls are counted at the new pace (what was used at 600 a minute
    // may have drained already): at most one is admitted, and then the access is refused, on either process.
    await setPlanRateLimits({ client: t.client, path: { planId: tenant.planId }, body: { requestsPerMinute: 1 } });
    const low = [await chat(tenant, 'a'), await chat(tenant, 'a')];
    expect(low[0]!.headers.get('x-ratelimit-limit-requests')).toBe('1');
    expect(low[1]).toMatchObject({ ok: false, status: 429, code: 'rate_limited' });
    expect(low[1]!.headers.get('x-ratelimit-limit-requests')).toBe('1');
    await until(async () => {
      const onB = await chat(tenant, 'b');
      return !onB.ok && onB.headers.get('x-ratelimit-limit-requests') === '1';
    }, 2_000);

    // Removed: no limit and no headers.
    await setPlanRateLimits({ client: t.client, path: { planId: tenant.planId }, body: {} });
    const free = await chat(tenant, 'a');
    expect(free.ok).toBe(true);
    expect(free.headers.get('x-ratelimit-limit-requests')).toBeNull();

    const audited = await t.database
      .db('audit_logs')
      .where({ resource_id: tenant.planId, action: 'plan.rate_limits_changed' })
      .orderBy(['created_at', 'id']);
    expect(audited).toHaveLength(3);
    expect(audited[0].changes).toEqual({
      before: { requestsPerMinute: 2, tokensPerMinute: null, concurrentCalls: null },
      after: { requestsPerMinute: 600, tokensPerMinute: null, concurrentCalls: null },
    });
  });

  it('refuses bad limits with 400 naming the field, and changes nothing', async () => {
    const tenant = await tenantWith({ requestsPerMinute: 5 });
    for (const body of [{ requestsPerMinute: 0 }, { tokensPerMinute: 1.5 }, { concurrentCalls: 'two' }, { requestsPerMinut: 5 }]) {
      const bad = await setPlanRateLimits({ client: t.client, path: { planId: tenant.planId }, body: body as never });
      expect(bad.response.status).toBe(400);
      expect(JSON.stringify(bad.error)).toMatch(Object.keys(body)[0]!);
    }
    expect((await getPlan({ client: t.client, path: { planId: tenant.planId } })).data!.rateLimits).toEqual({ requestsPerMinute: 5 });
    expect(await t.database.db('audit_logs').where({ resource_id: tenant.planId, action: 'plan.rate_limits_changed' })).toHaveLength(0);
  });
});

describe.skipIf(!usesPostgres)('concurrent calls across two processes', () => {
  it('holds exactly the limit while calls run, on either process, and frees a slot when a call ends', async () => {
    const tenant = await tenantWith({ concurrentCalls: 2 });
    const slow = { 'x-fake-fault': 'late', 'x-fake-delay-ms': '1500' };
    const held = [chat(tenant, 'a', slow), chat(tenant, 'b', slow)];
    await sleep(500);
    const third = await Promise.all([chat(tenant, 'a'), chat(tenant, 'b')]);
    for (const o of third) {
      expect(o).toMatchObject({ ok: false, status: 429, code: 'rate_limited' });
      expect(o.headers.get('retry-after')).toBe('1');
      expect(o.headers.get('x-should-retry')).toBe('true');
      expect(o.headers.get('x-nexus-ratelimit-remaining-concurrent')).toBe('0');
    }
    for (const o of await Promise.all(held)) expect(o.ok).toBe(true);
    // At its limit, a process gives a freed slot back at once (the statement lands a moment later).
    await sleep(200);
    const after = await Promise.all([chat(tenant, 'a', slow), chat(tenant, 'b', slow)]);
    for (const o of after) expect(o.ok).toBe(true);
    await until(async () => (await t.database.db('rate_windows').where({ workspace_access_id: tenant.accessId }).first()).concurrent === 0);
  });

  it('the SDK retries a concurrency refusal after Retry-After and gets through', async () => {
    const tenant = await tenantWith({ concurrentCalls: 1 });
    const holding = chat(tenant, 'a', { 'x-fake-fault': 'late', 'x-fake-delay-ms': '700' });
    await sleep(200);
    const started = Date.now();
    const { response } = await sdk(tenant, 'b', { maxRetries: 2 }).chat.completions.create(CHAT).withResponse();
    expect(response.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect((await holding).ok).toBe(true);
    // Its first try was refused (recorded by process B) and a retry admitted.
    await until(
      async () =>
        (await t.database.db('invocations').where({ workspace_access_id: tenant.accessId, error_code: 'rate_limited' })).length >= 1,
    );
  });
});

describe.skipIf(!usesPostgres)('a process that dies holding slots', () => {
  it('has them freed by the sweeper once its allowance is past its TTL', async () => {
    const c = await startNexusProcess({
      DATABASE_URL: t.database.url!,
      NEXUS_DATABASE_SCHEMA: t.database.schema!,
      NEXUS_DATA_DIR: mkdtempSync(join(dataDir, 'c-')),
      NEXUS_LEASE_TTL_MS: '1000',
      ...IDLE,
    });
    try {
      const tenant = await tenantWith({ concurrentCalls: 1 });
      const onC = fetch(`${tenant.gatewayBaseUrl.replace(t.url, c.url)}/v1/chat/completions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${tenant.apiKey}`,
          'content-type': 'application/json',
          'x-fake-fault': 'late',
          'x-fake-delay-ms': '5000',
        },
        body: JSON.stringify(CHAT),
      }).catch(() => undefined);
      await until(async () => (await t.database.db('rate_allowances').where({ workspace_access_id: tenant.accessId })).length === 1);
      await c.kill();
      await onC;
      expect(await chat(tenant, 'a')).toMatchObject({ ok: false, status: 429, code: 'rate_limited' });
      // Not before its TTL: the process might only be slow.
      await t.nexus.gateway.sweepExpired();
      expect((await t.database.db('rate_windows').where({ workspace_access_id: tenant.accessId }).first()).concurrent).toBe(1);
      // Past it (the shortest TTL the config allows), the sweep frees them.
      await until(async () => {
        await t.nexus.gateway.sweepExpired();
        return (await t.database.db('rate_allowances').where({ workspace_access_id: tenant.accessId })).length === 0;
      });
      expect((await chat(tenant, 'a')).ok).toBe(true);
    } finally {
      await c.kill();
    }
  }, 90_000);
});

describe('tokens per minute', () => {
  it("counts a call's bound at admission and gives back what it did not use, which the next call's headers show", async () => {
    // 600 tokens a minute: one token comes back every 100 ms, so the figures move little between two calls.
    const tenant = await tenantWith({ tokensPerMinute: 600 });
    /** Two calls in a row on process A: what the second's headers say was used by the first (less what drained meanwhile). */
    async function usedByFirst(first: string, second: string): Promise<{ used: number; drained: number }> {
      const started = Date.now();
      const a = await chat(tenant, 'a', { 'x-fake-usage': first });
      expect(a.ok).toBe(true);
      // The first call is settled when its record is made, right after its answer.
      await sleep(100);
      const b = await chat(tenant, 'a', { 'x-fake-usage': second });
      expect(b.ok).toBe(true);
      const drained = Math.ceil((Date.now() - started) / 100) + 1;
      expect(a.headers.get('x-ratelimit-limit-tokens')).toBe('600');
      expect(a.headers.get('x-ratelimit-reset-tokens')).toMatch(/^((\d+m)?\d+s|\d+ms)$/);
      return {
        used: Number(a.headers.get('x-ratelimit-remaining-tokens')) - Number(b.headers.get('x-ratelimit-remaining-tokens')),
        drained,
      };
    }
    // Each call is admitted for its bound (its max_tokens, 20, and its input's bound) and the same bound both
    // times; the second sees the first's 15 actual tokens, not its bound.
    const plain = await usedByFirst('10,5,0', '10,5,0');
    expect(plain.used).toBeLessThanOrEqual(15);
    expect(plain.used).toBeGreaterThanOrEqual(15 - plain.drained);
    // Cached input is input: 10 input tokens of which 4 cached, and 5 output, count 15 too.
    const cached = await usedByFirst('10,5,4', '10,5,0');
    expect(cached.used).toBeLessThanOrEqual(15);
    expect(cached.used).toBeGreaterThanOrEqual(15 - cached.drained);
  });

  it('refuses a call whose bound exceeds the limit without asking for a retry', async () => {
    const tenant = await tenantWith({ tokensPerMinute: 10 });
    const refused = await chat(tenant, 'a');
    expect(refused).toMatchObject({ ok: false, status: 429, code: 'rate_limited' });
    expect(refused.headers.get('x-should-retry')).toBe('false');
    expect(refused.headers.get('retry-after')).toBeNull();
  });
});

describe('the x-ratelimit-* headers', () => {
  it('are on every answer of a key whose plan sets limits: a call, a refusal, the model list', async () => {
    const tenant = await tenantWith({ requestsPerMinute: 1 });
    const call = await chat(tenant, 'a');
    const refusal = await chat(tenant, 'a');
    expect(refusal).toMatchObject({ ok: false, status: 429 });
    const list = await sdk(tenant, 'a').models.list().withResponse();
    for (const headers of [call.headers, refusal.headers, list.response.headers]) {
      expect(headers.get('x-ratelimit-limit-requests')).toBe('1');
      expect(headers.get('x-ratelimit-remaining-requests')).toBe('0');
      expect(headers.get('x-ratelimit-reset-requests')).toMatch(/^((\d+m)?\d+s|\d+ms)$/);
    }
    // A plan without limits has none to state.
    const plain = await tenantWith({});
    expect((await chat(plain, 'a')).headers.get('x-ratelimit-limit-requests')).toBeNull();
  });
});

describe('the access quota snapshot', () => {
  it('includes where each limit stands', async () => {
    const tenant = await tenantWith({ requestsPerMinute: 50, concurrentCalls: 4 });
    expect((await chat(tenant, 'a')).ok).toBe(true);
    await t.nexus.gateway.drain();
    const snap = await getWorkspaceAccessQuota({ client: t.client, path: { accessId: tenant.accessId } });
    expect(snap.response.status).toBe(200);
    expect(snap.data!.rateLimits).toMatchObject({
      requestsPerMinute: { limit: 50, remaining: 49 },
      concurrentCalls: { limit: 4, remaining: 4 },
    });
    // Whole again once the one request has drained: 60 / 50 = 1.2 s after it, not at the minute's end.
    const resetIn = Date.parse(snap.data!.rateLimits!.requestsPerMinute!.resetAt) - Date.now();
    expect(resetIn).toBeGreaterThan(-1_000);
    expect(resetIn).toBeLessThanOrEqual(1_200);
    const plain = await tenantWith({});
    const none = await getWorkspaceAccessQuota({ client: t.client, path: { accessId: plain.accessId } });
    expect(none.data!.rateLimits).toBeUndefined();
  });
});

describe('GET /v1/me', () => {
  const meClient = (headers: Record<string, string>) => createClient({ baseUrl: t.url, fetch: contractFetch(), headers });

  it("answers the key's access, plan, period, limits, models and expiry, by Bearer or x-api-key", async () => {
    const tenant = await tenantWith({ requestsPerMinute: 30, tokensPerMinute: 5000 });
    expect((await chat(tenant, 'a')).ok).toBe(true);
    await t.nexus.gateway.drain();
    const ways: Record<string, string>[] = [{ Authorization: `Bearer ${tenant.apiKey}` }, { 'x-api-key': tenant.apiKey }];
    for (const headers of ways) {
      const me = await getMe({ client: meClient(headers) });
      expect(me.response.status).toBe(200);
      expect(me.data).toMatchObject({
        accessId: tenant.accessId,
        workspaceId: tenant.workspaceId,
        status: 'ACTIVE',
        plan: { id: tenant.planId },
        allowedModels: null,
        key: { id: tenant.apiKeyId },
        rateLimits: { requestsPerMinute: { limit: 30, remaining: 29 }, tokensPerMinute: { limit: 5000 } },
      });
      const period = me.data!.quotaPeriod!;
      expect(BigInt(period.grantedUnits)).toBe(1_000_000n);
      expect(BigInt(period.consumedUnits)).toBeGreaterThan(0n);
      expect(BigInt(period.availableUnits)).toBe(BigInt(period.grantedUnits) - BigInt(period.consumedUnits) - BigInt(period.reservedUnits));
      expect(Date.parse(me.data!.key.expiresAt)).toBeGreaterThan(Date.now());
    }
  });

  it('shows a suspended access as such, and refuses a missing, wrong or revoked key with 401', async () => {
    const tenant = await tenantWith({});
    const suspended = await suspendWorkspaceAccess({ client: t.client, path: { accessId: tenant.accessId } });
    expect(suspended.response.status).toBe(200);
    const me = await getMe({ client: meClient({ Authorization: `Bearer ${tenant.apiKey}` }) });
    expect(me.data).toMatchObject({ status: 'SUSPENDED', rateLimits: null });

    expect((await getMe({ client: meClient({}) })).response.status).toBe(401);
    expect((await getMe({ client: meClient({ Authorization: 'Bearer nx-wrong-key-0123456789' }) })).response.status).toBe(401);
    const revoked = await revokeInferenceKey({ client: t.client, path: { accessId: tenant.accessId, keyId: tenant.apiKeyId } });
    expect(revoked.response.status).toBe(204);
    const after = await getMe({ client: meClient({ Authorization: `Bearer ${tenant.apiKey}` }) });
    expect(after.response.status).toBe(401);
    expect(after.error).toMatchObject({ error: { code: 'invalid_inference_key' } });
  });

  it('is not served to a Management Key or by another method', async () => {
    const asAdmin = await fetch(`${t.url}/v1/me`, {
      headers: { authorization: `Bearer ${'nx-mgmt-test-root-0123456789abcdefghijklmnop'}` },
    });
    expect(asAdmin.status).toBe(401);
    const post = await fetch(`${t.url}/v1/me`, { method: 'POST', headers: { authorization: 'Bearer x' } });
    expect(post.status).toBe(405);
  });
});

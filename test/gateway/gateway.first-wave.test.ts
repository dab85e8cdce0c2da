/**
 * The first wave of JSON calls to a model its connection has not answered on this process yet
 * (docs/reliability.md "The first wave", src/gateway/first-wave.ts): an access has at most
 * NEXUS_FIRST_WAVE_CALLS (2) of them under way at once; the others wait for the first answer, which admits
 * them at the output it taught when it went past its bound. Against an upstream that ignores max_tokens, the
 * units charged beyond the calls' bounds are then at most 2 calls' excess, however many calls come at once.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, periodOf, until, type Tenant } from './gateway-support.js';

const KEY = testProviderKey('first-wave');
/** The default NEXUS_FIRST_WAVE_CALLS. */
const FIRST_WAVE = 2;

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

const sdk = (tenant: { gatewayBaseUrl: string }, apiKey: string, headers: Record<string, string>, app = t) =>
  new OpenAI({
    baseURL: tenant.gatewayBaseUrl.replace(t.url, app.url) + '/v1',
    apiKey,
    fetch: gatewayFetch(),
    maxRetries: 0,
    defaultHeaders: headers,
  });

const ask = (model: string) => ({ model, messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 20 });

/** The status a call ended with, and the code of a refusal. */
async function outcome(call: Promise<unknown>): Promise<{ status: number; code?: string }> {
  try {
    await call;
    return { status: 200 };
  } catch (err) {
    const e = err as { status?: number; code?: string };
    return { status: e.status ?? 0, ...(e.code ? { code: e.code } : {}) };
  }
}

async function adjustmentUnits(accessId: string): Promise<bigint> {
  const row = await t.database
    .db('usage_events')
    .where({ workspace_access_id: accessId, kind: 'ADJUSTMENT' })
    .sum({ units: 'units' })
    .first();
  return BigInt(row?.units ?? 0);
}

describe('an upstream that ignores max_tokens, 100 JSON calls at once to a model it has not answered yet', () => {
  it('charges at most the first wave beyond the calls’ bounds, and the period stays within that of its grant', async () => {
    const granted = 100_000n;
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: granted, outputPpm: 1_000_000n });
    // 2,000 output tokens for max_tokens 20, 300 ms after the request.
    const openai = sdk(tenant, tenant.apiKey, { 'x-fake-usage': '10,2000,0', 'x-fake-fault': 'late', 'x-fake-delay-ms': '300' });
    const outcomes = await Promise.all(Array.from({ length: 100 }, () => outcome(openai.chat.completions.create(ask('gpt-runaway')))));
    await t.nexus.gateway.drain();
    const answered = outcomes.filter((o) => o.status === 200).length;
    // Waiting is not refusing: every call was answered, or refused because the quota could not cover what the
    // first answers taught the gateway it produces.
    expect(outcomes.filter((o) => o.status !== 200).every((o) => o.status === 429 && o.code === 'quota_insufficient')).toBe(true);
    expect(answered).toBeGreaterThan(FIRST_WAVE);
    // Each first-wave call was admitted at its bound (its input and 20 output tokens) and charged 2,010: 1,980 past it.
    const beyond = await adjustmentUnits(tenant.accessId);
    expect(beyond).toBeGreaterThan(0n);
    expect(beyond).toBeLessThanOrEqual(BigInt(FIRST_WAVE) * 1980n);
    const period = await periodOf(t, tenant.accessId);
    expect(period.reserved).toBe(0n);
    expect(period.consumed).toBe(BigInt(answered) * 2010n);
    expect(period.consumed - granted).toBeLessThanOrEqual(beyond);
  });
});

describe('the calls beyond the first wave', () => {
  it('wait for a place, and are refused 429 first_wave_limited after NEXUS_FIRST_WAVE_WAIT_MS; another access is not held', async () => {
    const other = await t.withEnv({ NEXUS_FIRST_WAVE_WAIT_MS: '300' });
    try {
      const tenant: Tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n, users: 2 });
      // Answered 3 s after the request: the first two hold their places all that time.
      const headers = { 'x-fake-fault': 'late', 'x-fake-delay-ms': '3000' };
      const seen = up.requests.length;
      const openai = sdk(tenant, tenant.apiKey, headers, other);
      const calls = Array.from({ length: 5 }, () => outcome(openai.chat.completions.create(ask('gpt-slow'))));
      // The other user's call is in a lane of its own.
      const second = outcome(sdk(tenant, tenant.users[1]!.apiKey, headers, other).chat.completions.create(ask('gpt-slow')));
      // The first two places are taken (and the other user's): this call waits, as the three after them do.
      await until(async () => up.requests.length - seen === FIRST_WAVE + 1, 5000);
      const res = await gatewayFetch()(`${tenant.gatewayBaseUrl.replace(t.url, other.url)}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(ask('gpt-slow')),
      });
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(res.headers.get('x-should-retry')).toBe('true');
      const error = ((await res.json()) as { error: { code: string; type: string; message: string } }).error;
      expect(error).toMatchObject({ code: 'first_wave_limited', type: 'rate_limit_error' });
      expect(error.message).toContain(`limited to ${FIRST_WAVE} at a time`);
      // Refused before the first answers came (3 s): the upstream was asked by the first two calls of the first
      // user and by the second user's, no more.
      expect(up.requests.length - seen).toBe(FIRST_WAVE + 1);
      const statuses = await Promise.all(calls);
      expect(statuses.filter((o) => o.status === 200)).toHaveLength(FIRST_WAVE);
      expect(statuses.filter((o) => o.code === 'first_wave_limited')).toHaveLength(5 - FIRST_WAVE);
      expect((await second).status).toBe(200);
      await other.nexus.gateway.drain();
      const refused = await t.database
        .db('invocations')
        .where({ workspace_access_id: tenant.accessId, error_code: 'first_wave_limited' })
        .select('status', 'quota_units');
      expect(refused).toHaveLength(5 - FIRST_WAVE + 1);
      for (const row of refused) expect(row).toMatchObject({ status: 'REJECTED', quota_units: 0n });
      expect((await periodOf(t, tenant.accessId)).reserved).toBe(0n);
    } finally {
      await other.close();
    }
  });

  it('are not held once the model has answered, nor when they are streams', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n });
    // Streams to a model never answered: all at the upstream at once (a stream is held to its bound as it is relayed).
    const slow = sdk(tenant, tenant.apiKey, { 'x-fake-fault': 'slow', 'x-fake-delay-ms': '200' });
    const streams = Array.from({ length: 6 }, async () => {
      const stream = await slow.chat.completions.create({ ...ask('gpt-history'), stream: true });
      for await (const _chunk of stream);
    });
    await until(async () => up.open() >= 6, 5000);
    await Promise.all(streams);
    // One JSON answer gives the model its history; then six JSON calls reach the upstream together.
    const late = sdk(tenant, tenant.apiKey, { 'x-fake-fault': 'late', 'x-fake-delay-ms': '1000' });
    await sdk(tenant, tenant.apiKey, {}).chat.completions.create(ask('gpt-history'));
    const calls = Array.from({ length: 6 }, () => outcome(late.chat.completions.create(ask('gpt-history'))));
    await until(async () => up.open() >= 6, 5000);
    expect((await Promise.all(calls)).every((o) => o.status === 200)).toBe(true);
  });
});

/**
 * An upstream that answers past the call's output bound (it ignores max_tokens): each such call is charged
 * what it used, beyond what its lease held for it, and the next call on the period is admitted only once
 * that consumption is in the database. Back to back, the calls overspend the grant by at most one call's
 * excess over its bound.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, periodOf, type Tenant } from '../gateway/gateway-support.js';

const GRANT = 3000n;
/** Input 10, output 500 tokens whatever the request asked, at one unit a token: 510 units a call. */
const CALL_UNITS = 510n;

let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;

beforeAll(async () => {
  const key = testProviderKey('overrun');
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: key });
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: key, quotaUnits: GRANT, outputPpm: 1_000_000n });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

describe('an upstream that ignores max_tokens', () => {
  it('back-to-back streams overspend by at most one call, and each is charged what it used', async () => {
    const openai = new OpenAI({
      baseURL: tenant.gatewayBaseUrl + '/v1',
      apiKey: tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
      defaultHeaders: { 'x-fake-usage': '10,500,0' },
    });
    let answered = 0;
    let refused = 0;
    for (let i = 0; i < 20 && refused === 0; i++) {
      try {
        const stream = await openai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20, stream: true });
        for await (const _chunk of stream);
        answered++;
      } catch (err) {
        expect(err).toBeInstanceOf(OpenAI.RateLimitError);
        expect((err as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('quota_insufficient');
        refused++;
      }
    }
    expect(refused).toBe(1);
    await t.nexus.gateway.drain();
    const period = await periodOf(t, tenant.accessId);
    expect(period.reserved).toBe(0n);
    expect(period.consumed).toBe(BigInt(answered) * CALL_UNITS);
    // The last admitted call found units left for its bound; only its excess can go past the grant.
    expect(period.consumed - GRANT).toBeLessThanOrEqual(CALL_UNITS);
    expect(answered).toBe(Number((GRANT + CALL_UNITS - 1n) / CALL_UNITS));
  });
});

/**
 * An upstream that answers past the call's output bound (it ignores max_tokens): each such call is charged
 * what it used, beyond what its lease held for it, and the next call on the period is admitted only once
 * that consumption is in the database. The calls after it on the same connection and model are admitted
 * at the output it produced (learned-bounds.ts): back to back, only the first call goes past its bound;
 * in concurrent waves of JSON calls, the overspend is at most the first wave's.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicUpstream, startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
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
  it('back-to-back streams whose final usage says more: the first teaches the others, none goes past the grant', async () => {
    const openai = new OpenAI({
      baseURL: tenant.gatewayBaseUrl + '/v1',
      apiKey: tenant.apiKey,
      fetch: gatewayFetch(),
      maxRetries: 0,
      defaultHeaders: { 'x-fake-usage': '10,500,0' },
    });
    let answered = 0;
    let refusal = '';
    for (let i = 0; i < 20 && !refusal; i++) {
      try {
        const stream = await openai.chat.completions.create({
          model: 'gpt-test',
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 20,
          stream: true,
        });
        for await (const _chunk of stream);
        answered++;
      } catch (err) {
        expect(err).toBeInstanceOf(OpenAI.RateLimitError);
        expect((err as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('quota_insufficient');
        refusal = (err as Error).message;
      }
    }
    expect(refusal).not.toBe('');
    await t.nexus.gateway.drain();
    const period = await periodOf(t, tenant.accessId);
    expect(period.reserved).toBe(0n);
    expect(period.consumed).toBe(BigInt(answered) * CALL_UNITS);
    // The first call was admitted at its bound of 20 output tokens and charged 500; every later one at 500.
    expect(period.consumed).toBeLessThanOrEqual(GRANT);
    const [, need, available] = /may need up to (\d+) units; (\d+) are available/.exec(refusal)!;
    expect(BigInt(available!)).toBe(GRANT - period.consumed);
    expect(BigInt(need!)).toBeGreaterThan(BigInt(available!));
    expect(BigInt(need!)).toBeGreaterThanOrEqual(500n);
  });
});

/**
 * JSON answers past the bound cannot be cut: they reach the gateway whole. Once one has come back, the
 * calls after it on its connection and model are admitted at the output it produced (learned-bounds.ts),
 * so 200 calls in 10 waves of 20 overspend no more than the first wave did.
 */
describe.each(['openai', 'anthropic'] as const)('JSON answers past the bound, in waves (%s)', (profile) => {
  const OUTPUT = 2000;
  const WAVES = 10;
  const WAVE = 20;
  const HEADERS = { 'x-fake-usage': `10,${OUTPUT},0`, 'x-fake-fault': 'late', 'x-fake-delay-ms': '150' };

  it('the overspend of all the waves is at most the first wave’s', async () => {
    const key = testProviderKey(`waves-${profile}`);
    const upstream = profile === 'openai' ? await startOpenAiUpstream({ apiKey: key }) : await startAnthropicUpstream({ apiKey: key });
    try {
      const granted = 50_000n;
      const who = await createTenant(t, { profile, baseUrl: upstream.url, providerKey: key, quotaUnits: granted, outputPpm: 1_000_000n });
      const openai = new OpenAI({
        baseURL: who.gatewayBaseUrl + '/v1',
        apiKey: who.apiKey,
        fetch: gatewayFetch(),
        maxRetries: 0,
        defaultHeaders: HEADERS,
      });
      const anthropic = new Anthropic({
        baseURL: who.gatewayBaseUrl,
        apiKey: who.apiKey,
        fetch: gatewayFetch(),
        maxRetries: 0,
        defaultHeaders: HEADERS,
      });
      const call = async (): Promise<number> => {
        try {
          if (profile === 'openai') {
            const answer = await openai.chat.completions.create({
              model: 'gpt-test',
              messages: [{ role: 'user', content: 'hi' }],
              max_tokens: 20,
            });
            expect(answer.usage?.completion_tokens).toBe(OUTPUT);
          } else {
            const answer = await anthropic.messages.create({
              model: 'claude-test',
              messages: [{ role: 'user', content: 'hi' }],
              max_tokens: 20,
            });
            expect(answer.usage.output_tokens).toBe(OUTPUT);
          }
          return 200;
        } catch (err) {
          const status = (err as { status?: number }).status;
          expect(status, String(err)).toBe(429);
          return 429;
        }
      };
      /** Per wave: calls answered, and units charged beyond the calls' bounds (the ADJUSTMENT events). */
      const waves: { answered: number; beyondBounds: bigint }[] = [];
      let adjustedBefore = 0n;
      for (let w = 0; w < WAVES; w++) {
        const statuses = await Promise.all(Array.from({ length: WAVE }, call));
        await t.nexus.gateway.drain();
        const adjusted = await adjustmentUnits(who.accessId);
        waves.push({ answered: statuses.filter((s) => s === 200).length, beyondBounds: adjusted - adjustedBefore });
        adjustedBefore = adjusted;
      }
      const [first, ...later] = waves;
      // The whole first wave was admitted at its bound and answered past it.
      expect(first!.answered).toBe(WAVE);
      expect(first!.beyondBounds).toBeGreaterThan(0n);
      // Later calls are admitted at what they are charged: some still fit, none goes past its bound.
      expect(later[0]!.answered).toBeGreaterThan(0);
      expect(later.map((w) => w.beyondBounds)).toEqual(later.map(() => 0n));
      const period = await periodOf(t, who.accessId);
      expect(period.reserved).toBe(0n);
      // Each answered call is charged what its upstream reported: 10 input tokens and OUTPUT output tokens.
      const answered = waves.reduce((n, w) => n + w.answered, 0);
      expect(period.consumed).toBe(BigInt(answered) * BigInt(10 + OUTPUT));
      const overGrant = period.consumed > granted ? period.consumed - granted : 0n;
      expect(overGrant).toBeLessThanOrEqual(first!.beyondBounds);
    } finally {
      await upstream.close();
    }
  });
});

async function adjustmentUnits(accessId: string): Promise<bigint> {
  const row = await t.database
    .db('usage_events')
    .where({ workspace_access_id: accessId, kind: 'ADJUSTMENT' })
    .sum({ units: 'units' })
    .first();
  return BigInt(row?.units ?? 0);
}

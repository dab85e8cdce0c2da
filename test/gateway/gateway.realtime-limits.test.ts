/**
 * A Realtime session's limits per turn (docs/realtime.md), against a fake Realtime upstream (a real ws server):
 * a turn the plan's tokens per minute cannot hold is refused with an `error` event and not sent upstream, the
 * session staying open (a turn the provider started itself is cancelled, and charged what it used); a session
 * under a plan's maxOutputTokens is opened with it as its output cap, so a turn the
 * provider starts on its own (server VAD, no `response.create`) stops there too.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startRealtimeUpstream, type FakeRealtime } from '../support/upstreams/realtime.js';
import { createTenant, until } from './gateway-support.js';
import { openRaw, sessionRecord, turnsOfSession, unitsOf } from './realtime-support.js';

const KEY = `${SECRET_MARKER}-realtime-upstream-limits-0123456789`;
const CAP_EVENT = 'event_nexus_session_cap';
let t: TestApp;
let up: FakeRealtime;

beforeEach(() => {
  up.usages.length = 0;
  up.behaviour.length = 0;
});
beforeAll(async () => {
  t = await startTestApp();
  up = await startRealtimeUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const creates = () => up.events.filter((e) => e.type === 'response.create').length;

describe("a Realtime turn and the plan's tokens per minute", () => {
  it('is refused with an error event when the minute has no room for its bound, not sent upstream, the session left open', async () => {
    // Turn 1's bound: no conversation yet and 100 output tokens (fits the 300); it uses 200. Turn 2's: 200 + 100.
    const tenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      maxOutputTokens: 100,
      quotaUnits: 1_000_000n,
      rateLimits: { tokensPerMinute: 300 },
    });
    const s = await openRaw(tenant);
    await s.next('session.created');
    up.usages.push({ input: 100, output: 100 });
    const sent = creates();
    s.send({ type: 'response.create' });
    await s.next('response.done');
    s.send({ type: 'response.create', event_id: 'evt_turn2' });
    const refused = (await s.next('error')) as unknown as { error: Record<string, unknown> };
    expect(refused.error).toMatchObject({
      type: 'rate_limit_error',
      code: 'rate_limited',
      param: 'tokensPerMinute',
      event_id: 'evt_turn2',
    });
    expect(refused.error.message).toMatch(/300 tokens per minute.*retry after \d+ s/);
    expect(refused.error.retry_after).toBeGreaterThanOrEqual(1);
    // Not sent upstream; the session goes on: the client's next event is relayed and answered.
    const at = s.events.length;
    s.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] } });
    await s.next('conversation.item.created', at);
    expect(s.ws.readyState).toBe(s.ws.OPEN);
    expect(creates() - sent).toBe(1);
    s.ws.close(1000);
    expect((await s.closed).code).toBe(1000);
    await until(async () => (await turnsOfSession(t, s.requestId)).length === 1);
    const [turn] = await turnsOfSession(t, s.requestId);
    expect(turn!.quota_units).toBe(unitsOf({ input: 100, output: 100 }));
    expect((await sessionRecord(t, s.requestId)).session).toMatchObject({ turns: 1, closeCode: 1000, closeReason: 'client_closed' });
  });

  it('admits a turn whose bound fits, and one refused as never fitting says so', async () => {
    // 150 tokens a minute: turn 1's bound (100) fits; it reports 120, so turn 2's bound (120 + 100) never can.
    const tenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      maxOutputTokens: 100,
      quotaUnits: 1_000_000n,
      rateLimits: { tokensPerMinute: 150 },
    });
    const s = await openRaw(tenant);
    await s.next('session.created');
    up.usages.push({ input: 100, output: 20 });
    s.send({ type: 'response.create' });
    await s.next('response.done');
    s.send({ type: 'response.create', event_id: 'evt_never' });
    const refused = (await s.next('error')) as unknown as { error: Record<string, unknown> };
    expect(refused.error).toMatchObject({ code: 'rate_limited', param: 'tokensPerMinute', event_id: 'evt_never' });
    expect(refused.error.message).toMatch(/up to 220 tokens .*more than the plan's 150 tokens per minute/);
    expect(refused.error.retry_after).toBeUndefined();
    expect(s.ws.readyState).toBe(s.ws.OPEN);
    s.ws.close();
    await s.closed;
  });
});

describe("a server-VAD turn and the plan's tokens per minute", () => {
  it('is cancelled upstream when the minute has no room for it, charged what it used, the session left open', async () => {
    const tenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      maxOutputTokens: 100,
      quotaUnits: 1_000_000n,
      rateLimits: { tokensPerMinute: 300 },
    });
    const s = await openRaw(tenant);
    await s.next('session.created');
    // Turn 1 (bound 100) uses 200 tokens; turn 2, begun by the provider, needs 300: it is cancelled as it runs.
    up.usages.push({ input: 100, output: 100 }, { input: 200, output: 3 });
    expect(up.startResponse()).toBe(true);
    await s.next('response.done');
    const cancels = up.events.filter((e) => e.type === 'response.cancel').length;
    up.behaviour.push('hang');
    const at = s.events.length;
    expect(up.startResponse()).toBe(true);
    const refused = (await s.next('error', at)) as unknown as { error: Record<string, unknown> };
    expect(refused.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited', param: 'tokensPerMinute' });
    await s.next('response.done', at);
    expect(up.events.filter((e) => e.type === 'response.cancel').length - cancels).toBe(1);
    expect(s.ws.readyState).toBe(s.ws.OPEN);
    s.ws.close(1000);
    await s.closed;
    await until(async () => (await turnsOfSession(t, s.requestId)).length === 2);
    const turns = await turnsOfSession(t, s.requestId);
    expect(turns.map((r) => r.quota_units)).toEqual([unitsOf({ input: 100, output: 100 }), unitsOf({ input: 200, output: 3 })]);
    expect((await sessionRecord(t, s.requestId)).session).toMatchObject({ turns: 2, closeCode: 1000, closeReason: 'client_closed' });
  });
});

describe("a Realtime session under a plan's maxOutputTokens", () => {
  it('is opened with it as its output cap, so a turn the provider starts on its own stops there', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: 100, quotaUnits: 1_000_000n });
    const before = up.events.length;
    const s = await openRaw(tenant);
    // The client sees the session as it is about to be: capped at the plan's 100 tokens.
    const created = (await s.next('session.created')) as unknown as { session: Record<string, unknown> };
    expect(created.session.max_output_tokens).toBe(100);
    // Nexus's session.update went upstream before any client event.
    await until(async () => up.events.length > before);
    expect(up.events[before]).toMatchObject({
      type: 'session.update',
      body: { event_id: CAP_EVENT, session: { type: 'realtime', max_output_tokens: 100 } },
    });
    // The provider detects the end of speech itself: a response no client event asked for, which would run to 500.
    up.usages.push({ input: 30, output: 500 });
    expect(up.startResponse()).toBe(true);
    const done = (await s.next('response.done')) as unknown as { response: { usage: { output_tokens: number } } };
    expect(done.response.usage.output_tokens).toBe(100);
    // The answer to Nexus's own session.update was not relayed: the client asked for none.
    expect(s.events.filter((e) => e.type === 'session.updated')).toEqual([]);
    s.ws.close();
    await s.closed;
    await until(async () => (await turnsOfSession(t, s.requestId)).length === 1);
    const [turn] = await turnsOfSession(t, s.requestId);
    expect(turn!.usage).toMatchObject({ input_tokens: 30n, output_tokens: 100n });
    expect(turn!.quota_units).toBe(unitsOf({ input: 30, output: 100 }));
  });

  it("a client's session.update past the cap is clamped, and a beta session is capped in the beta field", async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: 100, quotaUnits: 1_000_000n });
    const s = await openRaw(tenant);
    await s.next('session.created');
    s.send({ type: 'session.update', session: { type: 'realtime', max_output_tokens: 'inf' } });
    const updated = (await s.next('session.updated')) as unknown as { session: Record<string, unknown> };
    expect(updated.session.max_output_tokens).toBe(100);
    up.usages.push({ input: 10, output: 400 });
    expect(up.startResponse()).toBe(true);
    const done = (await s.next('response.done')) as unknown as { response: { usage: { output_tokens: number } } };
    expect(done.response.usage.output_tokens).toBe(100);
    s.ws.close();
    await s.closed;

    const before = up.events.length;
    const beta = await openRaw(tenant, 'bearer', { headers: { authorization: `Bearer ${tenant.apiKey}`, 'openai-beta': 'realtime=v1' } });
    await beta.next('session.created');
    await until(async () => up.events.length > before);
    expect(up.events[before]!.body).toEqual({
      type: 'session.update',
      event_id: CAP_EVENT,
      session: { max_response_output_tokens: 100 },
    });
    beta.ws.close();
    await beta.closed;
  });
});

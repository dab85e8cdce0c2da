/**
 * Realtime sessions through the gateway (docs/realtime.md), against a fake Realtime upstream (a real ws server):
 * the openai SDK's OpenAIRealtimeWS and a raw ws client hold a session; each turn is admitted at its bound and
 * charged exactly by kind at its response.done, recorded as a call carrying the session's request id; a turn the
 * quota cannot cover is refused with an `error` event and a 1008 close; a client or an upstream gone mid-turn
 * leaves the turn charged for what was delivered; the session bounds (per access, frame size, idle) hold.
 */
import { connect } from 'node:net';
import OpenAI, { AzureOpenAI } from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { listInvocations } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startRealtimeUpstream, type FakeRealtime, type RealtimeUsage } from '../support/upstreams/realtime.js';
import { createTenant, periodOf, until } from './gateway-support.js';
import {
  openRaw,
  refusedHandshake,
  relayLimits,
  routeBehindDeadTarget,
  sessionRecord,
  turnsOfSession,
  unitsOf,
  wsUrl,
  type RawSession,
} from './realtime-support.js';

const KEY = `${SECRET_MARKER}-realtime-upstream-0123456789`;
const MODEL = 'gpt-realtime';
let t: TestApp;
let up: FakeRealtime;

beforeEach(() => {
  up.usages.length = 0;
  up.behaviour.length = 0;
});
beforeAll(async () => {
  t = await startTestApp({ env: relayLimits(1_500) });
  up = await startRealtimeUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const tenantFor = (o: { quotaUnits?: bigint } = {}) =>
  createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: 100, quotaUnits: o.quotaUnits ?? 1_000_000n });

const turnsOf = (requestId: string) => turnsOfSession(t, requestId);
const sessionOf = (requestId: string) => sessionRecord(t, requestId);

describe('a Realtime session', () => {
  it("holds five turns of text and audio through the openai SDK's OpenAIRealtimeWS, each charged exactly by kind", async () => {
    const tenant = await tenantFor();
    const usages: RealtimeUsage[] = [
      { input: 20, output: 30, audioIn: 10, audioOut: 20 },
      { input: 60, output: 40, cached: 20, audioIn: 30, cachedAudio: 10, audioOut: 25 },
      { input: 110, output: 12 },
      { input: 130, output: 50, cached: 100, audioIn: 70, cachedAudio: 60, audioOut: 40 },
      { input: 190, output: 8, audioIn: 100 },
    ];
    up.usages.push(...usages);
    const before = await periodOf(t, tenant.accessId);
    const client = new OpenAI({ apiKey: tenant.apiKey, baseURL: `${tenant.gatewayBaseUrl}/v1` });
    // The SDK always asks for wss: its socket is made plain TCP to the test's gateway (its events and frames as ever).
    const gateway = new URL(t.url);
    const rt = new OpenAIRealtimeWS(
      { model: MODEL, options: { createConnection: () => connect({ host: gateway.hostname, port: Number(gateway.port) }) } },
      client,
    );
    let requestId = '';
    rt.socket.once('upgrade', (res) => (requestId = String(res.headers['x-nexus-request-id'])));
    const done: unknown[] = [];
    const audio: string[] = [];
    rt.on('response.output_audio.delta', (e) => audio.push(e.delta));
    rt.on('response.done', (e) => done.push(e));
    const created = new Promise<void>((resolve) => rt.once('session.created', () => resolve()));
    await new Promise<void>((resolve) => rt.socket.once('open', () => resolve()));
    await created;
    for (let turn = 1; turn <= 5; turn++) {
      rt.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(4800, turn).toString('base64') });
      rt.send({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: `turn ${turn}` }] },
      });
      rt.send({ type: 'response.create' });
      await until(async () => done.length === turn);
    }
    rt.close();
    // The audio came through as the upstream sent it, frame by frame.
    expect(audio).toHaveLength(15);
    expect(new Set(audio)).toEqual(new Set(['AAAAAAAA']));
    const appended = up.events.filter((e) => e.type === 'input_audio_buffer.append').slice(-5);
    expect(appended.map((e) => Buffer.from(String(e.body.audio), 'base64')[0])).toEqual([1, 2, 3, 4, 5]);
    // The upstream got the connection's key, never the inference key.
    const seen = up.handshakes.at(-1)!;
    expect(seen.authorization).toBe(`Bearer ${KEY}`);
    expect(JSON.stringify(seen)).not.toContain(tenant.apiKey);

    await until(async () => (await turnsOf(requestId)).length === 5);
    const turns = await turnsOf(requestId);
    expect(turns.map((r) => r.status)).toEqual(Array(5).fill('SUCCEEDED'));
    for (const [i, u] of usages.entries()) {
      expect(turns[i]).toMatchObject({ method: 'GET', endpoint: 'v1/realtime', requested_model: MODEL, metering_status: 'metered' });
      expect(turns[i]!.quota_units).toBe(unitsOf(u));
      expect(turns[i]!.usage).toMatchObject({
        input_tokens: BigInt(u.input),
        cached_input_tokens: BigInt(u.cached ?? 0),
        output_tokens: BigInt(u.output),
        units: unitsOf(u),
      });
      expect(turns[i]!.upstream_response_id).toMatch(/^resp_/);
    }
    const total = usages.reduce((sum, u) => sum + unitsOf(u), 0n);
    await until(async () => (await periodOf(t, tenant.accessId)).consumed - before.consumed === total);
    // The session is one invocation of its own: its turns, how it closed, its first audio; charged nothing itself.
    const session = await sessionOf(requestId);
    expect(session).toMatchObject({ requestId, status: 'SUCCEEDED', endpoint: 'v1/realtime', quotaUnits: String(total) });
    expect(session.session).toMatchObject({ turns: 5, closeCode: 1000, closeReason: 'client_closed' });
    expect(session.session!.firstAudioMs).toBeGreaterThan(0);
    expect(session.usageEvents).toEqual([]);
    const listed = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { q: requestId } });
    const turnsListed = listed.data!.filter((i) => i.id !== requestId);
    expect(turnsListed).toHaveLength(5);
    expect(turnsListed.every((i) => i.sessionId === requestId && i.session === undefined)).toBe(true);
    // The usage summary counts the turns as calls, not the session.
    const rolled = await t.database.db('usage_rollups').where({ workspace_access_id: tenant.accessId }).sum({ calls: 'calls' }).first();
    expect(Number(rolled!.calls)).toBe(5);
  });

  it('takes the key from the subprotocol a browser sends, relays the client events, and meters a server-VAD turn', async () => {
    const tenant = await tenantFor();
    const s = await openRaw(tenant, 'subprotocol');
    expect(s.ws.protocol).toBe('realtime');
    await s.next('session.created');
    s.send({ type: 'session.update', session: { max_output_tokens: 40 } });
    await s.next('session.updated');
    up.usages.push({ input: 15, output: 9, audioIn: 15, audioOut: 9 });
    s.send({ type: 'input_audio_buffer.append', audio: 'AAAA' });
    s.send({ type: 'input_audio_buffer.commit' });
    await s.next('response.done');
    s.ws.close();
    await s.closed;
    await until(async () => (await turnsOf(s.requestId)).length === 1);
    const [turn] = await turnsOf(s.requestId);
    expect(turn).toMatchObject({ status: 'SUCCEEDED' });
    expect(turn!.quota_units).toBe(unitsOf({ input: 15, output: 9 }));
    // The key's subprotocol was not sent upstream.
    expect(JSON.stringify(up.handshakes.at(-1))).not.toContain(tenant.apiKey);
  });

  it('refuses turn 3 when the quota cannot cover its bound: an error event, then 1008; charged for turns 1-2 only', async () => {
    // Bounds (input: the conversation so far, at 1 a token; output: the plan's 100 tokens, at 2): 200, 250, 300.
    const tenant = await tenantFor({ quotaUnits: 400n });
    const usages = [
      { input: 20, output: 30 },
      { input: 60, output: 40 },
    ];
    up.usages.push(...usages);
    const s = await openRaw(tenant);
    await s.next('session.created');
    const creates = () => up.events.filter((e) => e.type === 'response.create').length;
    const sent = creates();
    for (let turn = 1; turn <= 2; turn++) {
      const at = s.events.length;
      s.send({ type: 'response.create' });
      await s.next('response.done', at);
    }
    s.send({ type: 'response.create', event_id: 'evt_turn3' });
    const error = (await s.next('error')) as unknown as { error: { code: string; message: string; event_id: string } };
    expect(error.error).toMatchObject({ code: 'quota_insufficient', event_id: 'evt_turn3' });
    expect(error.error.message).toMatch(/units/);
    expect((await s.closed).code).toBe(1008);
    expect(creates() - sent).toBe(2);
    const turns = await turnsOf(s.requestId);
    expect(turns.map((r) => r.quota_units)).toEqual(usages.map((u) => unitsOf(u)));
    await until(async () => (await periodOf(t, tenant.accessId)).consumed === 80n + 140n);
    expect((await sessionOf(s.requestId)).session).toMatchObject({ turns: 2, closeCode: 1008, closeReason: 'quota_insufficient' });
  });

  it('a server-VAD turn the quota cannot cover is cancelled upstream, charged what it used, then 1008', async () => {
    // Turn 1's bound is 200 of 300 (charged 80); turn 2's, 250, is more than the 220 left: refused as it runs.
    const tenant = await tenantFor({ quotaUnits: 300n });
    up.usages.push({ input: 20, output: 30 }, { input: 60, output: 5 });
    const s = await openRaw(tenant);
    await s.next('session.created');
    s.send({ type: 'input_audio_buffer.commit' });
    await s.next('response.done');
    up.behaviour.push('hang');
    s.send({ type: 'input_audio_buffer.commit' });
    const error = (await s.next('error')) as unknown as { error: { code: string } };
    expect(error.error.code).toBe('quota_insufficient');
    expect((await s.closed).code).toBe(1008);
    expect(up.events.filter((e) => e.type === 'response.cancel')).toHaveLength(1);
    await until(async () => (await turnsOf(s.requestId)).length === 2);
    const turns = await turnsOf(s.requestId);
    expect(turns.map((r) => r.quota_units)).toEqual([80n, 70n]);
    await until(async () => (await periodOf(t, tenant.accessId)).consumed === 150n);
  });

  it('the client gone mid-turn: the upstream socket is closed and the turn charged for what was delivered', async () => {
    const tenant = await tenantFor();
    const s = await openRaw(tenant);
    await s.next('session.created');
    const openBefore = up.sockets.size;
    up.behaviour.push('hang');
    s.send({ type: 'response.create' });
    await until(async () => s.events.filter((e) => String(e.type).endsWith('.delta')).length === 9);
    s.ws.terminate();
    await until(async () => up.sockets.size === openBefore - 1);
    await until(async () => (await turnsOf(s.requestId)).length === 1);
    const [turn] = await turnsOf(s.requestId);
    // Nine output frames delivered (one token each), the conversation's input bound (none yet).
    expect(turn).toMatchObject({ status: 'CLIENT_ABORTED', error_code: 'client_aborted' });
    expect(turn!.quota_units).toBe(18n);
  });

  it('the upstream gone mid-turn: the client gets an error event and a close, the turn charged for what was delivered', async () => {
    const tenant = await tenantFor();
    const s = await openRaw(tenant);
    await s.next('session.created');
    up.behaviour.push('drop');
    s.send({ type: 'response.create' });
    const error = (await s.next('error')) as unknown as { error: { code: string } };
    expect(error.error.code).toBe('upstream_closed');
    expect((await s.closed).code).toBe(1011);
    await until(async () => (await turnsOf(s.requestId)).length === 1);
    const [turn] = await turnsOf(s.requestId);
    expect(turn).toMatchObject({ status: 'FAILED', error_code: 'upstream_stream_broken' });
    expect(turn!.quota_units).toBe(18n);
    const session = await sessionOf(s.requestId);
    expect(session).toMatchObject({ status: 'UPSTREAM_ERROR', errorCode: 'upstream_stream_broken', quotaUnits: '18' });
    expect(session.session).toMatchObject({ turns: 1, closeCode: 1011, closeReason: 'upstream_closed' });
  });
});

describe('a Realtime session through a route', () => {
  it('is opened on the first target that accepts it, its model mapped, and recorded with the route', async () => {
    const tenant = await tenantFor();
    const route = await routeBehindDeadTarget(t, tenant, {
      name: 'voice',
      profile: 'openai',
      apiKey: KEY,
      modelMap: { [MODEL]: 'gpt-realtime-mini' },
    });
    expect(route.response.status).toBe(201);
    const url = `${route.data!.gatewayBaseUrl.replace(/^http/, 'ws')}/v1/realtime?model=${MODEL}`;
    const s = await openRaw(tenant, 'bearer', {}, url);
    const created = (await s.next('session.created')) as unknown as { session: { model: string } };
    expect(created.session.model).toBe('gpt-realtime-mini');
    up.usages.push({ input: 20, output: 30 });
    s.send({ type: 'response.create' });
    await s.next('response.done');
    s.ws.close();
    await s.closed;
    await until(async () => (await turnsOf(s.requestId)).length === 1);
    const [turn] = await turnsOf(s.requestId);
    expect(turn).toMatchObject({ route_id: route.data!.id, provider_connection_id: tenant.connectionId, requested_model: MODEL });
    expect(turn!.quota_units).toBe(unitsOf({ input: 20, output: 30 }));
    expect(await sessionOf(s.requestId)).toMatchObject({ routeId: route.data!.id, providerConnectionId: tenant.connectionId });
  });
});

describe("a Realtime session's bounds", () => {
  it("sends each turn capped at the plan's maxOutputTokens (GA and beta fields), and clamps a session.update past it", async () => {
    const tenant = await tenantFor();
    const s = await openRaw(tenant);
    await s.next('session.created');
    const sent = up.events.length;
    s.send({ type: 'session.update', session: { type: 'realtime', max_output_tokens: 'inf' } });
    await s.next('session.updated');
    let at = s.events.length;
    s.send({ type: 'response.create' });
    await s.next('response.done', at);
    at = s.events.length;
    s.send({ type: 'response.create', response: { max_output_tokens: 30 } });
    await s.next('response.done', at);
    s.ws.close();
    await s.closed;
    // (Nexus's own session.update, which opened the session at the plan's cap, is another test's.)
    const seen = up.events
      .slice(sent)
      .filter((e) => e.type !== 'input_audio_buffer.append' && e.body.event_id !== 'event_nexus_session_cap');
    expect(seen.map((e) => [e.type, e.body.session ?? e.body.response])).toEqual([
      ['session.update', { type: 'realtime', max_output_tokens: 100 }],
      ['response.create', { max_output_tokens: 100 }],
      ['response.create', { max_output_tokens: 30 }],
    ]);
    // A beta client's turn is capped in the beta field.
    const beta = await openRaw(tenant, 'bearer', { headers: { authorization: `Bearer ${tenant.apiKey}`, 'openai-beta': 'realtime=v1' } });
    await beta.next('session.created');
    at = beta.events.length;
    beta.send({ type: 'response.create', response: { modalities: ['text'] } });
    await beta.next('response.done', at);
    expect(up.events.filter((e) => e.type === 'response.create').at(-1)!.body.response).toEqual({
      modalities: ['text'],
      max_response_output_tokens: 100,
    });
    beta.ws.close();
    await beta.closed;
  });

  it("counts each turn's tokens against the plan's tokens per minute as the turn ends, not when the session closes", async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: 100, rateLimits: { tokensPerMinute: 100 } });
    const first = await openRaw(tenant);
    await first.next('session.created');
    up.usages.push({ input: 100, output: 60 });
    first.send({ type: 'response.create' });
    await first.next('response.done');
    // The first session is still open: its turn's 160 tokens already fill the minute, so another session is refused.
    const refused = await refusedHandshake(wsUrl(tenant), { authorization: `Bearer ${tenant.apiKey}` });
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body).error).toMatchObject({ code: 'rate_limited', param: 'tokensPerMinute' });
    first.ws.close();
    await first.closed;
  });

  it("refuses a turn asking past the plan's maxOutputTokens under the refuse policy: an error event, then 1008", async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: 100, outputCapPolicy: 'refuse' });
    const s = await openRaw(tenant);
    await s.next('session.created');
    const creates = up.events.filter((e) => e.type === 'response.create').length;
    s.send({ type: 'response.create', response: { max_output_tokens: 500 } });
    const error = (await s.next('error')) as unknown as { error: { code: string } };
    expect(error.error.code).toBe('max_tokens_exceeded');
    expect((await s.closed).code).toBe(1008);
    expect(up.events.filter((e) => e.type === 'response.create')).toHaveLength(creates);
  });

  it('refuses a session past the sessions per access, 429 naming it, and records it REJECTED', async () => {
    const tenant = await tenantFor();
    const a = await openRaw(tenant);
    const b = await openRaw(tenant);
    const refused = await refusedHandshake(wsUrl(tenant), { authorization: `Bearer ${tenant.apiKey}` });
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body).error).toMatchObject({ code: 'rate_limited', param: 'realtimeSessions' });
    // (Not drain(): it waits for the open sessions, as for calls in flight.)
    const rejectedRows = () => t.database.db('invocations').where({ workspace_access_id: tenant.accessId, status: 'REJECTED' });
    await until(async () => (await rejectedRows()).length === 1);
    const rejected = await rejectedRows();
    expect(rejected[0]).toMatchObject({ error_code: 'rate_limited', endpoint: 'v1/realtime', requested_model: MODEL });
    a.ws.close();
    await a.closed;
    // Its place is given back once the gateway has seen the close.
    let c: RawSession | undefined;
    await until(async () => Boolean((c = await openRaw(tenant).catch(() => undefined))));
    b.ws.close();
    c!.ws.close();
    await Promise.all([b.closed, c!.closed]);
  });

  it('closes 1009 on a frame past the maximum, and an idle session that does not answer pings', async () => {
    const tenant = await tenantFor();
    const big = await openRaw(tenant);
    big.send({ type: 'input_audio_buffer.append', audio: 'A'.repeat(70_000) });
    expect((await big.closed).code).toBe(1009);
    expect((await sessionOf(big.requestId)).session).toMatchObject({ turns: 0, closeCode: 1009, closeReason: 'frame_too_large' });
    const idle = await openRaw(tenant, 'bearer', { autoPong: false });
    const started = Date.now();
    const closed = await idle.closed;
    expect(closed.code).toBe(1000);
    expect(idle.events.at(-1)).toMatchObject({ type: 'error', error: { code: 'session_idle_timeout' } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    expect((await sessionOf(idle.requestId)).session).toMatchObject({ turns: 0, closeCode: 1000, closeReason: 'session_idle_timeout' });
  });

  it('refuses a model outside the allow-list 403, and leaves another WebSocket path refused 501', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, allowedModels: ['gpt-4o-mini'] });
    const refused = await refusedHandshake(wsUrl(tenant), { authorization: `Bearer ${tenant.apiKey}` });
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).error.code).toBe('model_not_allowed');
    const other = await refusedHandshake(wsUrl(tenant, 'v1/responses'), { authorization: `Bearer ${tenant.apiKey}` });
    expect(other.status).toBe(501);
    expect(JSON.parse(other.body).error.code).toBe('websocket_not_supported');
  });
});

describe('an ephemeral client secret (a browser around the gateway)', () => {
  it('is refused 409 naming its class and pointing to the metered WebSocket path, the upstream not called', async () => {
    const tenant = await tenantFor();
    const res = await fetch(`${tenant.gatewayBaseUrl}/v1/realtime/client_secrets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ session: { type: 'realtime', model: MODEL } }),
    });
    expect(res.status).toBe(409);
    const { error } = (await res.json()) as { error: { code: string; message: string; passthrough_class: string } };
    expect(error).toMatchObject({ code: 'unmetered_endpoint', passthrough_class: 'realtime_client_secrets' });
    expect(error.message).toMatch(/GET v1\/realtime\?model=/);
  });
});

describe('an Azure OpenAI Realtime session', () => {
  it("holds a session through the SDK's OpenAIRealtimeWS.azure, the connection's key sent as api-key, its turn charged", async () => {
    const azure = await startRealtimeUpstream({ apiKey: KEY, azure: true });
    try {
      const tenant = await createTenant(t, { profile: 'azure-openai', baseUrl: azure.url, providerKey: KEY, maxOutputTokens: 100 });
      azure.usages.push({ input: 40, output: 25, audioIn: 30, audioOut: 20 });
      const gateway = new URL(t.url);
      const client = new AzureOpenAI({ apiKey: tenant.apiKey, endpoint: tenant.gatewayBaseUrl, apiVersion: '2025-04-01-preview' });
      const rt = await OpenAIRealtimeWS.azure(client, {
        deploymentName: MODEL,
        options: { createConnection: () => connect({ host: gateway.hostname, port: Number(gateway.port) }) },
      });
      let requestId = '';
      rt.socket.once('upgrade', (res) => (requestId = String(res.headers['x-nexus-request-id'])));
      const created = new Promise<void>((resolve) => rt.once('session.created', () => resolve()));
      const done = new Promise<void>((resolve) => rt.once('response.done', () => resolve()));
      await created;
      rt.send({ type: 'response.create' });
      await done;
      rt.close();
      expect(azure.handshakes[0]!['api-key']).toBe(KEY);
      await until(async () => (await turnsOf(requestId)).length === 1);
      const [turn] = await turnsOf(requestId);
      expect(turn).toMatchObject({ status: 'SUCCEEDED', endpoint: 'openai/realtime', requested_model: MODEL });
      expect(turn!.quota_units).toBe(unitsOf({ input: 40, output: 25 }));
    } finally {
      await azure.close();
    }
  });
});

/**
 * Gemini Live API sessions through the gateway (docs/realtime.md), against a fake Live upstream (a real ws server
 * speaking the documented messages, as binary frames): `@google/genai`'s `ai.live.connect`, its baseUrl at Nexus,
 * holds a session; its model comes in its `setup`, allowed and capped there; each turn is admitted at its bound and
 * charged exactly by modality at its `turnComplete`'s `usageMetadata`, recorded as a call carrying the session's
 * request id; a turn the quota cannot cover is not sent, and the session closes 1008 naming why; a client or an
 * upstream gone mid-turn leaves the turn charged for what was delivered; ephemeral tokens are refused 409.
 */
import { GoogleGenAI, Modality, type LiveServerMessage, type Session } from '@google/genai';
import WebSocket from 'ws';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startGeminiLiveUpstream, type FakeLive, type LiveUsage } from '../support/upstreams/gemini-live.js';
import { createTenant, periodOf, until, type Tenant } from './gateway-support.js';
import { refusedHandshake, relayLimits, routeBehindDeadTarget, sessionRecord, turnsOfSession, unitsOf } from './realtime-support.js';

const KEY = `${SECRET_MARKER}-gemini-live-upstream-0123456789`;
const MODEL = 'gemini-live-2.5-flash-preview';
const PATH = 'ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';
let t: TestApp;
let up: FakeLive;

beforeEach(() => {
  up.usages.length = 0;
  up.behaviour.length = 0;
});
beforeAll(async () => {
  t = await startTestApp({ env: relayLimits(3_000) });
  up = await startGeminiLiveUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

/** Audio at its own rates (3 a token in, 5 out) beside text (1 in, 0.5 cached, 2 out). */
const KINDS = { audioInputMultiplierPpm: '3000000', audioOutputMultiplierPpm: '5000000' } as const;

const tenantFor = (o: { quotaUnits?: bigint; kinds?: boolean; allowedModels?: string[] } = {}) =>
  createTenant(t, {
    profile: 'gemini',
    baseUrl: up.url,
    providerKey: KEY,
    maxOutputTokens: 100,
    quotaUnits: o.quotaUnits ?? 1_000_000n,
    ...(o.kinds ? { kindMultipliers: KINDS } : {}),
    ...(o.allowedModels ? { allowedModels: o.allowedModels } : {}),
  });

/** The SDK's session, through Nexus: the messages it got, its turns completed, and its close. */
async function connectSdk(tenant: Tenant, maxOutputTokens?: number) {
  // With a baseUrl of its own the SDK names API version v1 unless told: the Live API's is v1beta.
  const ai = new GoogleGenAI({ apiKey: tenant.apiKey, httpOptions: { baseUrl: tenant.gatewayBaseUrl, apiVersion: 'v1beta' } });
  const messages: LiveServerMessage[] = [];
  let closedWith: (close: { code: number; reason: string }) => void = () => {};
  const closed = new Promise<{ code: number; reason: string }>((resolve) => (closedWith = resolve));
  const session: Session = await ai.live.connect({
    model: MODEL,
    config: { responseModalities: [Modality.AUDIO], ...(maxOutputTokens ? { maxOutputTokens } : {}) },
    callbacks: {
      onmessage: (m) => messages.push(m),
      onclose: (e) => closedWith({ code: e.code, reason: e.reason }),
    },
  });
  const completed = () => messages.filter((m) => m.serverContent?.turnComplete).length;
  return { session, messages, closed, completed };
}

/** A raw ws client's session (its key in `?key=`): its messages as they come, parsed from their binary frames. */
async function openRaw(tenant: Tenant, base = tenant.gatewayBaseUrl, options: WebSocket.ClientOptions = {}) {
  const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/${PATH}?key=${tenant.apiKey}`, options);
  const messages: Record<string, any>[] = [];
  ws.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString('utf8')) as Record<string, any>));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  let requestId = '';
  ws.once('upgrade', (res) => (requestId = String(res.headers['x-nexus-request-id'])));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const send = (message: Record<string, unknown>) => ws.send(JSON.stringify(message));
  send({ setup: { model: `models/${MODEL}`, generationConfig: { responseModalities: ['AUDIO'], maxOutputTokens: 500 } } });
  await until(async () => messages.some((m) => m.setupComplete));
  return { ws, messages, closed, send, requestId };
}

/** The request id of the access's session, once its first turn (or, with none, its own record) is written. */
async function sessionIdOf(tenant: Tenant): Promise<string> {
  let id: string | undefined;
  await until(async () => {
    await t.nexus.gateway.drain();
    const row = await t.database
      .db('invocations')
      .where({ workspace_access_id: tenant.accessId })
      .andWhere((q) => {
        void q.whereNotNull('session_id').orWhereNotNull('session');
      })
      .first();
    id = row ? (row.session_id ?? row.id) : undefined;
    return Boolean(id);
  });
  return id!;
}

const clientTurns = () => up.messages.filter((m) => m.key === 'clientContent');
const turnsOf = (requestId: string) => turnsOfSession(t, requestId);

describe('a Gemini Live session', () => {
  it("holds five turns of text and audio through the SDK's ai.live.connect, each charged exactly by modality", async () => {
    const tenant = await tenantFor({ kinds: true });
    const usages: LiveUsage[] = [
      { input: 20, output: 30, audioIn: 10, audioOut: 20 },
      { input: 60, output: 40, cached: 20, audioIn: 30, cachedAudio: 10, audioOut: 25 },
      { input: 110, output: 12 },
      { input: 130, output: 50, cached: 100, audioIn: 70, cachedAudio: 60, audioOut: 40 },
      { input: 190, output: 8, audioIn: 100 },
    ];
    up.usages.push(...usages);
    const before = await periodOf(t, tenant.accessId);
    const sent = up.messages.length;
    const { session, messages, closed, completed } = await connectSdk(tenant);
    // An open session is counted by the process's gauge.
    expect(await (await fetch(`${t.url}/metrics`)).text()).toMatch(/^nexus_realtime_sessions_open 1$/m);
    for (let turn = 1; turn <= 5; turn++) {
      session.sendRealtimeInput({ audio: { data: Buffer.alloc(3200, turn).toString('base64'), mimeType: 'audio/pcm;rate=16000' } });
      session.sendClientContent({ turns: `turn ${turn}`, turnComplete: true });
      await until(async () => completed() === turn);
    }
    session.close();
    await closed;
    // The audio came through as the upstream sent it, message by message; the client's audio went up in order.
    const audio = messages.flatMap((m) => m.serverContent?.modelTurn?.parts?.filter((p) => p.inlineData) ?? []);
    expect(audio).toHaveLength(10);
    expect(new Set(audio.map((p) => p.inlineData!.data))).toEqual(new Set([Buffer.alloc(960, 7).toString('base64')]));
    const mine = up.messages.slice(sent);
    const appended = mine.filter((m) => m.key === 'realtimeInput');
    expect(
      appended.map(
        (m) => Buffer.from(String((m.body as { realtimeInput: { audio: { data: string } } }).realtimeInput.audio.data), 'base64')[0],
      ),
    ).toEqual([1, 2, 3, 4, 5]);
    // The setup went up with its model and the plan's output cap; the upstream got the connection's key only.
    expect(mine[0]).toMatchObject({
      key: 'setup',
      body: { setup: { model: `models/${MODEL}`, generationConfig: { maxOutputTokens: 100 } } },
    });
    const seen = up.handshakes.at(-1)!;
    expect(seen.headers['x-goog-api-key']).toBe(KEY);
    expect(JSON.stringify(seen)).not.toContain(tenant.apiKey);

    const requestId = await sessionIdOf(tenant);
    await until(async () => (await turnsOf(requestId)).length === 5);
    const turns = await turnsOf(requestId);
    expect(turns.map((r) => r.status)).toEqual(Array(5).fill('SUCCEEDED'));
    for (const [i, u] of usages.entries()) {
      expect(turns[i]).toMatchObject({ method: 'GET', endpoint: PATH, requested_model: MODEL, metering_status: 'metered' });
      expect(turns[i]!.quota_units).toBe(unitsOf(u, true));
      expect(turns[i]!.usage).toMatchObject({
        input_tokens: BigInt(u.input),
        cached_input_tokens: BigInt(u.cached ?? 0),
        output_tokens: BigInt(u.output),
        audio_input_tokens: BigInt((u.audioIn ?? 0) - (u.cachedAudio ?? 0)),
        audio_output_tokens: BigInt(u.audioOut ?? 0),
        units: unitsOf(u, true),
      });
    }
    const total = usages.reduce((sum, u) => sum + unitsOf(u, true), 0n);
    await until(async () => (await periodOf(t, tenant.accessId)).consumed - before.consumed === total);
    const record = await sessionRecord(t, requestId);
    expect(record).toMatchObject({ requestId, status: 'SUCCEEDED', endpoint: PATH, quotaUnits: String(total) });
    expect(record.session).toMatchObject({ turns: 5, closeReason: 'client_closed' });
    expect(record.session!.firstAudioMs).toBeGreaterThan(0);
    expect(record.usageEvents).toEqual([]);
  });

  it('refuses turn 3 when the quota cannot cover its bound: not sent upstream, then 1008 naming why; turns 1-2 charged only', async () => {
    // Bounds: turn 1 0 + 100*2 = 200; turn 2 50 + 200 = 250; turn 3 100 + 200 = 300, more than the 179 left.
    const tenant = await tenantFor({ quotaUnits: 400n });
    const usages = [
      { input: 20, output: 30 },
      { input: 60, output: 40 },
      { input: 110, output: 12 },
    ];
    up.usages.push(...usages);
    const sent = clientTurns().length;
    const { session, closed, completed } = await connectSdk(tenant);
    for (let turn = 1; turn <= 2; turn++) {
      session.sendClientContent({ turns: `turn ${turn}`, turnComplete: true });
      await until(async () => completed() === turn);
    }
    session.sendClientContent({ turns: 'turn 3', turnComplete: true });
    const close = await closed;
    expect(close.code).toBe(1008);
    expect(close.reason).toMatch(/^quota_insufficient: This turn may need up to 300 units/);
    expect(Buffer.byteLength(close.reason)).toBeLessThanOrEqual(123);
    expect(clientTurns().length - sent).toBe(2);
    const requestId = await sessionIdOf(tenant);
    const record = await sessionRecord(t, requestId);
    expect(record).toMatchObject({ status: 'SUCCEEDED', errorCode: 'quota_insufficient', quotaUnits: '220' });
    expect(record.session).toMatchObject({ turns: 2, closeCode: 1008, closeReason: 'quota_insufficient' });
    const turns = await turnsOf(requestId);
    expect(turns.map((r) => r.quota_units)).toEqual([unitsOf(usages[0]!), unitsOf(usages[1]!)]);
    await until(async () => (await periodOf(t, tenant.accessId)).consumed === 220n);
  });

  it('the client gone mid-turn: the upstream socket is closed and the turn charged for what was delivered', async () => {
    const tenant = await tenantFor();
    up.behaviour.push('hang');
    const s = await openRaw(tenant);
    // The setup's cap past the plan's went up at the plan's.
    expect(up.messages.filter((m) => m.key === 'setup').at(-1)!.body.setup.generationConfig.maxOutputTokens).toBe(100);
    // The key came in `?key=`: the upstream's URL carries none.
    expect(up.handshakes.at(-1)!.url).not.toContain('key=');
    const open = up.sockets.size;
    s.send({ clientContent: { turns: [{ role: 'user', parts: [{ text: 'hello' }] }], turnComplete: true } });
    await until(async () => s.messages.filter((m) => m.serverContent?.modelTurn).length === 4);
    s.ws.terminate();
    await until(async () => up.sockets.size === open - 1);
    await until(async () => (await turnsOf(s.requestId)).length === 1);
    const turns = await turnsOf(s.requestId);
    // Its input bound (none before it) and one output token per output message relayed (4), at 2 a token.
    expect(turns[0]).toMatchObject({ status: 'CLIENT_ABORTED', error_code: 'client_aborted', quota_units: 8n });
    const record = await sessionRecord(t, s.requestId);
    expect(record.session).toMatchObject({ turns: 1, closeCode: 1006, closeReason: 'client_closed' });
  });

  it('the upstream gone mid-turn: the client gets a close (1011), the turn charged for what was delivered', async () => {
    const tenant = await tenantFor();
    up.behaviour.push('drop');
    const s = await openRaw(tenant);
    s.send({ clientContent: { turns: [{ role: 'user', parts: [{ text: 'hello' }] }], turnComplete: true } });
    expect((await s.closed).code).toBe(1011);
    await until(async () => (await turnsOf(s.requestId)).length === 1);
    const [turn] = await turnsOf(s.requestId);
    expect(turn).toMatchObject({ status: 'FAILED', error_code: 'upstream_stream_broken', quota_units: 8n });
    const record = await sessionRecord(t, s.requestId);
    expect(record).toMatchObject({ status: 'UPSTREAM_ERROR', errorCode: 'upstream_stream_broken' });
    expect(record.session).toMatchObject({ turns: 1, closeCode: 1011, closeReason: 'upstream_closed' });
  });

  it('meters a turn the provider starts on its own, its usage in a message after turnComplete', async () => {
    const tenant = await tenantFor();
    const s = await openRaw(tenant);
    s.send({ realtimeInput: { audio: { data: 'AAAA', mimeType: 'audio/pcm;rate=16000' } } });
    await until(async () => up.messages.at(-1)?.key === 'realtimeInput');
    up.behaviour.push('usageApart');
    up.usages.push({ input: 15, output: 9, audioIn: 15, audioOut: 9 });
    expect(up.startTurn()).toBe(true);
    await until(async () => s.messages.some((m) => m.usageMetadata));
    s.ws.close();
    await s.closed;
    await until(async () => (await turnsOf(s.requestId)).length === 1);
    const [turn] = await turnsOf(s.requestId);
    expect(turn).toMatchObject({ status: 'SUCCEEDED', error_code: null, quota_units: unitsOf({ input: 15, output: 9 }) });
    expect(turn!.usage).toMatchObject({ audio_input_tokens: 15n, audio_output_tokens: 9n });
  });

  it("holds the session bounds: 1009 past the frame bound, 1000 when idle, 429 past the access's sessions", async () => {
    const tenant = await tenantFor();
    const big = await openRaw(tenant);
    big.ws.send(Buffer.alloc(70_000, 1));
    expect((await big.closed).code).toBe(1009);
    expect((await sessionRecord(t, big.requestId)).session).toMatchObject({ turns: 0, closeCode: 1009, closeReason: 'frame_too_large' });
    const idle = await openRaw(tenant, tenant.gatewayBaseUrl, { autoPong: false });
    const started = Date.now();
    const other = await openRaw(tenant);
    // A third session of the access is refused, in Google's error shape; the upstream not called for it.
    const handshakes = up.handshakes.length;
    const refused = await refusedHandshake(`${tenant.gatewayBaseUrl.replace(/^http/, 'ws')}/${PATH}`, { 'x-goog-api-key': tenant.apiKey });
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({
      error: { code: 'rate_limited', param: 'realtimeSessions', status: 'RESOURCE_EXHAUSTED' },
    });
    expect(up.handshakes.length).toBe(handshakes);
    // No message for it: the idle session is only closed (1000), its reason saying why.
    expect(await idle.closed).toEqual({ code: 1000, reason: 'idle timeout' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    other.ws.close();
    await other.closed;
    expect((await sessionRecord(t, idle.requestId)).session).toMatchObject({ closeCode: 1000, closeReason: 'session_idle_timeout' });
  });

  it('closes 1008 at a setup whose model the plan does not allow, nothing sent upstream', async () => {
    const tenant = await tenantFor({ allowedModels: ['gemini-2.5-flash'] });
    const setups = up.messages.filter((m) => m.key === 'setup').length;
    const refused = await connectSdk(tenant).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(refused?.message).toMatch(/\(code 1008\): model_not_allowed: The model 'gemini-live-2\.5-flash-preview' is not allowed/);
    expect(up.messages.filter((m) => m.key === 'setup').length).toBe(setups);
    const record = await sessionRecord(t, await sessionIdOf(tenant));
    expect(record).toMatchObject({ requestedModel: MODEL, errorCode: 'model_not_allowed' });
    expect(record.session).toMatchObject({ turns: 0, closeCode: 1008, closeReason: 'model_not_allowed' });
  });
});

describe('a Gemini Live session through a route', () => {
  it("is opened on the first target that accepts it, the target's model map applied to its setup, and recorded with the route", async () => {
    const tenant = await tenantFor();
    const route = await routeBehindDeadTarget(t, tenant, {
      name: 'live',
      profile: 'gemini',
      apiKey: KEY,
      modelMap: { [MODEL]: 'gemini-live-mapped' },
    });
    expect(route.response.status).toBe(201);
    const s = await openRaw(tenant, route.data!.gatewayBaseUrl);
    expect(up.messages.filter((m) => m.key === 'setup').at(-1)!.body.setup.model).toBe('models/gemini-live-mapped');
    up.usages.push({ input: 20, output: 30 });
    s.send({ clientContent: { turns: [{ role: 'user', parts: [{ text: 'hello' }] }], turnComplete: true } });
    await until(async () => s.messages.some((m) => m.serverContent?.turnComplete));
    s.ws.close();
    await s.closed;
    await until(async () => (await turnsOf(s.requestId)).length === 1);
    const [turn] = await turnsOf(s.requestId);
    expect(turn).toMatchObject({ route_id: route.data!.id, provider_connection_id: tenant.connectionId, requested_model: MODEL });
    expect(turn!.quota_units).toBe(unitsOf({ input: 20, output: 30 }));
    expect(await sessionRecord(t, s.requestId)).toMatchObject({ routeId: route.data!.id, requestedModel: MODEL });
  });
});

describe('Gemini ephemeral tokens', () => {
  it('are refused 409 naming their class and the metered path, to create and to open a session with', async () => {
    const tenant = await tenantFor();
    const ai = new GoogleGenAI({ apiKey: tenant.apiKey, httpOptions: { baseUrl: tenant.gatewayBaseUrl, apiVersion: 'v1alpha' } });
    const handshakes = up.handshakes.length;
    const err = await ai.authTokens.create({ config: { uses: 1 } }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/unmetered_endpoint|realtime_client_secrets/);
    expect(err?.message).toContain('BidiGenerateContent with the inference key');
    const constrained = await refusedHandshake(
      `${tenant.gatewayBaseUrl.replace(/^http/, 'ws')}/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained`,
      { 'x-goog-api-key': tenant.apiKey },
    );
    expect(constrained.status).toBe(409);
    expect(JSON.parse(constrained.body)).toMatchObject({
      error: { code: 'unmetered_endpoint', passthrough_class: 'realtime_client_secrets', status: 'FAILED_PRECONDITION' },
    });
    expect(up.handshakes.length).toBe(handshakes);
  });
});

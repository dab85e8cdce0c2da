/**
 * A Nexus process killed mid-turn of a Gemini Live session (docs/realtime.md, "Faults"): as an OpenAI session's,
 * its settled turn stays charged, the turn in flight is charged as delivered, once, and the session is recorded lost,
 * by the process that reclaims its lease (the session's machinery is shared: realtime-session.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startNexusProcess, type NexusProcess } from '../support/nexus-process.js';
import { startGeminiLiveUpstream, type FakeLive } from '../support/upstreams/gemini-live.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, periodOf, until } from '../gateway/gateway-support.js';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
const KEY = `${SECRET_MARKER}-upstream-gemini-live-crash-0123456789`;
const TTL_MS = 2000;
const PATH = 'ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';

let t: TestApp;
let live: FakeLive;
let dataDir: string;
let nexus: NexusProcess | undefined;

beforeAll(async () => {
  if (!usesPostgres) return;
  t = await startTestApp({ env: { NEXUS_LEASE_TTL_MS: String(TTL_MS), NEXUS_QUOTA_LEASE_IDLE_MS: '200' } });
  live = await startGeminiLiveUpstream({ apiKey: KEY });
  dataDir = mkdtempSync(join(tmpdir(), 'nexus-gemini-live-'));
});
afterAll(async () => {
  await nexus?.kill();
  await t?.close();
  await live?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe.runIf(usesPostgres)('a Nexus process killed mid-turn of a Gemini Live session', () => {
  it('its settled turn stays charged, the turn in flight is charged as delivered, once, and the session recorded lost', async () => {
    const tenant = await createTenant(t, {
      profile: 'gemini',
      baseUrl: live.url,
      providerKey: KEY,
      maxOutputTokens: 100,
      quotaUnits: 1_000_000n,
    });
    nexus = await startNexusProcess({
      DATABASE_URL: t.database.url!,
      ...(t.database.schema ? { NEXUS_DATABASE_SCHEMA: t.database.schema } : {}),
      ...(t.database.directUrl ? { NEXUS_DATABASE_LISTEN_URL: t.database.directUrl } : {}),
      NEXUS_DATA_DIR: mkdtempSync(join(dataDir, 'child-')),
      NEXUS_LEASE_TTL_MS: String(TTL_MS),
    });
    const base = tenant.gatewayBaseUrl.replace(t.url, nexus.url).replace(/^http/, 'ws');
    const ws = new WebSocket(`${base}/${PATH}`, { headers: { 'x-goog-api-key': tenant.apiKey } });
    ws.on('error', () => {});
    let sessionId = '';
    ws.once('upgrade', (res) => (sessionId = String(res.headers['x-nexus-request-id'])));
    const messages: Record<string, any>[] = [];
    ws.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString('utf8')) as Record<string, any>));
    await new Promise((resolve) => ws.once('open', resolve));
    ws.send(JSON.stringify({ setup: { model: 'models/gemini-live-2.5-flash-preview' } }));
    await until(async () => messages.some((m) => m.setupComplete));
    const ask = () =>
      ws.send(JSON.stringify({ clientContent: { turns: [{ role: 'user', parts: [{ text: 'hi' }] }], turnComplete: true } }));
    live.usages.push({ input: 20, output: 30 });
    ask();
    await until(async () => messages.some((m) => m.serverContent?.turnComplete));
    // Turn 2 sends its four output messages, then nothing: its input bound is the conversation so far (50 tokens).
    live.behaviour.push('hang');
    ask();
    await until(async () => messages.filter((m) => m.serverContent?.modelTurn).length === 8);
    const leaseCalls = () =>
      t.database
        .db('lease_calls')
        .whereIn('lease_id', t.database.db('quota_leases').select('id').where({ workspace_access_id: tenant.accessId }));
    // The snapshot writes the turn in flight as it stands (50 input units, 4 output tokens at 2) and the session as lost.
    await until(async () => (await leaseCalls()).some((row) => BigInt(row.units) === 58n), 15_000);
    await until(
      async () => (await leaseCalls()).some((row) => (row.invocation as { session?: { turns: number } }).session?.turns === 1),
      15_000,
    );
    await nexus.kill();

    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 30_000);
    const rows = await t.database.db('invocations').where({ workspace_access_id: tenant.accessId }).orderBy('started_at');
    expect(rows.map((r) => [r.id === sessionId ? 'session' : r.session_id, r.status, r.error_code, BigInt(r.quota_units)])).toEqual([
      ['session', 'FAILED', 'gateway_lost', 80n],
      [sessionId, 'SUCCEEDED', null, 80n],
      [sessionId, 'FAILED', 'gateway_lost', 58n],
    ]);
    expect(rows[0].session).toMatchObject({ turns: 1, closeCode: 1006, closeReason: 'gateway_lost' });
    expect(rows[0].requested_model).toBe('gemini-live-2.5-flash-preview');
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: 138n });
    expect(await leaseCalls()).toEqual([]);
    ws.terminate();
  }, 60_000);
});

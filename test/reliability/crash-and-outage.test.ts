/**
 * What Nexus keeps when a process dies or PostgreSQL goes away, with real
 * processes: a Nexus child killed with SIGKILL mid-stream, and a Nexus child
 * whose PostgreSQL is reached through a TCP proxy the test cuts (one of them
 * started while it is cut, which waits for it). The in-process
 * app of the test file is the other process: it makes the tenant and runs the
 * sweeper that reclaims a dead process's leases. The shared cluster is never
 * stopped.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startAnthropicUpstream, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startNexusProcess, type NexusProcess } from '../support/nexus-process.js';
import { startRealtimeUpstream } from '../support/upstreams/realtime.js';
import { startTcpProxy, type TcpProxy } from '../../scripts/lib/tcp-proxy.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { chatInputBound, createTenant, periodOf, until, type Tenant } from '../gateway/gateway-support.js';

/** What a process logs once it has written the records another left in the spool. */
const SPOOL_WRITTEN = 'wrote the gateway records that waited in the spool';

const usesPostgres = process.env.NEXUS_TEST_DB !== 'pglite';
const KEY = `${SECRET_MARKER}-upstream-reliability-0123456789`;
const TTL_MS = 2000;

let t: TestApp;
let up: FakeUpstream;
let anthropicUp: FakeUpstream;
let dataDir: string;
const children: NexusProcess[] = [];

beforeAll(async () => {
  if (!usesPostgres) return;
  t = await startTestApp({ env: { NEXUS_LEASE_TTL_MS: String(TTL_MS), NEXUS_QUOTA_LEASE_IDLE_MS: '200' } });
  up = await startOpenAiUpstream({ apiKey: KEY });
  anthropicUp = await startAnthropicUpstream({ apiKey: KEY });
  dataDir = mkdtempSync(join(tmpdir(), 'nexus-reliability-'));
});
afterAll(async () => {
  for (const child of children) await child.kill();
  await t?.close();
  await up?.close();
  await anthropicUp?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** A Nexus process on the test app's schema (through `databaseUrl` if given), with its own data dir. */
async function child(options: { databaseUrl?: string; dir?: string; env?: Record<string, string> } = {}): Promise<NexusProcess> {
  const process = await startNexusProcess({
    DATABASE_URL: options.databaseUrl ?? t.database.url!,
    ...(t.database.schema ? { NEXUS_DATABASE_SCHEMA: t.database.schema } : {}),
    ...(t.database.directUrl ? { NEXUS_DATABASE_LISTEN_URL: t.database.directUrl } : {}),
    NEXUS_DATA_DIR: options.dir ?? mkdtempSync(join(dataDir, 'child-')),
    NEXUS_LEASE_TTL_MS: String(TTL_MS),
    ...options.env,
  });
  children.push(process);
  return process;
}

const BODY = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'reliability' }], max_tokens: 50 });
const STREAM = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'reliability' }], max_tokens: 50, stream: true });

function call(tenant: Tenant, base: string, options: { body?: string; headers?: Record<string, string>; signal?: AbortSignal } = {}) {
  return fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0', ...options.headers },
    body: options.body ?? BODY,
    signal: options.signal ?? null,
  });
}

/** The files waiting in a data dir's spool (none before the first is written). */
/** Five calls, one after the other: the request ids of those answered 200. */
async function fiveCalls(tenant: Tenant, base: string): Promise<string[]> {
  const answered: string[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await call(tenant, base);
    await res.text();
    if (res.status === 200) answered.push(res.headers.get('x-nexus-request-id')!);
  }
  return answered;
}

function spooled(dir: string): string[] {
  try {
    return readdirSync(join(dir, 'spool'));
  } catch {
    return [];
  }
}

/** The records in the spool's files (a JSON line each): a file is appended to a batch at a time. */
function spooledRecords(dir: string): number {
  return spooled(dir).reduce(
    (n, file) =>
      n +
      readFileSync(join(dir, 'spool', file), 'utf8')
        .split('\n')
        .filter(Boolean).length,
    0,
  );
}

const gatewayOf = (tenant: Tenant, nexus: NexusProcess) => tenant.gatewayBaseUrl.replace(t.url, nexus.url);

async function invocationsOf(accessId: string) {
  return t.database.db('invocations').where({ workspace_access_id: accessId }).orderBy('started_at');
}

describe.runIf(usesPostgres)('a Nexus process killed mid-stream', () => {
  it('its cut streams are charged once, by the process that reclaims its lease, and its units return within the TTL', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n });
    const nexus = await child();
    const base = gatewayOf(tenant, nexus);
    // Five streams of 40 events, 150 ms apart: six seconds each, killed after about one.
    const streams = await Promise.all(
      Array.from({ length: 5 }, () =>
        call(tenant, base, { body: STREAM, headers: { 'x-fake-fault': 'slow', 'x-fake-delay-ms': '150', 'x-fake-usage': '10,40,0' } }),
      ),
    );
    const read = streams.map(async (res) => {
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      let events = 0;
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          events += (new TextDecoder().decode(value).match(/^data: /gm) ?? []).length;
        }
      } catch {
        // The process died under it.
      }
      return events;
    });
    // Some events reached the clients, and the process's heartbeat (a fifth of the TTL) wrote the streams.
    await new Promise((r) => setTimeout(r, 1000));
    expect((await periodOf(t, tenant.accessId)).reserved).toBeGreaterThan(0n);
    await nexus.kill();
    const killedAt = Date.now();
    const delivered = await Promise.all(read);
    for (const events of delivered) {
      expect(events).toBeGreaterThan(0);
      expect(events).toBeLessThan(40);
    }

    // The test app's sweeper (every TTL/4) reclaims the lease once it is past its TTL.
    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 30_000);
    const freedAfterMs = Date.now() - killedAt;
    expect(freedAfterMs).toBeLessThan(30_000);
    const invocations = await invocationsOf(tenant.accessId);
    expect(invocations).toHaveLength(5);
    let charged = 0n;
    for (const invocation of invocations) {
      expect(invocation).toMatchObject({ status: 'FAILED', error_code: 'gateway_lost', streamed: true, attempt_status: 'ABORTED' });
      const units = BigInt(invocation.quota_units);
      // At least its input bound and one output token per event the heartbeat saw, at most its whole bound.
      expect(units).toBeGreaterThan(chatInputBound(STREAM));
      const events = await t.database.db('usage_events').where({ invocation_id: invocation.id });
      expect(events.map((e) => [e.kind, BigInt(e.units)])).toEqual([['USAGE', units]]);
      charged += units;
    }
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: charged });
    const [lease] = await t.database.db('quota_leases').where({ workspace_access_id: tenant.accessId });
    expect(lease.status).toBe('EXPIRED');
    expect(await t.database.db('lease_calls').where({ lease_id: lease.id })).toEqual([]);

    // A new process on the same database charges nothing more for them.
    const again = await child();
    expect((await call(tenant, gatewayOf(tenant, again))).status).toBe(200);
    await until(async () => (await invocationsOf(tenant.accessId)).length === 6);
    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 10_000);
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(charged + 20n);
    await again.stop();
  }, 90_000);
});

describe.runIf(usesPostgres)('a Nexus process killed within the first second of its streams', () => {
  it('each stream that began answering is charged its input bound and the output it delivered, less at most the snapshot window', async () => {
    // Quota units are input plus output tokens here, so a call's units tell its output.
    const tenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      quotaUnits: 1_000_000n,
      outputPpm: 1_000_000n,
      cachedPpm: 1_000_000n,
    });
    // The heartbeat comes every 2 s (a fifth of this TTL): what is written within the first second is the snapshot's.
    const nexus = await child({ env: { NEXUS_LEASE_TTL_MS: '10000' } });
    const base = gatewayOf(tenant, nexus);
    const body = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'loss window' }], max_tokens: 500, stream: true });
    const inputBound = chatInputBound(body);
    // One word an event, every 50 ms, for 10 s.
    const headers = { 'x-fake-fault': 'runaway', 'x-fake-delay-ms': '50', 'x-fake-usage': '10,200,0' };
    type Stream = { firstByteAt: number; words: Promise<number>; requestId: string };
    const open = async (): Promise<Stream> => {
      const res = await call(tenant, base, { body, headers });
      expect(res.status).toBe(200);
      const requestId = res.headers.get('x-nexus-request-id')!;
      const reader = res.body!.getReader();
      const first = await reader.read();
      const firstByteAt = Date.now();
      let text = new TextDecoder().decode(first.value);
      const words = (async () => {
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            text += new TextDecoder().decode(value);
          }
        } catch {
          // The process died under it.
        }
        return (text.match(/"content":"[^"]/g) ?? []).length;
      })();
      return { firstByteAt, words, requestId };
    };
    const early = await open();
    await new Promise((r) => setTimeout(r, 400));
    const late = await open();
    // In lease_calls within 500 ms of its first byte (the heartbeat comes every 2 s here).
    const inSnapshot = async () =>
      (await t.database.db('lease_calls').whereRaw("invocation->>'request_id' = ?", [late.requestId])).length === 1;
    await until(inSnapshot, 5000);
    expect(Date.now() - late.firstByteAt).toBeLessThan(500);
    // Killed 1 s after the first stream's first byte, about 0.6 s after the second's.
    await new Promise((r) => setTimeout(r, Math.max(0, early.firstByteAt + 1000 - Date.now())));
    await nexus.kill();
    const killedAt = Date.now();
    const delivered = [await early.words, await late.words];
    expect(killedAt - late.firstByteAt).toBeLessThan(900);
    expect(delivered[1]).toBeGreaterThan(0);

    // The test app's sweeper reclaims the lease after its TTL and charges both streams from the snapshot.
    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 30_000);
    const invocations = await invocationsOf(tenant.accessId);
    expect(invocations).toHaveLength(2);
    for (const [i, stream] of [early, late].entries()) {
      const invocation = invocations.find((row) => row.request_id === stream.requestId)!;
      expect(invocation).toMatchObject({ status: 'FAILED', error_code: 'gateway_lost', streamed: true, attempt_status: 'ABORTED' });
      const output = BigInt(invocation.quota_units) - inputBound;
      // At most what reached the gateway (a word or two more than its client read); at least what it had
      // delivered half a second before the kill (the snapshot's window: 250 ms and its statement), 10 words.
      expect(output).toBeLessThanOrEqual(BigInt(delivered[i]!) + 2n);
      expect(output).toBeGreaterThanOrEqual(BigInt(Math.max(1, delivered[i]! - 10)));
    }
    const charged = invocations.reduce((sum, row) => sum + BigInt(row.quota_units), 0n);
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(charged);
  }, 90_000);
});

describe.runIf(usesPostgres)('a Nexus process killed mid-turn of a Realtime session', () => {
  it('its settled turn stays charged, the turn in flight is charged as delivered, once, and the session recorded lost, by the process that reclaims its lease', async () => {
    const realtime = await startRealtimeUpstream({ apiKey: KEY });
    const tenant = await createTenant(t, { baseUrl: realtime.url, providerKey: KEY, maxOutputTokens: 100, quotaUnits: 1_000_000n });
    const nexus = await child();
    const ws = new WebSocket(`${gatewayOf(tenant, nexus).replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`, ['realtime'], {
      headers: { authorization: `Bearer ${tenant.apiKey}` },
    });
    ws.on('error', () => {});
    let sessionId = '';
    ws.once('upgrade', (res) => (sessionId = String(res.headers['x-nexus-request-id'])));
    const types: string[] = [];
    ws.on('message', (data: Buffer) => types.push((JSON.parse(data.toString('utf8')) as { type: string }).type));
    await until(async () => types.includes('session.created'));
    realtime.usages.push({ input: 20, output: 30 });
    ws.send(JSON.stringify({ type: 'response.create' }));
    await until(async () => types.includes('response.done'));
    // Turn 2 sends its nine output frames, then nothing: its input bound is the conversation so far (50 tokens).
    realtime.behaviour.push('hang');
    ws.send(JSON.stringify({ type: 'response.create' }));
    await until(async () => types.filter((type) => type.endsWith('.delta')).length === 18);
    const leaseCalls = () =>
      t.database
        .db('lease_calls')
        .whereIn('lease_id', t.database.db('quota_leases').select('id').where({ workspace_access_id: tenant.accessId }));
    // The snapshot writes the turn in flight as it stands: 50 input units and 9 output tokens at 2; and the
    // session's own record as it would be were the process to die now (its turn 1 counted, charged nothing).
    await until(async () => (await leaseCalls()).some((row) => BigInt(row.units) === 68n));
    await until(async () => (await leaseCalls()).some((row) => (row.invocation as { session?: { turns: number } }).session?.turns === 1));
    await nexus.kill();

    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 30_000);
    const rows = await invocationsOf(tenant.accessId);
    // The session's own invocation (its id the handshake's request id), written by the reclaim: lost with its process.
    expect(rows.map((r) => [r.id === sessionId ? 'session' : r.session_id, r.status, r.error_code, BigInt(r.quota_units)])).toEqual([
      ['session', 'FAILED', 'gateway_lost', 80n],
      [sessionId, 'SUCCEEDED', null, 80n],
      [sessionId, 'FAILED', 'gateway_lost', 68n],
    ]);
    expect(rows[0].session).toMatchObject({ turns: 1, closeCode: 1006, closeReason: 'gateway_lost' });
    expect(await t.database.db('usage_events').where({ invocation_id: sessionId })).toEqual([]);
    const events = await t.database.db('usage_events').where({ invocation_id: rows[2].id });
    expect(events.map((e) => [e.kind, BigInt(e.units)])).toEqual([['USAGE', 68n]]);
    expect(await periodOf(t, tenant.accessId)).toMatchObject({ reserved: 0n, consumed: 148n });
    expect(await leaseCalls()).toEqual([]);
    // Swept again, nothing more is charged.
    await t.nexus.gateway.sweepExpired();
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(148n);
    ws.terminate();
    await realtime.close();
  }, 60_000);
});

describe.runIf(usesPostgres)('an Anthropic stream killed with its process', () => {
  it('is charged the text deltas it delivered, not the events around them', async () => {
    const tenant = await createTenant(t, { profile: 'anthropic', baseUrl: anthropicUp.url, providerKey: KEY, quotaUnits: 1_000_000n });
    const nexus = await child();
    // message_start, content_block_start, ping and three text deltas (alpha, beta, gamma), then nothing more.
    const res = await fetch(`${gatewayOf(tenant, nexus)}/v1/messages`, {
      method: 'POST',
      headers: {
        'x-api-key': tenant.apiKey,
        'anthropic-version': '2023-06-01',
        'content-type': 'application/json',
        'x-fake-usage': '10,8,0',
        'x-fake-stall-after': '6',
      },
      body: JSON.stringify({ model: 'claude-kill', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'kill' }] }),
    });
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-nexus-request-id')!;
    const reader = res.body!.getReader();
    let seen = '';
    while (!seen.includes('gamma')) seen += new TextDecoder().decode((await reader.read()).value);
    // Written to lease_calls (within 50 ms of its first byte), and again by the snapshot should it have changed
    // since (every 250 ms): then the process dies.
    const written = async () => (await t.database.db('lease_calls').whereRaw("invocation->>'request_id' = ?", [requestId])).length === 1;
    await until(written, 5000);
    await new Promise((r) => setTimeout(r, 750));
    await nexus.kill();
    await reader.cancel().catch(() => {});
    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 30_000);
    const [invocation] = await invocationsOf(tenant.accessId);
    expect(invocation).toMatchObject({ status: 'FAILED', error_code: 'gateway_lost', request_id: requestId });
    const events = await t.database.db('usage_events').where({ invocation_id: invocation.id });
    expect(events).toHaveLength(1);
    // message_start reported the input (10) and 1 output token so far; three text deltas followed.
    expect(events[0]).toMatchObject({ kind: 'USAGE', input_tokens: 10n, output_tokens: 3n });
  }, 60_000);
});

describe.runIf(usesPostgres)('PostgreSQL unreachable', () => {
  let proxy: TcpProxy;
  beforeAll(async () => {
    const url = new URL(t.database.url!);
    proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
  });
  afterAll(async () => {
    await proxy?.close();
  });

  function proxiedUrl(): string {
    const url = new URL(t.database.url!);
    url.port = String(proxy.port);
    return url.toString();
  }

  it('answers 503 database_unavailable with Retry-After, never 500; finished calls wait in the spool and are written once when it returns', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n });
    const dir = mkdtempSync(join(dataDir, 'outage-'));
    const nexus = await child({ databaseUrl: proxiedUrl(), dir });
    const base = gatewayOf(tenant, nexus);
    // Warm: the key is looked up and a lease is held.
    for (let i = 0; i < 3; i++) expect((await call(tenant, base)).status).toBe(200);

    await proxy.cut();
    const statuses: number[] = [];
    const answered: string[] = [];
    const refused: string[] = [];
    const started = Date.now();
    while (Date.now() - started < 2500) {
      const res = await call(tenant, base);
      statuses.push(res.status);
      if (res.status === 200) answered.push(res.headers.get('x-nexus-request-id')!);
      else {
        refused.push(res.headers.get('x-nexus-request-id')!);
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('2');
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('database_unavailable');
      }
      await res.text().catch(() => '');
      await new Promise((r) => setTimeout(r, 50));
    }
    const admin = await fetch(`${nexus.url}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
    expect(admin.status).toBe(503);
    expect(admin.headers.get('retry-after')).toBe('2');
    expect(((await admin.json()) as { error: { code: string } }).error.code).toBe('database_unavailable');
    expect(statuses).not.toContain(500);
    // Calls were admitted on what the process held (its lease, its cached key) for a while, then refused.
    expect(answered.length).toBeGreaterThan(0);
    expect(statuses).toContain(503);
    // The records waiting went to the spool.
    await until(async () => spooled(dir).length > 0, 5000);

    await proxy.restore();
    const expected = 3 + answered.length;
    const succeeded = async () => (await invocationsOf(tenant.accessId)).filter((i) => i.status === 'SUCCEEDED');
    await until(async () => (await succeeded()).length === expected, 20_000);
    await until(async () => spooled(dir).length === 0, 10_000);
    const invocations = await invocationsOf(tenant.accessId);
    for (const id of answered) expect(invocations.filter((i) => i.request_id === id)).toHaveLength(1);
    // A call refused once its key was known (its lookup still cached) is a call of the access: it is recorded, once,
    // as failed for the database, and charged nothing. One refused before its key was known has no access to record.
    for (const refusal of invocations.filter((i) => i.status !== 'SUCCEEDED')) {
      expect(refusal).toMatchObject({ status: 'FAILED', error_code: 'database_unavailable' });
      expect(refused.filter((id) => id === refusal.request_id)).toHaveLength(1);
    }
    const events = await t.database.db('usage_events').where({ workspace_access_id: tenant.accessId, kind: 'USAGE' });
    expect(events).toHaveLength(expected);
    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 10_000);
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(20n * BigInt(expected));
    expect(nexus.output()).not.toContain('"status":500');
    await nexus.stop();
  }, 90_000);

  it('a process killed while records wait in its spool: the next one on its data dir writes them, once', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n });
    const dir = mkdtempSync(join(dataDir, 'respool-'));
    const first = await child({ databaseUrl: proxiedUrl(), dir });
    const base = gatewayOf(tenant, first);
    expect((await call(tenant, base)).status).toBe(200);
    await until(async () => (await invocationsOf(tenant.accessId)).length === 1);
    await proxy.cut();
    const answered = await fiveCalls(tenant, base);
    expect(answered.length).toBeGreaterThan(0);
    // Killed once every answered call's record is in the spool (a later batch may still be trying the database).
    await until(async () => spooledRecords(dir) === answered.length, 10_000);
    await first.kill();
    await proxy.restore();

    const second = await child({ databaseUrl: proxiedUrl(), dir });
    const expected = 1 + answered.length;
    await until(async () => (await invocationsOf(tenant.accessId)).length === expected, 20_000);
    await until(async () => spooled(dir).length === 0, 10_000);
    const events = await t.database.db('usage_events').where({ workspace_access_id: tenant.accessId, kind: 'USAGE' });
    expect(events).toHaveLength(expected);
    // The first process's lease is reclaimed after its TTL; every call was charged once.
    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 15_000);
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(20n * BigInt(expected));
    await second.stop();
  }, 90_000);

  /** The Error body's code and the Retry-After of a 503 (the body read). */
  async function refusal(res: Response): Promise<{ status: number; code: string; retryAfter: string | null }> {
    const body = (await res.json()) as { error: { code: string } };
    return { status: res.status, code: body.error.code, retryAfter: res.headers.get('retry-after') };
  }

  it('a process started while the database is away serves /healthz and refuses the rest 503; ready within 2 s of its return, it writes the spool a drained process left', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n });
    const dir = mkdtempSync(join(dataDir, 'start-in-outage-'));
    const first = await child({ databaseUrl: proxiedUrl(), dir });
    const base = gatewayOf(tenant, first);
    expect((await call(tenant, base)).status).toBe(200);
    await until(async () => (await invocationsOf(tenant.accessId)).length === 1);
    await proxy.cut();
    try {
      const answered = await fiveCalls(tenant, base);
      expect(answered.length).toBeGreaterThan(0);
      // Drained while the database is away: its records stay in its spool file, for another process to write.
      expect(await first.stop()).toBe(0);
      const left = spooled(dir);
      expect(spooledRecords(dir)).toBe(answered.length);

      // Its replacement starts during the outage: it listens (startNexusProcess waited for /healthz 200)...
      const second = await child({ databaseUrl: proxiedUrl(), dir });
      expect((await fetch(`${second.url}/healthz`)).status).toBe(200);
      // ...is not ready, and refuses what needs the database 503 with Retry-After, never 500.
      expect(await refusal(await fetch(`${second.url}/readyz`))).toEqual({ status: 503, code: 'not_ready', retryAfter: null });
      const admin = await fetch(`${second.url}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
      expect(await refusal(admin)).toEqual({ status: 503, code: 'database_unavailable', retryAfter: '2' });
      expect(await refusal(await call(tenant, gatewayOf(tenant, second)))).toEqual({
        status: 503,
        code: 'database_unavailable',
        retryAfter: '2',
      });
      // Some seconds on (its tries are at their longest interval by then), it still waits, and the spool with it.
      await new Promise((r) => setTimeout(r, 3000));
      expect(second.child.exitCode).toBe(null);
      expect((await fetch(`${second.url}/readyz`)).status).toBe(503);
      expect(spooled(dir)).toEqual(left);
      expect((await invocationsOf(tenant.accessId)).length).toBe(1);

      await proxy.restore();
      const back = Date.now();
      await until(async () => (await fetch(`${second.url}/readyz`)).status === 200, 10_000);
      expect(Date.now() - back).toBeLessThan(2000);
      // The drained process's records: written once, the spool emptied.
      const expected = 1 + answered.length;
      await until(async () => (await invocationsOf(tenant.accessId)).length === expected, 10_000);
      await until(async () => spooled(dir).length === 0, 5000);
      const invocations = await invocationsOf(tenant.accessId);
      for (const id of answered) expect(invocations.filter((i) => i.request_id === id)).toHaveLength(1);
      await until(async () => second.output().includes(SPOOL_WRITTEN), 5000).catch(() => expect(second.output()).toContain(SPOOL_WRITTEN));
      // It serves calls now; the first process's lease is reclaimed after its TTL; every call was charged once.
      expect((await call(tenant, gatewayOf(tenant, second))).status).toBe(200);
      await until(async () => (await invocationsOf(tenant.accessId)).length === expected + 1, 10_000);
      await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 15_000);
      expect((await periodOf(t, tenant.accessId)).consumed).toBe(20n * BigInt(expected + 1));
      // Its log: one line when it began to wait, one when the database answered; no 500, no stack.
      const lines = second.logLines();
      expect(lines.filter((l) => String(l.msg).startsWith('the database is unavailable: waiting for it'))).toHaveLength(1);
      expect(lines.filter((l) => l.msg === 'the database answers: starting')).toHaveLength(1);
      expect(second.output()).not.toContain('"status":500');
      expect(second.output()).not.toMatch(/\n\s+at /);
      expect(await second.stop()).toBe(0);
    } finally {
      if (!proxy.up()) await proxy.restore();
    }
  }, 90_000);

  it('NEXUS_WORKERS: started while the database is away, the first worker waits as a process does; the others start once it is back', async () => {
    const dir = mkdtempSync(join(dataDir, 'workers-in-outage-'));
    await proxy.cut();
    try {
      const nexus = await child({ databaseUrl: proxiedUrl(), dir, env: { NEXUS_WORKERS: '2' } });
      expect(await refusal(await fetch(`${nexus.url}/readyz`))).toEqual({ status: 503, code: 'not_ready', retryAfter: null });
      const admin = await fetch(`${nexus.url}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
      expect(await refusal(admin)).toEqual({ status: 503, code: 'database_unavailable', retryAfter: '2' });
      await new Promise((r) => setTimeout(r, 1000));
      expect(nexus.child.exitCode).toBe(null);
      expect(nexus.logLines().filter((l) => l.msg === 'listening')).toEqual([]);

      await proxy.restore();
      await until(async () => (await fetch(`${nexus.url}/readyz`)).status === 200, 10_000);
      await until(
        async () =>
          new Set(
            nexus
              .logLines()
              .filter((l) => l.msg === 'listening')
              .map((l) => l.pid),
          ).size === 2,
        30_000,
      );
      expect((await fetch(`${nexus.url}/admin/v1/workspaces`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } })).status).toBe(200);
      expect(nexus.output()).not.toContain('"status":500');
      expect(await nexus.stop()).toBe(0);
    } finally {
      if (!proxy.up()) await proxy.restore();
    }
  }, 90_000);

  it('a process that stopped while the database was away: a live process on its data dir writes its spool once the database is back, without a restart', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n });
    const dir = mkdtempSync(join(dataDir, 'claim-'));
    const first = await child({ databaseUrl: proxiedUrl(), dir });
    // The second runs all along on the same data dir, and found nothing to claim at its start.
    const second = await child({ databaseUrl: proxiedUrl(), dir });
    const base = gatewayOf(tenant, first);
    expect((await call(tenant, base)).status).toBe(200);
    await until(async () => (await invocationsOf(tenant.accessId)).length === 1);
    await proxy.cut();
    const answered = await fiveCalls(tenant, base);
    expect(answered.length).toBeGreaterThan(0);
    // Stopped while the database is away: its drain leaves the records in its spool file.
    await first.stop();
    const left = spooled(dir);
    expect(left.length).toBeGreaterThan(0);
    const recordedBefore = (await invocationsOf(tenant.accessId)).length;
    expect(recordedBefore).toBe(1);

    await proxy.restore();
    const back = Date.now();
    const expected = 1 + answered.length;
    await until(async () => (await invocationsOf(tenant.accessId)).length === expected, 10_000);
    expect(Date.now() - back).toBeLessThan(10_000);
    await until(async () => spooled(dir).length === 0, 5000);
    const invocations = await invocationsOf(tenant.accessId);
    for (const id of answered) expect(invocations.filter((i) => i.request_id === id)).toHaveLength(1);
    // Its log line follows the commit that wrote the rows: it may reach this test's pipe a moment after them.
    await until(async () => second.output().includes(SPOOL_WRITTEN), 5000).catch(() => expect(second.output()).toContain(SPOOL_WRITTEN));
    // The first process's lease is reclaimed after its TTL; every call was charged once.
    await until(async () => (await periodOf(t, tenant.accessId)).reserved === 0n, 15_000);
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(20n * BigInt(expected));
    await second.stop();
  }, 90_000);
});

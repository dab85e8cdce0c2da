/**
 * Faults on either side of the gateway: the upstream resets mid-stream, sends
 * malformed SSE, hangs; the client aborts mid-stream; a process dies holding a
 * lease. Nothing is lost or double-counted and no invocation stays open.
 */
import { SECRET_MARKER } from '../security/secret-marker.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getInvocation, listInvocations, listUsageEvents } from '../support/sdk.js';
import { leaseUnits } from '../support/quota-use.js';
import { startAnthropicUpstream, startBedrockUpstream, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { chatInputBound, createTenant, gatewayFetch, periodOf, until, type Tenant } from './gateway-support.js';

let t: TestApp;
let up: FakeUpstream;
let anUp: FakeUpstream;
let brUp: FakeUpstream;
let tenant: Tenant;
let anTenant: Tenant;
let brTenant: Tenant;
const KEY = `${SECRET_MARKER}-upstream-faults-0123456789`;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
  anUp = await startAnthropicUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
  anTenant = await createTenant(t, { profile: 'anthropic', baseUrl: anUp.url, providerKey: KEY });
  brUp = await startBedrockUpstream({ apiKeys: [KEY] });
  brTenant = await createTenant(t, { profile: 'bedrock', baseUrl: brUp.url, providerKey: KEY, aws: { awsRegion: 'us-east-1' } });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
  await anUp?.close();
  await brUp?.close();
});

const streamBody = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'stream' }], max_tokens: 100, stream: true, ...extra });

async function streamCall(who: Tenant, fault: string, body = streamBody(), path = 'v1/chat/completions') {
  return gatewayFetch()(`${who.gatewayBaseUrl}/${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${who.apiKey}`,
      'content-type': 'application/json',
      'anthropic-version': '2023-06-01',
      'x-fake-fault': fault,
    },
    body,
  });
}

async function settledInvocation(who: Tenant, requestId: string) {
  await t.nexus.gateway.drain();
  const list = await listInvocations({ client: t.client, path: { workspaceId: who.workspaceId }, query: { limit: 100 } });
  const found = list.data!.find((i) => i.requestId === requestId)!;
  expect(found).toBeTruthy();
  return (await getInvocation({ client: t.client, path: { invocationId: found.id } })).data!;
}

describe('upstream faults', () => {
  it('a reset mid-stream: the client sees the stream break, the call is charged once by the documented rule', async () => {
    const before = await periodOf(t, tenant.accessId);
    const res = await streamCall(tenant, 'reset');
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
    const inv = await settledInvocation(tenant, res.headers.get('x-nexus-request-id')!);
    expect(inv.status).toBe('FAILED');
    expect(inv.attempt).toMatchObject({ status: 'FAILED', errorCode: 'upstream_stream_broken' });
    // No usage was reported: input = the request's bound (its estimate), output = the events carrying output seen
    // (of the two before the reset, the first names only the role: 1).
    const input = chatInputBound(streamBody());
    expect(inv.usageEvents).toHaveLength(1);
    expect(inv.usageEvents![0]!.outputTokens).toBe('1');
    const after = await periodOf(t, tenant.accessId);
    expect(after.reserved).toBe(0n);
    expect(after.consumed - before.consumed).toBe(BigInt(inv.quotaUnits));
    expect(BigInt(inv.usageEvents![0]!.inputTokens)).toBe(input);
  });

  it('malformed SSE: the client gets the bytes as sent, the call is charged by the estimate and flagged', async () => {
    const res = await streamCall(tenant, 'malformed');
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('data: {"id":"broken"');
    expect(text).toContain('data: [DONE]');
    const inv = await settledInvocation(tenant, res.headers.get('x-nexus-request-id')!);
    expect(inv.status).toBe('SUCCEEDED');
    expect(inv.attempt!.errorCode).toBe('usage_missing');
    expect(inv.usageEvents).toHaveLength(1);
    expect((await periodOf(t, tenant.accessId)).reserved).toBe(0n);
  });

  it('malformed anthropic usage: message_start input counts, output estimated from the events', async () => {
    const res = await streamCall(
      anTenant,
      'malformed',
      JSON.stringify({ model: 'claude', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'x' }] }),
      'v1/messages',
    );
    expect(res.status).toBe(200);
    await res.text();
    const inv = await settledInvocation(anTenant, res.headers.get('x-nexus-request-id')!);
    expect(inv.usageEvents![0]!.inputTokens).toBe('10');
    expect(inv.attempt!.errorCode).toBe('usage_missing');
    expect((await periodOf(t, anTenant.accessId)).reserved).toBe(0n);
  });
});

describe('client aborts mid-stream', () => {
  it('aborts the upstream, settles what was used and marks the invocation CLIENT_ABORTED', async () => {
    const before = await periodOf(t, tenant.accessId);
    const controller = new AbortController();
    const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${tenant.apiKey}`,
        'content-type': 'application/json',
        'x-fake-fault': 'slow',
        'x-fake-delay-ms': '200',
        'x-fake-usage': '10,8,0',
      },
      body: streamBody(),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    controller.abort();
    await reader.cancel().catch(() => {});
    // The upstream's request ends soon after (the gateway aborted it).
    for (let i = 0; i < 50 && up.open() > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(up.open()).toBe(0);
    const inv = await settledInvocation(tenant, res.headers.get('x-nexus-request-id')!);
    expect(inv.status).toBe('CLIENT_ABORTED');
    expect(inv.attempt).toMatchObject({ status: 'ABORTED', errorCode: 'client_aborted' });
    expect(inv.usageEvents).toHaveLength(1);
    expect(Number(inv.usageEvents![0]!.outputTokens)).toBeLessThan(8);
    const after = await periodOf(t, tenant.accessId);
    expect(after.reserved).toBe(0n);
    expect(after.consumed - before.consumed).toBe(BigInt(inv.quotaUnits));
  });

  it('before the upstream answered: cancels the upstream request and charges nothing', async () => {
    const before = await periodOf(t, tenant.accessId);
    const controller = new AbortController();
    const call = gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', 'x-fake-fault': 'hang' },
      body: streamBody(),
      signal: controller.signal,
    });
    for (let i = 0; i < 50 && up.open() === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(up.open()).toBe(1);
    controller.abort();
    await expect(call).rejects.toThrow();
    for (let i = 0; i < 50 && up.open() > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(up.open()).toBe(0);
    await t.nexus.gateway.drain();
    const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 1 } });
    const inv = (await getInvocation({ client: t.client, path: { invocationId: list.data![0]!.id } })).data!;
    expect(inv.status).toBe('CLIENT_ABORTED');
    expect(inv.attempt).toMatchObject({ status: 'ABORTED', errorCode: 'client_aborted' });
    expect(inv.attempt!.httpStatus ?? null).toBeNull();
    expect(inv.usageEvents).toHaveLength(0);
    const after = await periodOf(t, tenant.accessId);
    expect(after.reserved).toBe(0n);
    expect(after.consumed).toBe(before.consumed);
  });
});

/**
 * A stream cut short is charged, for lack of usage, one output token per event that carried output (docs/reliability.md
 * "A process that dies mid-call"): the upstream sends its opening events and three output deltas, then nothing more,
 * and the client leaves once it has them. Each is charged 3 output tokens exactly: the events without output (a
 * stream's start, a content block's start, a ping, a chunk naming only its role) count nothing.
 */
describe('a stream its client leaves is charged the output events it carried, and no others', () => {
  const text = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'cut' }], max_tokens: 100, stream: true });
  const cases: { name: string; who: () => Tenant; path: string; body: string; events: number; headers: Record<string, string> }[] = [
    {
      name: 'Anthropic messages (message_start, content_block_start, ping, 3 text deltas)',
      who: () => anTenant,
      path: 'v1/messages',
      body: text('claude-cut'),
      events: 6,
      headers: { 'anthropic-version': '2023-06-01' },
    },
    {
      name: 'OpenAI chat completions (a chunk naming the role, 3 content chunks)',
      who: () => tenant,
      path: 'v1/chat/completions',
      body: text('gpt-cut'),
      events: 4,
      headers: {},
    },
    {
      name: 'OpenAI Responses API (response.created, output_item.added, content_part.added, 3 text deltas)',
      who: () => tenant,
      path: 'v1/responses',
      body: JSON.stringify({ model: 'gpt-cut', input: 'cut', max_output_tokens: 100, stream: true }),
      events: 6,
      headers: {},
    },
    {
      name: 'Bedrock ConverseStream (messageStart, 3 contentBlockDelta frames)',
      who: () => brTenant,
      path: 'model/anthropic.claude-cut-v1%3A0/converse-stream',
      body: JSON.stringify({ messages: [{ role: 'user', content: [{ text: 'cut' }] }], inferenceConfig: { maxTokens: 100 } }),
      events: 4,
      headers: {},
    },
  ];

  it.each(cases)('$name', async ({ who, path, body, events, headers }) => {
    const client = who();
    const before = await periodOf(t, client.accessId);
    const controller = new AbortController();
    const res = await gatewayFetch()(`${client.gatewayBaseUrl}/${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${client.apiKey}`,
        'content-type': 'application/json',
        'x-fake-usage': '10,8,0',
        'x-fake-stall-after': String(events),
        ...headers,
      },
      body,
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    // The third word (alpha, beta, gamma) has reached the client: so has every event before it.
    const reader = res.body!.getReader();
    let seen = '';
    while (!seen.includes('gamma')) {
      const { done, value } = await reader.read();
      expect(done).toBe(false);
      seen += Buffer.from(value!).toString('latin1');
    }
    controller.abort();
    await reader.cancel().catch(() => {});
    const inv = await settledInvocation(client, res.headers.get('x-nexus-request-id')!);
    expect(inv).toMatchObject({ status: 'CLIENT_ABORTED', errorCode: 'client_aborted' });
    expect(inv.usageEvents).toHaveLength(1);
    expect(inv.usageEvents![0]!.outputTokens).toBe('3');
    const after = await periodOf(t, client.accessId);
    expect(after.reserved).toBe(0n);
    expect(after.consumed - before.consumed).toBe(BigInt(inv.quotaUnits));
  });
});

describe('client leaves while its call is being admitted', () => {
  /**
   * The client leaves while the gateway waits for its quota lease (held up here by a lock on the period
   * row), so its connection has closed before the gateway starts the upstream call. Such a call used to
   * hang for good (waiting for a 'drain' or 'close' that had already happened): never recorded, and its
   * lease's units held until the sweeper's TTL (15 min).
   */
  async function leaveDuringAdmission(body: string) {
    const fresh = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const seen = up.requests.length;
    const lock = await t.database.db.transaction();
    await lock('quota_periods').where({ workspace_access_id: fresh.accessId }).forUpdate();
    const controller = new AbortController();
    const call = gatewayFetch()(`${fresh.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fresh.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '12,4,0' },
      body,
      signal: controller.signal,
    });
    call.catch(() => {});
    // Wait until the lease's statement waits for the lock, then leave.
    for (let i = 0; i < 100; i++) {
      const waiting = await t.database.db.raw(
        `select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%quota_leases%'`,
      );
      if (waiting.rows[0].n > 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    controller.abort();
    await new Promise((r) => setTimeout(r, 100));
    await lock.commit();
    let inv: Awaited<ReturnType<typeof getInvocation>>['data'];
    for (let i = 0; i < 100 && !inv; i++) {
      await new Promise((r) => setTimeout(r, 20));
      const list = await listInvocations({ client: t.client, path: { workspaceId: fresh.workspaceId }, query: { limit: 1 } });
      if (list.data![0]) inv = (await getInvocation({ client: t.client, path: { invocationId: list.data![0].id } })).data!;
    }
    expect(inv, 'the call was never recorded').toBeTruthy();
    await t.nexus.gateway.drain();
    return { inv: inv!, period: await periodOf(t, fresh.accessId), upstreamCalls: up.requests.length - seen };
  }

  it('a stream: recorded CLIENT_ABORTED, nothing charged, its lease returned', async () => {
    const { inv, period } = await leaveDuringAdmission(streamBody());
    expect(inv.status).toBe('CLIENT_ABORTED');
    expect(inv.attempt).toMatchObject({ status: 'ABORTED', errorCode: 'client_aborted' });
    expect(inv.usageEvents).toHaveLength(0);
    expect(period).toMatchObject({ reserved: 0n, consumed: 0n });
  });

  it('a JSON call: the provider is not called (nothing was asked of it yet), nothing charged', async () => {
    const { inv, period, upstreamCalls } = await leaveDuringAdmission(JSON.stringify({ model: 'gpt-test', messages: [], max_tokens: 100 }));
    expect(upstreamCalls).toBe(0);
    expect(inv).toMatchObject({ status: 'CLIENT_ABORTED', quotaUnits: '0', errorCode: 'client_aborted' });
    expect(inv.attempt).toMatchObject({ status: 'ABORTED', errorCode: 'client_aborted' });
    expect(inv.usageEvents).toHaveLength(0);
    expect(period).toMatchObject({ reserved: 0n, consumed: 0n });
  });
});

describe('client leaves before a JSON answer', () => {
  it('reads the answer to its end and charges its exact usage (the provider did the work)', async () => {
    const before = await periodOf(t, tenant.accessId);
    const seen = up.requests.length;
    const controller = new AbortController();
    const call = gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${tenant.apiKey}`,
        'content-type': 'application/json',
        'x-fake-fault': 'late',
        'x-fake-delay-ms': '300',
        'x-fake-usage': '12,4,0',
      },
      body: JSON.stringify({ model: 'gpt-test', messages: [], max_tokens: 100 }),
      signal: controller.signal,
    });
    for (let i = 0; i < 50 && up.requests.length === seen; i++) await new Promise((r) => setTimeout(r, 10));
    controller.abort();
    await expect(call).rejects.toThrow();
    // The upstream answers after the client left; the gateway still reads it.
    for (let i = 0; i < 100 && up.open() > 0; i++) await new Promise((r) => setTimeout(r, 20));
    await t.nexus.gateway.drain();
    const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 1 } });
    const inv = (await getInvocation({ client: t.client, path: { invocationId: list.data![0]!.id } })).data!;
    expect(inv).toMatchObject({ status: 'CLIENT_ABORTED', quotaUnits: String(12 + 4 * 2) });
    expect(inv.attempt).toMatchObject({ status: 'SUCCEEDED', httpStatus: 200, errorCode: 'client_aborted' });
    expect(inv.usageEvents).toHaveLength(1);
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed - before.consumed).toBe(20n);
    expect(after.reserved).toBe(0n);
  });
});

describe('the lease sweeper', () => {
  it('releases the leases of a process that died, charging nothing', async () => {
    const before = await periodOf(t, tenant.accessId);
    const period = await t.database.db('quota_periods').where({ workspace_access_id: tenant.accessId }).first();
    await leaseUnits(t.database.db, period, 500n, { now: new Date(), expiresAt: new Date(Date.now() - 1) });
    expect((await periodOf(t, tenant.accessId)).reserved).toBe(500n);
    expect(await t.nexus.gateway.sweepExpired()).toEqual({ leases: 1, calls: 0 });
    const after = await periodOf(t, tenant.accessId);
    expect(after.reserved).toBe(0n);
    expect(after.consumed).toBe(before.consumed);
    const events = await listUsageEvents({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 100 } });
    expect(events.data!.some((e) => e.leaseId && e.units === '500')).toBe(false);
  });
});

describe('no invocation stays open', () => {
  it('every recorded invocation of this file has a final status and a completion time', async () => {
    await t.nexus.gateway.drain();
    const rows = await t.database.db('invocations').select('status', 'completed_at');
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(['SUCCEEDED', 'UPSTREAM_ERROR', 'FAILED', 'CLIENT_ABORTED', 'REJECTED']).toContain(r.status);
      expect(r.completed_at).toBeTruthy();
    }
    const held = await t.database.db('quota_leases').where({ status: 'HELD' }).count<{ count: string }[]>('* as count');
    expect(Number(held[0]!.count)).toBe(0);
  });
});

describe('a shutdown whose deadline passes with calls under way', () => {
  it('cuts them, the metered JSON one too, and records them FAILED server_shutdown, charged by the broken-answer rule', async () => {
    const own = await startTestApp();
    try {
      // The upstream starts each answer and never finishes it.
      const who = await createTenant(own, { baseUrl: up.url, providerKey: KEY });
      const send = (want: 'json' | 'stream') =>
        fetch(`${who.gatewayBaseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${who.apiKey}`, 'content-type': 'application/json', 'x-fake-fault': 'stall' },
          body: want === 'stream' ? streamBody() : JSON.stringify({ model: 'gpt-test', messages: [], max_tokens: 100 }),
        }).then((res) => res.text().catch(() => 'cut'));
      const calls = [send('json'), send('stream')];
      // Both admitted on a lease (until() fails the test if none comes).
      await until(async () => (await own.database.db('quota_leases').where({ workspace_access_id: who.accessId })).length > 0);
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      await own.running.shutdown();
      // The deadline is 2 s; reading the JSON answer on to its end would have taken the upstream timeout (60 s).
      expect(Date.now() - started).toBeLessThan(8000);
      await Promise.all(calls);

      const db = own.database.db;
      const invocations = await db('invocations').where({ workspace_access_id: who.accessId });
      expect(invocations.map((i) => [i.streamed, i.status, i.error_code]).sort()).toEqual([
        [false, 'FAILED', 'server_shutdown'],
        [true, 'FAILED', 'server_shutdown'],
      ]);
      expect(invocations.map((i) => i.attempt_status)).toEqual(['ABORTED', 'ABORTED']);
      // Charged as an answer that broke off: the JSON call its whole bound, the stream what it had sent.
      const events = await db('usage_events').where({ workspace_access_id: who.accessId });
      expect(events).toHaveLength(2);
      const period = await db('quota_periods').where({ workspace_access_id: who.accessId }).first();
      expect(BigInt(period.reserved_units)).toBe(0n);
      expect(BigInt(period.consumed_units)).toBe(events.reduce((sum, e) => sum + BigInt(e.units), 0n));
      expect(await db('quota_leases').where({ workspace_access_id: who.accessId, status: 'HELD' })).toEqual([]);
    } finally {
      await own.running.shutdown();
      await own.database.drop();
    }
  });
});

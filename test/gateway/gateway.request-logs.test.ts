/**
 * Request logs (docs/request-logs.md), through the official OpenAI SDK against real fake upstreams on 127.0.0.1: a
 * workspace, a plan or a route that keeps them has each call's request and answer sealed in request_logs (and none
 * for a workspace that does not); no key is ever in them, even one the request or the answer carries; a stream's
 * answer is kept assembled, as its client received it; a body past its cap is cut and says so; `failed` keeps only
 * the calls that did not succeed; the Admin API serves a log to its workspace's keys only.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemActor } from '../../src/domain/actor.js';
import { openRequestLog } from '../../src/domain/request-logs/request-log-seal.js';
import type { RequestLogRow } from '../../src/domain/request-logs/request-log-types.js';
import { createSecretBox } from '../../src/domain/security/secret-box.js';
import { logPolicyFor } from '../../src/records/request-log.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { getInvocationLog, listAuditLogs, setPlanRequestLog, updateRoute, updateWorkspace, createRoute } from '../support/sdk.js';
import { startTestApp, TEST_ENCRYPTION_KEY, type TestApp } from '../support/test-app.js';
import { createTenant, openAiFor, type Tenant } from './gateway-support.js';

const KEY = testProviderKey('request-logs');
const box = createSecretBox(Buffer.from(TEST_ENCRYPTION_KEY, 'base64'));
let t: TestApp;
let up: FakeUpstream;
/** An upstream that answers every request with a body a test sets (forceBody): a key echoed, a stream of tool calls. */
let echo: FakeUpstream;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
  echo = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
  await echo?.close();
});

/** The call's invocation id, read from the answer's request id once its records are written. */
async function invocationOf(requestId: string): Promise<string> {
  await t.nexus.gateway.drain();
  const row = await t.database.db('invocations').where({ request_id: requestId }).first('id');
  expect(row, `invocation of ${requestId}`).toBeTruthy();
  return (row as { id: string }).id;
}

const rowsOf = (workspaceId: string) => t.database.db<RequestLogRow>('request_logs').where({ workspace_id: workspaceId });

async function chat(tenant: Tenant, content: string, headers: Record<string, string> = {}) {
  const { data, response } = await openAiFor(tenant, headers)
    .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }], max_tokens: 5 })
    .withResponse();
  return { data, requestId: response.headers.get('x-nexus-request-id')! };
}

const keep = (tenant: Tenant, requestLog: Parameters<typeof updateWorkspace>[0]['body']['requestLog']) =>
  updateWorkspace({ client: t.client, path: { workspaceId: tenant.workspaceId }, body: { requestLog } });

describe('a workspace that keeps every call, beside one that keeps none', () => {
  let kept: Tenant;
  let other: Tenant;
  beforeAll(async () => {
    kept = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    other = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const set = await keep(kept, { mode: 'all' });
    expect(set.response.status).toBe(200);
    expect(set.data!.requestLog).toEqual({ mode: 'all', maxBodyBytes: 65536, retentionDays: 7 });
  });

  it('keeps the opted-in call sealed, with its request and answer, and nothing of the other workspace', async () => {
    const mine = await chat(kept, 'What is the capital of France?', { 'x-fake-usage': '10,3,0' });
    const theirs = await chat(other, 'What is the capital of Spain?');
    const id = await invocationOf(mine.requestId);
    const otherId = await invocationOf(theirs.requestId);

    expect(await rowsOf(kept.workspaceId)).toHaveLength(1);
    expect(await rowsOf(other.workspaceId)).toHaveLength(0);
    const [row] = await rowsOf(kept.workspaceId);
    expect(row!.ciphertext).not.toContain('capital');
    expect(row!.key_id).toBe(box.currentKeyId);
    expect(row!.expires_at.getTime() - row!.created_at.getTime()).toBe(7 * 86_400_000);

    const log = await getInvocationLog({ client: t.client, path: { invocationId: id } });
    expect(log.response.status).toBe(200);
    expect(JSON.parse(log.data!.request.body).messages[0].content).toBe('What is the capital of France?');
    expect(log.data!.request.headers['content-type']).toBe('application/json');
    expect(log.data!.request.headers.authorization).toBeUndefined();
    expect(log.data!.response).toMatchObject({ status: 200, assembled: false, truncated: false });
    expect(JSON.parse(log.data!.response!.body).choices[0].message.content).toBe(mine.data.choices[0]!.message.content);

    const none = await getInvocationLog({ client: t.client, path: { invocationId: otherId } });
    expect(none.response.status).toBe(404);
    expect((none.error as { error: { code: string } }).error.code).toBe('request_log_not_found');
  });

  it("refuses another workspace's key, and reads the workspace's own", async () => {
    const call = await chat(kept, 'hello');
    const id = await invocationOf(call.requestId);
    const scoped = async (workspaceId: string) =>
      (await t.nexus.services.managementKeys.createScoped(systemActor('test'), { name: 'logs', workspaceIds: [workspaceId] })).key;
    const foreign = await getInvocationLog({ client: t.clientWith(await scoped(other.workspaceId)), path: { invocationId: id } });
    expect(foreign.response.status).toBe(404);
    expect((foreign.error as { error: { code: string } }).error.code).toBe('invocation_not_found');
    const own = await getInvocationLog({ client: t.clientWith(await scoped(kept.workspaceId)), path: { invocationId: id } });
    expect(own.response.status).toBe(200);
  });

  it('refuses a sampled policy without its rate, changing nothing', async () => {
    const refused = await keep(kept, { mode: 'sampled' });
    expect(refused.response.status).toBe(400);
    expect((refused.error as { error: { param: string } }).error.param).toBe('requestLog.sampleRate');
    const audit = await listAuditLogs({ client: t.client, path: { workspaceId: kept.workspaceId } });
    const updates = audit.data!.filter((e) => e.action === 'workspace.updated');
    expect(updates.map((e) => e.changes)).toEqual([{ requestLog: { mode: 'all' } }]);
  });
});

describe('no key is kept', () => {
  it("scrubs the caller's inference key and the provider's key from the request and an answer that echoes them", async () => {
    const tenant = await createTenant(t, { baseUrl: echo.url, providerKey: KEY });
    expect((await keep(tenant, { mode: 'all' })).response.status).toBe(200);
    echo.forceBody = {
      contentType: 'application/json',
      body: JSON.stringify({
        id: 'cmpl-echo',
        object: 'chat.completion',
        created: 0,
        model: 'gpt-4o-mini',
        choices: [{ index: 0, message: { role: 'assistant', content: `Your keys: ${tenant.apiKey} and ${KEY}` }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
      }),
    };
    try {
      const call = await chat(tenant, `my key is ${tenant.apiKey}, my provider's ${KEY}; another nx-live-${'a'.repeat(43)}`);
      // The client never sees the provider's key (secret-mask.ts); the log keeps neither.
      expect(call.data.choices[0]!.message.content).not.toContain(KEY);
      await invocationOf(call.requestId);
    } finally {
      echo.forceBody = undefined;
    }
    const rows = await rowsOf(tenant.workspaceId);
    expect(rows).toHaveLength(1);
    const opened = JSON.stringify(openRequestLog(box, rows[0]!).content);
    for (const secret of [tenant.apiKey, KEY, `nx-live-${'a'.repeat(43)}`]) expect(opened).not.toContain(secret);
    expect(opened.match(/\[redacted\]/g)).toHaveLength(5);
  });
});

describe('a stream', () => {
  it('is kept as the answer its client assembled: its text', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    expect((await keep(tenant, { mode: 'all' })).response.status).toBe(200);
    const { data: stream, response } = await openAiFor(tenant, { 'x-fake-usage': '10,8,0' })
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'count' }], max_tokens: 20, stream: true })
      .withResponse();
    let received = '';
    for await (const chunk of stream) received += chunk.choices[0]?.delta?.content ?? '';
    expect(received.split(' ').length).toBe(8);
    const log = await getInvocationLog({
      client: t.client,
      path: { invocationId: await invocationOf(response.headers.get('x-nexus-request-id')!) },
    });
    expect(log.data!.response).toMatchObject({ status: 200, assembled: true, body: received, truncated: false });
    expect(log.data!.response!.body).not.toContain('data:');
  });

  it('is kept with its tool calls, as its client assembled them', async () => {
    const tenant = await createTenant(t, { baseUrl: echo.url, providerKey: KEY });
    expect((await keep(tenant, { mode: 'all' })).response.status).toBe(200);
    const chunk = (delta: object, finish: string | null = null) =>
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    echo.forceBody = {
      contentType: 'text/event-stream',
      body:
        chunk({ role: 'assistant', content: 'Checking the weather. ' }) +
        chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":' } }] }) +
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }) +
        chunk({}, 'tool_calls') +
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 3, completion_tokens: 7, total_tokens: 10 } })}\n\n` +
        'data: [DONE]\n\n',
    };
    let requestId: string;
    const text: string[] = [];
    const calls: { id?: string; name: string; arguments: string }[] = [];
    try {
      const { data: stream, response } = await openAiFor(tenant)
        .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'weather?' }], stream: true })
        .withResponse();
      requestId = response.headers.get('x-nexus-request-id')!;
      for await (const c of stream) {
        const delta = c.choices[0]?.delta;
        if (delta?.content) text.push(delta.content);
        for (const call of delta?.tool_calls ?? []) {
          const at = (calls[call.index] ??= { name: '', arguments: '' });
          if (call.id) at.id = call.id;
          if (call.function?.name) at.name = call.function.name;
          at.arguments += call.function?.arguments ?? '';
        }
      }
    } finally {
      echo.forceBody = undefined;
    }
    const log = await getInvocationLog({ client: t.client, path: { invocationId: await invocationOf(requestId) } });
    expect(log.data!.response!.body).toBe(text.join(''));
    expect(log.data!.response!.toolCalls).toEqual(calls);
    expect(calls).toEqual([{ id: 'call_1', name: 'weather', arguments: '{"city":"Paris"}' }]);
  });
});

describe('a cap', () => {
  it('cuts a body past it, and says so', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    expect((await keep(tenant, { mode: 'all', maxBodyBytes: 1024 })).response.status).toBe(200);
    const long = 'é'.repeat(3000);
    const call = await chat(tenant, long);
    const log = await getInvocationLog({ client: t.client, path: { invocationId: await invocationOf(call.requestId) } });
    const request = log.data!.request;
    expect(request.truncated).toBe(true);
    expect(request.bytes).toBeGreaterThan(6000);
    expect(Buffer.byteLength(request.body)).toBeLessThanOrEqual(1024);
    expect(Buffer.byteLength(request.body)).toBeGreaterThan(1000);
    expect(request.body).not.toContain('\uFFFD');
    expect(log.data!.response!.truncated).toBe(false);
  });
});

describe("a plan's policy, `failed` only", () => {
  it('keeps the calls that failed, not those that succeeded; set through the plan, audited', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    expect((await keep(tenant, { mode: 'all' })).response.status).toBe(200);
    const set = await setPlanRequestLog({ client: t.client, path: { planId: tenant.planId }, body: { requestLog: { mode: 'failed' } } });
    expect(set.response.status).toBe(200);
    expect(set.data!.requestLog).toMatchObject({ mode: 'failed' });
    const audit = await listAuditLogs({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    expect(audit.data!.find((e) => e.action === 'plan.request_log_changed')?.changes).toMatchObject({
      before: null,
      after: { mode: 'failed' },
    });

    const ok = await chat(tenant, 'fine');
    let failedId: string | undefined;
    try {
      await chat(tenant, 'broken', { 'x-fake-fault': 'status-500' });
    } catch (err) {
      expect(err).toBeInstanceOf(OpenAI.APIError);
      failedId = await invocationOf((err as InstanceType<typeof OpenAI.APIError>).headers!.get('x-nexus-request-id')!);
    }
    const okLog = await getInvocationLog({ client: t.client, path: { invocationId: await invocationOf(ok.requestId) } });
    expect(okLog.response.status).toBe(404);
    const failed = await getInvocationLog({ client: t.client, path: { invocationId: failedId! } });
    expect(failed.response.status).toBe(200);
    expect(failed.data!.response).toMatchObject({ status: 500, assembled: false });
    expect(failed.data!.response!.body).toContain('error');
    expect(await rowsOf(tenant.workspaceId)).toHaveLength(1);
  });
});

describe("a route's policy", () => {
  it('comes before the workspace: `off` on the route keeps nothing of its calls', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    expect((await keep(tenant, { mode: 'all' })).response.status).toBe(200);
    const route = await createRoute({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'logs', targets: [{ providerConnectionId: tenant.connectionId }] },
    });
    const off = await updateRoute({ client: t.client, path: { routeId: route.data!.id }, body: { requestLog: { mode: 'off' } } });
    expect(off.data!.requestLog).toMatchObject({ mode: 'off' });
    const viaRoute = await chat({ ...tenant, gatewayBaseUrl: route.data!.gatewayBaseUrl }, 'through the route');
    const direct = await chat(tenant, 'direct');
    await invocationOf(viaRoute.requestId);
    await invocationOf(direct.requestId);
    expect(await rowsOf(tenant.workspaceId)).toHaveLength(1);
  });

  it('is drawn as the route, then the plan, then the workspace say; sampled at its rate', () => {
    const all = { mode: 'all', maxBodyBytes: 1024, retentionDays: 1 } as const;
    const off = { ...all, mode: 'off' } as const;
    const sampled = { ...all, mode: 'sampled', sampleRate: 0.25 } as const;
    expect(logPolicyFor(undefined, null, all)).toBe(all);
    expect(logPolicyFor(undefined, off, all)).toBeUndefined();
    expect(logPolicyFor(all, off, null)).toBe(all);
    expect(logPolicyFor(null, null, null)).toBeUndefined();
    expect(logPolicyFor(undefined, sampled, null, () => 0.2)).toBe(sampled);
    expect(logPolicyFor(undefined, sampled, null, () => 0.25)).toBeUndefined();
  });
});

describe('a sampled policy', () => {
  // The draw is Math.random when each call opens (not seeded by request id): the share kept is bounded, not exact.
  // 300 calls at 0.3 keep 90 on average, with a standard deviation of 7.9; [42, 138] is six of them either side, so a
  // correct draw fails this about once in 500 million runs, and a rate read as 0.1 (30) or 0.6 (180) always does.
  it('keeps about its share of calls: 300 calls at 0.3 keep between 42 and 138, each a whole log', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 100_000_000n });
    const set = await keep(tenant, { mode: 'sampled', sampleRate: 0.3 });
    expect(set.data!.requestLog).toEqual({ mode: 'sampled', sampleRate: 0.3, maxBodyBytes: 65536, retentionDays: 7 });
    const calls = 300;
    for (let sent = 0; sent < calls; sent += 10)
      await Promise.all(Array.from({ length: 10 }, (_, i) => chat(tenant, `sampled call ${sent + i}`)));
    await t.nexus.gateway.drain();
    const invocations = await t.database
      .db('invocations')
      .where({ workspace_id: tenant.workspaceId })
      .count<{ count: string }[]>('* as count');
    expect(Number(invocations[0]!.count)).toBe(calls);
    const rows = await rowsOf(tenant.workspaceId);
    expect(rows.length).toBeGreaterThanOrEqual(42);
    expect(rows.length).toBeLessThanOrEqual(138);
    // Each log kept is one call's, whole: its own invocation, its request and its answer.
    expect(new Set(rows.map((r) => r.invocation_id)).size).toBe(rows.length);
    const one = await getInvocationLog({ client: t.client, path: { invocationId: rows[0]!.invocation_id } });
    expect(one.response.status).toBe(200);
    expect(one.data!.request.body).toContain('sampled call');
    expect(one.data!.response).not.toBeNull();
  }, 120_000);
});

describe('retention', () => {
  it('removes the logs past their retention, and only those', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    expect((await keep(tenant, { mode: 'all' })).response.status).toBe(200);
    const first = await chat(tenant, 'old');
    const second = await chat(tenant, 'new');
    const oldId = await invocationOf(first.requestId);
    await invocationOf(second.requestId);
    await rowsOf(tenant.workspaceId)
      .where({ invocation_id: oldId })
      .update({ expires_at: new Date(Date.now() - 1000) });
    expect(await t.nexus.services.requestLogs.sweepExpired()).toBeGreaterThanOrEqual(1);
    const left = await rowsOf(tenant.workspaceId);
    expect(left.map((r) => r.invocation_id)).not.toContain(oldId);
    expect(left).toHaveLength(1);
  });
});

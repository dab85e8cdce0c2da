/**
 * Retries on a plain connection (docs/routes.md "Retries on a plain connection"): a connection with a `retry`
 * policy has its calls retried by a route's attempt loop, called with the official OpenAI SDK (its own retries
 * off) against a local upstream that fails before it answers. The call is charged once, for the attempt that
 * answered; every attempt is on its invocation; a caller's 4xx and an answer no retry can follow go back as
 * they are; a connection without a policy makes one attempt, as it always did.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConnectionRetryDto, ProviderConnectionDto } from '../../generated/client/types.gen.js';
import { createProviderConnection, updateProviderConnection } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startFaultyUpstream, type FaultMode, type FaultyUpstream } from '../support/upstreams/faulty.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { has, parseMetrics, sumOf } from '../observability/prom-text.js';
import { createTenant, gatewayFetch, invocationByRequestId, periodOf, type Tenant } from './gateway-support.js';

let t: TestApp;
let good: FakeUpstream;
let tenant: Tenant;
const ups: FaultyUpstream[] = [];
const KEY = testProviderKey('conn-retry');

beforeAll(async () => {
  t = await startTestApp();
  good = await startOpenAiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: good.url, providerKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await good?.close();
  await Promise.all(ups.map((u) => u.close()));
});

/** A connection of the tenant's workspace to a faulty upstream that answers `script` first, then `mode`. */
async function connection(
  script: FaultMode[],
  retry?: ConnectionRetryDto,
  mode: FaultMode = 'ok',
): Promise<{ up: FaultyUpstream; conn: ProviderConnectionDto }> {
  const up = await startFaultyUpstream(mode);
  up.script = script;
  ups.push(up);
  const res = await createProviderConnection({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: { name: 'retried', protocolProfile: 'openai', baseUrl: up.url, apiKey: KEY, ...(retry ? { retry } : {}) },
  });
  expect(res.response.status).toBe(201);
  return { up, conn: res.data! };
}

const sdkFor = (conn: ProviderConnectionDto) =>
  new OpenAI({ baseURL: conn.gatewayBaseUrl + '/v1', apiKey: tenant.apiKey, fetch: gatewayFetch(), maxRetries: 0 });

const chat = (conn: ProviderConnectionDto, stream = false) =>
  sdkFor(conn)
    .chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 50,
      ...(stream ? { stream: true } : {}),
    } as never)
    .withResponse();

const invocationOf = (requestId: string) => invocationByRequestId(t, tenant.workspaceId, requestId);

const FAST = { attempts: 3, baseDelayMs: 10, maxDelayMs: 50 };

describe('a failed attempt is retried, and the call charged once', () => {
  const cases: [string, FaultMode, boolean, number][] = [
    ['a 503, then 200', 'status-503', false, 503],
    ['a 429 with Retry-After: 0, then 200', 'status-429', false, 429],
    ['a 503, then a stream', 'status-503', true, 503],
  ];
  it.each(cases)('%s', async (_label, fault, stream, httpStatus) => {
    const { up, conn } = await connection([fault], FAST);
    up.retryAfter = '0';
    const before = await periodOf(t, tenant.accessId);
    const { data, response } = await chat(conn, stream);
    let text = '';
    if (stream) {
      for await (const c of data as unknown as AsyncIterable<{ choices: { delta?: { content?: string } }[] }>)
        text += c.choices[0]?.delta?.content ?? '';
    } else {
      text = (data as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-nexus-attempts')).toBe('2');
    expect(up.calls).toBe(2);

    const inv = await invocationOf(response.headers.get('x-nexus-request-id')!);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', providerConnectionId: conn.id });
    expect(inv.routeId).toBeUndefined();
    expect(inv.attempts).toHaveLength(2);
    expect(inv.attempts![0]).toMatchObject({
      sequence: 1,
      providerConnectionId: conn.id,
      status: 'UPSTREAM_ERROR',
      httpStatus,
      errorCode: 'upstream_status',
    });
    expect(inv.attempts![1]).toMatchObject({ sequence: 2, providerConnectionId: conn.id, status: 'SUCCEEDED' });
    // Charged once, for the attempt that answered (usage 10 in, 5 out; output at 2x).
    expect(inv.usageEvents).toHaveLength(1);
    expect(inv.quotaUnits).toBe('20');
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed - before.consumed).toBe(20n);
    expect(after.reserved).toBe(0n);
    // /metrics counts the connection's attempts by outcome, and the time waited between them.
    const samples = parseMetrics(await (await fetch(`${t.url}/metrics`)).text());
    expect(sumOf(samples, 'nexus_connection_attempts_total', { connection: conn.id, outcome: 'upstream_status' })).toBe(1);
    expect(sumOf(samples, 'nexus_connection_attempts_total', { connection: conn.id, outcome: 'answered' })).toBe(1);
    expect(has(samples, 'nexus_connection_retry_wait_seconds_total', { connection: conn.id })).toBe(true);
  });

  it('a timeout before the headers is retried too', async () => {
    const { up, conn } = await connection(['hang'], FAST);
    await updateProviderConnection({ client: t.client, path: { providerConnectionId: conn.id }, body: { upstreamTimeoutMs: 1000 } });
    const { response } = await chat(conn);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-nexus-attempts')).toBe('2');
    expect(up.calls).toBe(2);
    const inv = await invocationOf(response.headers.get('x-nexus-request-id')!);
    expect(inv.attempts![0]).toMatchObject({ status: 'FAILED', errorCode: 'upstream_timeout' });
  });
});

describe('what is answered as it is', () => {
  it('every attempt failed: the last answer is relayed, nothing charged, every attempt listed', async () => {
    const { up, conn } = await connection([], { ...FAST, attempts: 2 }, 'status-503');
    const before = await periodOf(t, tenant.accessId);
    const err = await chat(conn).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    const apiErr = err as InstanceType<typeof OpenAI.APIError>;
    expect(apiErr.status).toBe(503);
    expect(apiErr.headers?.get('x-nexus-attempts')).toBe('2');
    expect(up.calls).toBe(2);
    const inv = await invocationOf(apiErr.headers!.get('x-nexus-request-id')!);
    expect(inv.attempts).toHaveLength(2);
    expect(inv.attempts!.map((a) => a.httpStatus)).toEqual([503, 503]);
    expect(inv.usageEvents ?? []).toHaveLength(0);
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed).toBe(before.consumed);
    expect(after.reserved).toBe(0n);
  });

  it("a caller's 400 goes back after one attempt", async () => {
    const { up, conn } = await connection([], FAST, 'status-400');
    const err = await chat(conn).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get('x-nexus-attempts')).toBe('1');
    expect(up.calls).toBe(1);
  });

  it('a Retry-After past retryAfterCapMs is not waited for: that 429 is the answer', async () => {
    const { up, conn } = await connection([], { ...FAST, retryAfterCapMs: 1000 }, 'status-429');
    up.retryAfter = '60';
    const started = Date.now();
    const err = await chat(conn).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after')).toBe('60');
    expect(up.calls).toBe(1);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('a connection without a policy makes one attempt, as before', async () => {
    const { up, conn } = await connection(['status-503']);
    expect(conn.retry).toBeUndefined();
    const err = await chat(conn).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get('x-nexus-attempts')).toBeNull();
    expect(up.calls).toBe(1);
  });
});

describe('the policy through the Admin API', () => {
  it('is filled with the defaults, changed field by field, and turned off with null; the gateway follows', async () => {
    const { up, conn } = await connection([], { attempts: 3 }, 'ok');
    expect(conn.retry).toEqual({
      attempts: 3,
      retryOn: [429, 500, 502, 503, 504, 529],
      baseDelayMs: 200,
      maxDelayMs: 2000,
      retryAfterCapMs: 5000,
      budgetMs: 10000,
    });
    const changed = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { retry: { retryOn: [503], baseDelayMs: 5 } },
    });
    expect(changed.data!.retry).toMatchObject({ attempts: 3, retryOn: [503], baseDelayMs: 5, budgetMs: 10000 });
    up.script = ['status-503', 'status-503'];
    const retried = await chat(conn);
    expect(retried.response.headers.get('x-nexus-attempts')).toBe('3');

    const off = await updateProviderConnection({ client: t.client, path: { providerConnectionId: conn.id }, body: { retry: null } });
    expect(off.response.status).toBe(200);
    expect(off.data!.retry).toBeUndefined();
    up.script = ['status-503'];
    const calls = up.calls;
    await expect(chat(conn)).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    expect(up.calls - calls).toBe(1);
  });

  it.each([
    ['no attempt', { attempts: 0 }, 'retry.attempts'],
    ['a status below 408', { retryOn: [200] }, 'retry.retryOn'],
    ['an unknown field', { tries: 2 }, 'retry'],
  ])('refuses %s, naming the field', async (_label, retry, param) => {
    const res = await createProviderConnection({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'bad', protocolProfile: 'openai', baseUrl: good.url, apiKey: KEY, retry: retry as never },
    });
    expect(res.response.status).toBe(400);
    expect(res.error).toMatchObject({ error: { code: 'invalid_parameter' } });
    expect((res.error as { error: { param?: string } }).error.param).toContain(param);
  });
});

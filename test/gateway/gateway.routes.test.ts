/**
 * Calls through a route (docs/routes.md), made with the official OpenAI SDK against local upstreams: one
 * healthy (the shared fake) and faulty ones (test/support/upstreams/faulty.ts). A target that fails before
 * any byte reached the client costs the user nothing and is kept on the invocation; a stream cut after its
 * first bytes is never retried; a breaker opens on failures in a row or on its error rate (at its minimum of
 * attempts, not before), is skipped by another process within a second, and one opened by two at once is
 * announced once; /metrics follows each breaker and counts a retry's wait; an azure-openai target takes an
 * OpenAI-shaped call at its v1 API; loadbalance serves by weight.
 */
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteDto } from '../../generated/client/types.gen.js';
import {
  createProviderConnection,
  createRoute,
  createWebhookEndpoint,
  getRouteHealth,
  listWebhookMessages,
  updateRoute,
} from '../support/sdk.js';
import {
  refusedUrl,
  startAzureOpenAiUpstream,
  startOpenAiUpstream,
  testProviderKey,
  type FakeUpstream,
} from '../support/fake-upstreams.js';
import { startFaultyUpstream, type FaultMode, type FaultyUpstream } from '../support/upstreams/faulty.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { has, parseMetrics, sumOf } from '../observability/prom-text.js';
import { createTenant, gatewayFetch, invocationByRequestId, periodOf, type Tenant, until } from './gateway-support.js';

let t: TestApp;
let good: FakeUpstream;
let tenant: Tenant;
const faulty: FaultyUpstream[] = [];
const KEY = testProviderKey('routes-gw');

beforeAll(async () => {
  t = await startTestApp();
  good = await startOpenAiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: good.url, providerKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await good?.close();
  await Promise.all(faulty.map((f) => f.close()));
});

async function connectionTo(baseUrl: string, name = 'faulty'): Promise<string> {
  const res = await createProviderConnection({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: { name, protocolProfile: 'openai', baseUrl, apiKey: KEY },
  });
  expect(res.response.status).toBe(201);
  return res.data!.id;
}

async function faultyTarget(mode: FaultMode): Promise<{ up: FaultyUpstream; id: string }> {
  const up = await startFaultyUpstream(mode);
  faulty.push(up);
  return { up, id: await connectionTo(up.url) };
}

async function routeOf(body: Omit<Parameters<typeof createRoute>[0]['body'], 'name'>, apps: TestApp[] = [t]): Promise<RouteDto> {
  const res = await createRoute({ client: t.client, path: { workspaceId: tenant.workspaceId }, body: { name: 'route', ...body } });
  expect(res.response.status).toBe(201);
  for (const app of apps) await app.nexus.gateway.refreshRoutes();
  return res.data!;
}

const sdkFor = (route: RouteDto) =>
  new OpenAI({ baseURL: route.gatewayBaseUrl + '/v1', apiKey: tenant.apiKey, fetch: gatewayFetch(), maxRetries: 0 });

const chat = (route: RouteDto, stream = false) =>
  sdkFor(route)
    .chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 50,
      ...(stream ? { stream: true } : {}),
    } as never)
    .withResponse();

const invocationOf = (requestId: string) => invocationByRequestId(t, tenant.workspaceId, requestId);

const metrics = async () => parseMetrics(await (await fetch(`${t.url}/metrics`)).text());

describe('a failing target costs the user nothing while another is healthy', () => {
  const cases: [string, () => Promise<{ id: string; stream: boolean; target?: object }>, string][] = [
    ['a refused connection', async () => ({ id: await connectionTo(await refusedUrl()), stream: false }), 'upstream_unavailable'],
    [
      'a timeout before the headers',
      async () => ({ id: (await faultyTarget('hang')).id, stream: false, target: { timeoutMs: 300 } }),
      'upstream_timeout',
    ],
    ['a 500', async () => ({ id: (await faultyTarget('status-500')).id, stream: false }), 'upstream_status'],
    ['a 429 with Retry-After', async () => ({ id: (await faultyTarget('status-429')).id, stream: false }), 'upstream_status'],
    [
      'a slow first token',
      async () => ({ id: (await faultyTarget('slow-first-token')).id, stream: true, target: { firstTokenTimeoutMs: 200 } }),
      'first_token_timeout',
    ],
  ];
  it.each(cases)('%s', async (_label, make, errorCode) => {
    const bad = await make();
    const route = await routeOf({
      targets: [{ providerConnectionId: bad.id, ...bad.target }, { providerConnectionId: tenant.connectionId }],
    });
    const before = await periodOf(t, tenant.accessId);
    const { data, response } = await chat(route, bad.stream);
    let text = '';
    if (bad.stream) {
      for await (const c of data as unknown as AsyncIterable<{ choices: { delta?: { content?: string } }[] }>)
        text += c.choices[0]?.delta?.content ?? '';
    } else {
      text = (data as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(response.status).toBe(200);
    expect(response.headers.get('x-nexus-attempts')).toBe('2');
    expect(response.headers.get('x-nexus-served-by')).toBe(tenant.connectionId);

    const inv = await invocationOf(response.headers.get('x-nexus-request-id')!);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', routeId: route.id, providerConnectionId: tenant.connectionId });
    expect(inv.attempts).toHaveLength(2);
    expect(inv.attempts![0]).toMatchObject({ sequence: 1, providerConnectionId: bad.id, upstreamModel: 'gpt-test', errorCode });
    expect(inv.attempts![1]).toMatchObject({ sequence: 2, providerConnectionId: tenant.connectionId, status: 'SUCCEEDED' });
    // Charged once, for the attempt that answered (the fake's usage: 10 in, 5 out; output at 2x).
    expect(inv.usageEvents).toHaveLength(1);
    expect(inv.quotaUnits).toBe('20');
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed - before.consumed).toBe(20n);
    expect(after.reserved).toBe(0n);
    // /metrics counts each attempt by target and outcome, and the move to the next target.
    const samples = parseMetrics(await (await fetch(`${t.url}/metrics`)).text());
    expect(sumOf(samples, 'nexus_route_attempts_total', { route: route.id, connection: bad.id, outcome: errorCode })).toBe(1);
    expect(sumOf(samples, 'nexus_route_attempts_total', { route: route.id, connection: tenant.connectionId, outcome: 'answered' })).toBe(1);
    expect(sumOf(samples, 'nexus_route_fallbacks_total', { route: route.id })).toBe(1);
  });
});

describe('what is not moved on', () => {
  it("a caller's 400 goes back as it is, after one attempt", async () => {
    const bad = await faultyTarget('status-400');
    const route = await routeOf({ targets: [{ providerConnectionId: bad.id }, { providerConnectionId: tenant.connectionId }] });
    const calls = good.requests.length;
    const err = await chat(route).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get('x-nexus-attempts')).toBe('1');
    expect(good.requests.length).toBe(calls);
    expect(bad.up.calls).toBe(1);
  });

  it("on the last target, a Retry-After past retryAfterCapMs is not waited for: that answer is the call's", async () => {
    const limited = await faultyTarget('status-429');
    limited.up.retryAfter = '60';
    const route = await routeOf({ targets: [{ providerConnectionId: limited.id, attempts: 3 }], retry: { retryAfterCapMs: 1000 } });
    const err = await chat(route).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    const headers = (err as InstanceType<typeof OpenAI.APIError>).headers!;
    expect(headers.get('retry-after')).toBe('60');
    expect(headers.get('x-nexus-attempts')).toBe('1');
    expect(limited.up.calls).toBe(1);
  });

  it('a stream cut after its first bytes is not retried, and is recorded and charged by the rule for cut calls', async () => {
    const cut = await faultyTarget('cut-stream');
    const route = await routeOf({ targets: [{ providerConnectionId: cut.id }, { providerConnectionId: tenant.connectionId }] });
    const calls = good.requests.length;
    const before = await periodOf(t, tenant.accessId);
    const { data, response } = await chat(route, true);
    expect(response.status).toBe(200);
    let text = '';
    const read = async () => {
      for await (const c of data as unknown as AsyncIterable<{ choices: { delta?: { content?: string } }[] }>)
        text += c.choices[0]?.delta?.content ?? '';
    };
    await expect(read()).rejects.toThrow();
    expect(text).toBe('alpha');
    expect(good.requests.length).toBe(calls);
    expect(cut.up.calls).toBe(1);
    const inv = await invocationOf(response.headers.get('x-nexus-request-id')!);
    expect(inv).toMatchObject({ status: 'FAILED', providerConnectionId: cut.id });
    expect(inv.attempt).toMatchObject({ status: 'FAILED', errorCode: 'upstream_stream_broken' });
    expect(inv.attempts).toHaveLength(1);
    // No usage reported: the input bound and one output token per event seen that carried output (docs/reliability.md).
    expect(inv.usageEvents).toHaveLength(1);
    expect(inv.usageEvents![0]!.outputTokens).toBe('1');
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed - before.consumed).toBe(BigInt(inv.quotaUnits));
    expect(after.reserved).toBe(0n);
  });
});

describe('the circuit breaker', () => {
  it('opens after N failures in a row, and a second process skips the target within a second', async () => {
    const other = await t.withEnv({});
    try {
      const bad = await faultyTarget('status-500');
      const route = await routeOf(
        {
          targets: [{ providerConnectionId: bad.id }, { providerConnectionId: tenant.connectionId }],
          breaker: { consecutiveFailures: 2, cooldownMs: 60_000 },
        },
        [t, other],
      );
      for (let i = 0; i < 2; i++) expect((await chat(route)).response.status).toBe(200);
      const openedAt = Date.now();
      expect(bad.up.calls).toBe(2);
      // This process skips it at once.
      const here = await chat(route);
      expect(here.response.headers.get('x-nexus-attempts')).toBe('1');
      expect(bad.up.calls).toBe(2);
      // The other process, on the same database, within a second.
      const elsewhere = new OpenAI({
        baseURL: `${other.url}/providers/${route.id}/v1`,
        apiKey: tenant.apiKey,
        fetch: gatewayFetch(),
        maxRetries: 0,
      });
      let skipped = false;
      while (!skipped && Date.now() - openedAt < 1000) {
        const callsBefore = bad.up.calls;
        const { response } = await elsewhere.chat.completions
          .create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 })
          .withResponse();
        expect(response.status).toBe(200);
        skipped = bad.up.calls === callsBefore;
        if (!skipped) await new Promise((r) => setTimeout(r, 50));
      }
      expect(skipped).toBe(true);
      expect(Date.now() - openedAt).toBeLessThan(1000);

      const health = await getRouteHealth({ client: t.client, path: { routeId: route.id } });
      const target = health.data!.targets.find((x) => x.providerConnectionId === bad.id)!;
      expect(target).toMatchObject({ breakerState: 'open', lastError: 'upstream_status' });
      expect(target.errorsLastMinute).toBeGreaterThanOrEqual(2);
      expect(target.retryAt).toBeTruthy();
      const healthy = health.data!.targets.find((x) => x.providerConnectionId === tenant.connectionId)!;
      expect(healthy).toMatchObject({ breakerState: 'closed', errorsLastMinute: 0 });
      expect(healthy.callsLastMinute).toBeGreaterThanOrEqual(3);
      expect(healthy.p50LatencyMs).toBeGreaterThanOrEqual(0);
    } finally {
      await other.close();
    }
  });

  it('a route whose targets are all open answers 503 no_healthy_target with Retry-After', async () => {
    const bad = await faultyTarget('status-500');
    const route = await routeOf({
      targets: [{ providerConnectionId: bad.id }],
      breaker: { consecutiveFailures: 1, cooldownMs: 30_000 },
      tryWhenAllOpen: false,
    });
    // The last attempt's answer is relayed as it is.
    await expect(chat(route)).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    const res = await gatewayFetch()(`${route.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 }),
    });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('no_healthy_target');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(bad.up.calls).toBe(1);
  });

  it('after its cooldown, one real call probes the target and closes the breaker; each change is one event', async () => {
    const endpoint = await createWebhookEndpoint({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { url: 'http://127.0.0.1:9/hooks', eventTypes: ['provider_connection.unhealthy', 'provider_connection.recovered'] },
    });
    expect(endpoint.response.status).toBe(201);
    const flaky = await faultyTarget('status-500');
    const route = await routeOf({
      targets: [{ providerConnectionId: flaky.id }, { providerConnectionId: tenant.connectionId }],
      breaker: { consecutiveFailures: 1, cooldownMs: 300 },
    });
    expect((await chat(route)).response.headers.get('x-nexus-attempts')).toBe('2');
    expect((await chat(route)).response.headers.get('x-nexus-attempts')).toBe('1');
    flaky.up.mode = 'ok';
    await new Promise((r) => setTimeout(r, 350));
    const probe = await chat(route);
    expect(probe.response.headers.get('x-nexus-served-by')).toBe(flaky.id);
    // The closing is written once the probe has answered (the write that makes the transition): health sees it then.
    await until(async () => {
      const health = await getRouteHealth({ client: t.client, path: { routeId: route.id } });
      return health.data!.targets[0]!.breakerState === 'closed';
    }, 2000);

    // The breaker's opening and closing, each once, as events for the application (docs/events.md).
    let events: { type: string; data: unknown }[] = [];
    await until(async () => {
      const messages = await listWebhookMessages({
        client: t.client,
        path: { webhookEndpointId: endpoint.data!.id },
        query: { limit: 100 },
      });
      events = messages
        .data!.map((m) => m.payload)
        .filter((e) => (e.data as { providerConnectionId?: string }).providerConnectionId === flaky.id);
      return events.length >= 2;
    }, 3000);
    expect(events.map((e) => e.type).sort()).toEqual(['provider_connection.recovered', 'provider_connection.unhealthy']);
    for (const e of events) expect(e.data).toMatchObject({ source: 'breaker', routeId: route.id });
  });
});

describe('the circuit breaker on its error rate', () => {
  /**
   * A route over a flaky target and the healthy one: calls made one at a time, the flaky target answering by
   * `outcomes` ('ok' or 'status-500'). Each call must reach the flaky target (its breaker closed); then one more call
   * must skip it (its breaker open), served by the healthy target.
   */
  async function opensAfter(breaker: object, outcomes: ('ok' | 'status-500')[]) {
    const flaky = await faultyTarget('ok');
    const route = await routeOf({
      targets: [{ providerConnectionId: flaky.id }, { providerConnectionId: tenant.connectionId }],
      breaker: { consecutiveFailures: 1000, windowMs: 600_000, cooldownMs: 600_000, ...breaker },
    });
    const state = async () => (await getRouteHealth({ client: t.client, path: { routeId: route.id } })).data!.targets[0]!.breakerState;
    flaky.up.script = [...outcomes];
    for (let i = 0; i < outcomes.length; i++) {
      const { response } = await chat(route);
      expect(response.status).toBe(200);
      expect(flaky.up.calls, `call ${i + 1} reached the flaky target: its breaker was closed`).toBe(i + 1);
      expect(response.headers.get('x-nexus-served-by')).toBe(outcomes[i] === 'ok' ? flaky.id : tenant.connectionId);
      if (i < outcomes.length - 1) expect(await state(), `after call ${i + 1}`).toBe('closed');
    }
    // The last failure reached the threshold: the next call skips the target, and the breaker shows open.
    const { response } = await chat(route);
    expect(response.headers.get('x-nexus-attempts')).toBe('1');
    expect(response.headers.get('x-nexus-served-by')).toBe(tenant.connectionId);
    expect(flaky.up.calls).toBe(outcomes.length);
    await until(async () => (await state()) === 'open', 3000);
    return { flaky, route };
  }

  it('opens when the failed share of the window reaches errorRatePercent, not below it', async () => {
    // 10 attempts at least, 50%: 6 answered, then 4 failed (40%), 5 (45%): still closed; 6 of 12 (50%) opens it.
    // Never more than 6 failures in a row, far from consecutiveFailures (1000).
    const ok = Array<'ok'>(6).fill('ok');
    const failed = Array<'status-500'>(6).fill('status-500');
    const { flaky, route } = await opensAfter({ errorRatePercent: 50, minimumCalls: 10 }, [...ok, ...failed]);
    // /metrics: the breaker this process opened is 2.
    await until(async () => sumOf(await metrics(), 'nexus_route_breaker_state', { route: route.id, connection: flaky.id }) === 2, 3000);
  });

  it('opens only once minimumCalls attempts were made, however high the failed share before', async () => {
    // Two failures of three from the first attempt (67%, above the 50% asked), but 9 attempts of the 10 asked:
    // closed; the 10th attempt, failed (7 of 10), opens it. Never more than 2 failures in a row.
    const outcomes: ('ok' | 'status-500')[] = [];
    for (let i = 0; i < 3; i++) outcomes.push('status-500', 'status-500', 'ok');
    outcomes.push('status-500');
    await opensAfter({ errorRatePercent: 50, minimumCalls: 10 }, outcomes);
  });
});

describe('route metrics', () => {
  it('nexus_route_breaker_state follows the breaker: 2 open, 1 half-open while its probe runs, 2 when the probe fails, 0 closed', async () => {
    const flaky = await faultyTarget('status-500');
    const route = await routeOf({
      targets: [{ providerConnectionId: flaky.id, timeoutMs: 1500 }, { providerConnectionId: tenant.connectionId }],
      breaker: { consecutiveFailures: 1, cooldownMs: 300 },
    });
    const gauge = async () => {
      const samples = await metrics();
      const labels = { route: route.id, connection: flaky.id };
      return has(samples, 'nexus_route_breaker_state', labels) ? sumOf(samples, 'nexus_route_breaker_state', labels) : undefined;
    };
    expect(await gauge()).toBeUndefined();
    expect((await chat(route)).response.headers.get('x-nexus-attempts')).toBe('2');
    await until(async () => (await gauge()) === 2, 3000);

    // After the cooldown, the next call is the probe: it hangs until the target's timeout, the gauge 1 meanwhile.
    flaky.up.mode = 'hang';
    await new Promise((r) => setTimeout(r, 350));
    const probe = chat(route);
    await until(async () => (await gauge()) === 1, 1500);
    const probed = await probe;
    expect(probed.response.headers.get('x-nexus-attempts')).toBe('2');
    expect(probed.response.headers.get('x-nexus-served-by')).toBe(tenant.connectionId);
    await until(async () => (await gauge()) === 2, 3000);

    // The next probe answers: closed.
    flaky.up.mode = 'ok';
    await new Promise((r) => setTimeout(r, 350));
    expect((await chat(route)).response.headers.get('x-nexus-served-by')).toBe(flaky.id);
    await until(async () => (await gauge()) === 0, 3000);
  });

  it("nexus_route_retry_wait_seconds_total counts a retry's backoff", async () => {
    const flaky = await faultyTarget('ok');
    flaky.up.script = ['status-500'];
    const route = await routeOf({
      targets: [{ providerConnectionId: flaky.id, attempts: 2 }, { providerConnectionId: tenant.connectionId }],
      retry: { baseDelayMs: 400, maxDelayMs: 400 },
    });
    const started = Date.now();
    const { response } = await chat(route);
    const took = Date.now() - started;
    // Retried on the same target, which answered the second time.
    expect(response.headers.get('x-nexus-attempts')).toBe('2');
    expect(response.headers.get('x-nexus-served-by')).toBe(flaky.id);
    expect(flaky.up.calls).toBe(2);
    // The wait is 400 ms with jitter 0.8-1.2 (docs/routes.md), within the call's time.
    const waited = sumOf(await metrics(), 'nexus_route_retry_wait_seconds_total', { route: route.id });
    expect(waited).toBeGreaterThanOrEqual(0.32);
    expect(waited).toBeLessThanOrEqual(0.48);
    expect(waited * 1000).toBeLessThanOrEqual(took);
    expect(
      sumOf(await metrics(), 'nexus_route_attempts_total', { route: route.id, connection: flaky.id, outcome: 'upstream_status' }),
    ).toBe(1);
  });
});

describe('an azure-openai target', () => {
  it.each([false, true])(
    'takes over from a failing openai target: its deployment sent as the model, its key as api-key, the usage metered exactly (stream: %s)',
    async (stream) => {
      const azureKey = testProviderKey('routes-azure');
      const azure = await startAzureOpenAiUpstream({ apiKey: azureKey });
      try {
        const created = await createProviderConnection({
          client: t.client,
          path: { workspaceId: tenant.workspaceId },
          body: { name: 'azure', protocolProfile: 'azure-openai', baseUrl: azure.url, apiKey: azureKey },
        });
        expect(created.response.status).toBe(201);
        const azureId = created.data!.id;
        const failing = await faultyTarget('status-503');
        const route = await routeOf({
          targets: [{ providerConnectionId: failing.id }, { providerConnectionId: azureId, modelMap: { 'gpt-test': 'prod-gpt' } }],
        });
        // The calls of the tests before are recorded first: their charges land before `before` is read.
        await t.nexus.gateway.drain();
        const before = await periodOf(t, tenant.accessId);
        const { data, response } = await sdkFor(route)
          .chat.completions.create(
            {
              model: 'gpt-test',
              messages: [{ role: 'user', content: 'hi' }],
              max_tokens: 50,
              ...(stream ? { stream: true } : {}),
            } as never,
            { headers: { 'x-fake-usage': '13,7,0' } },
          )
          .withResponse();
        if (stream) {
          let chunks = 0;
          for await (const _ of data as unknown as AsyncIterable<unknown>) chunks++;
          expect(chunks).toBeGreaterThan(0);
        } else {
          expect((data as { choices: unknown[] }).choices.length).toBeGreaterThan(0);
        }
        expect(response.status).toBe(200);
        expect(response.headers.get('x-nexus-attempts')).toBe('2');
        expect(response.headers.get('x-nexus-served-by')).toBe(azureId);
        expect(failing.up.calls).toBe(1);

        // The Azure upstream saw its v1 path, the deployment as the model, its own key as api-key and no Bearer.
        expect(azure.requests).toHaveLength(1);
        const seen = azure.requests[0]!;
        expect(seen.url).toBe('/openai/v1/chat/completions');
        expect(JSON.parse(seen.body)).toMatchObject({ model: 'prod-gpt' });
        expect(seen.headers['api-key']).toBe(azureKey);
        expect(seen.headers.authorization).toBeUndefined();

        const inv = await invocationOf(response.headers.get('x-nexus-request-id')!);
        expect(inv).toMatchObject({ status: 'SUCCEEDED', routeId: route.id, providerConnectionId: azureId, requestedModel: 'gpt-test' });
        expect(inv.attempts).toHaveLength(2);
        expect(inv.attempts![0]).toMatchObject({ providerConnectionId: failing.id, httpStatus: 503, errorCode: 'upstream_status' });
        expect(inv.attempts![1]).toMatchObject({ providerConnectionId: azureId, status: 'SUCCEEDED' });
        // The model the answer named: the deployment's (the fake dates it, as Azure does).
        expect(inv.attempts![1]!.upstreamModel).toMatch(/^prod-gpt/);
        // Exactly the usage Azure reported: 13 in, 7 out (output at 2x), charged once.
        expect(inv.usageEvents).toHaveLength(1);
        expect(inv.usageEvents![0]).toMatchObject({ inputTokens: '13', outputTokens: '7' });
        expect(inv.quotaUnits).toBe('27');
        const after = await periodOf(t, tenant.accessId);
        expect(after.consumed - before.consumed).toBe(27n);
        expect(after.reserved).toBe(0n);
      } finally {
        await azure.close();
      }
    },
  );
});

describe('two processes, one breaker', () => {
  /** The breaker events of a connection, straight from the events table. */
  async function breakerEvents(connectionId: string): Promise<string[]> {
    const rows: { type: string }[] = await t.database
      .db('events')
      .where({ workspace_id: tenant.workspaceId })
      .whereRaw("data->>'providerConnectionId' = ?", [connectionId])
      .orderBy('created_at');
    return rows.map((r) => r.type);
  }

  it('an opening and a closing made by both at once are each announced once', async () => {
    const other = await t.withEnv({});
    try {
      const bad = await faultyTarget('status-500');
      // One target, opened by one failure; with tryWhenAllOpen, an open target is still called, so both can close it.
      const route = await routeOf(
        { targets: [{ providerConnectionId: bad.id }], breaker: { consecutiveFailures: 1, cooldownMs: 60_000 } },
        [t, other],
      );
      const sdks = [t, other].map(
        (app) =>
          new OpenAI({ baseURL: `${app.url}/providers/${route.id}/v1`, apiKey: tenant.apiKey, fetch: gatewayFetch(), maxRetries: 0 }),
      );
      const both = () =>
        Promise.allSettled(
          sdks.map((sdk) =>
            sdk.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 }).withResponse(),
          ),
        );
      // Each process fails the target with its breaker closed: each opens it.
      const failed = await both();
      expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
      expect(bad.up.calls).toBe(2);
      await until(async () => (await breakerEvents(bad.id)).length > 0, 3000);
      await new Promise((r) => setTimeout(r, 300));
      expect(await breakerEvents(bad.id)).toEqual(['provider_connection.unhealthy']);

      // Each process calls the open target (all open, tryWhenAllOpen) and it answers: each closes it.
      bad.up.mode = 'ok';
      const answered = await both();
      expect(answered.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
      expect(bad.up.calls).toBe(4);
      await until(async () => (await breakerEvents(bad.id)).length > 1, 3000);
      await new Promise((r) => setTimeout(r, 300));
      expect(await breakerEvents(bad.id)).toEqual(['provider_connection.unhealthy', 'provider_connection.recovered']);
      const health = await getRouteHealth({ client: t.client, path: { routeId: route.id } });
      expect(health.data!.targets[0]).toMatchObject({ breakerState: 'closed' });
    } finally {
      await other.close();
    }
  });
});

describe('targets', () => {
  it('a route this process has not heard of yet (its change still on its way) is served at once, read from the database', async () => {
    const heard = await routeOf({ targets: [{ providerConnectionId: tenant.connectionId }] });
    // A copy written straight to the table: no change is announced, so only the call's own read can find it.
    const id = randomUUID();
    await t.database.db.raw(
      `insert into routes select (json_populate_record(null::routes, (to_jsonb(r) || jsonb_build_object('id', ?::text, 'name', 'unheard'))::json)).* from routes r where id = ?`,
      [id, heard.id],
    );
    const unheard = { ...heard, id, gatewayBaseUrl: heard.gatewayBaseUrl.replace(heard.id, id) };
    const { response } = await chat(unheard);
    expect(response.status).toBe(200);
    expect(await invocationOf(response.headers.get('x-nexus-request-id')!)).toMatchObject({ status: 'SUCCEEDED', routeId: id });
  });

  it('a route changed here applies to the next call: its old form is forgotten as the change commits, not when it is read again', async () => {
    const target = await faultyTarget('ok');
    const route = await routeOf({ targets: [{ providerConnectionId: target.id, modelMap: { 'gpt-test': 'model-0' } }] });
    for (let i = 1; i <= 20; i++) {
      const changed = await updateRoute({
        client: t.client,
        path: { routeId: route.id },
        body: { targets: [{ providerConnectionId: target.id, modelMap: { 'gpt-test': `model-${i}` } }] },
      });
      expect(changed.response.status).toBe(200);
      const { response } = await chat(route);
      expect(response.status).toBe(200);
      expect(target.up.models.at(-1)).toBe(`model-${i}`);
    }
  });

  it('a model map sends the target its model; the invocation keeps the model asked for', async () => {
    const mapped = await faultyTarget('ok');
    const route = await routeOf({ targets: [{ providerConnectionId: mapped.id, modelMap: { 'gpt-test': 'gpt-4o-mini' } }] });
    const { response } = await chat(route);
    expect(mapped.up.models).toEqual(['gpt-4o-mini']);
    const inv = await invocationOf(response.headers.get('x-nexus-request-id')!);
    expect(inv.requestedModel).toBe('gpt-test');
  });

  it('loadbalance 3:1 serves three calls in four from the first target, over 4,000 calls through HTTP', async () => {
    const [heavy, light] = [await faultyTarget('ok'), await faultyTarget('ok')];
    const route = await routeOf({
      strategy: 'loadbalance',
      targets: [
        { providerConnectionId: heavy.id, weight: 3 },
        { providerConnectionId: light.id, weight: 1 },
      ],
    });
    const n = 4000;
    const body = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 });
    const served = new Map<string, number>();
    let next = 0;
    // 16 calls at a time over kept-alive connections (fetch's pool): a few seconds, not a minute.
    const caller = async () => {
      while (next < n) {
        next++;
        const res = await fetch(`${route.gatewayBaseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
          body,
        });
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        expect(res.headers.get('x-nexus-attempts')).toBe('1');
        const by = res.headers.get('x-nexus-served-by')!;
        served.set(by, (served.get(by) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: 16 }, caller));
    const first = served.get(heavy.id) ?? 0;
    expect(first + (served.get(light.id) ?? 0)).toBe(n);
    // The first target's share is binomial(4000, 0.75): its standard deviation is sqrt(0.75 * 0.25 / 4000) = 0.0068,
    // so 10% of the share (0.075) is 11 standard deviations: a correct draw never fails this.
    expect(first / n).toBeGreaterThan(0.75 * 0.9);
    expect(first / n).toBeLessThan(0.75 * 1.1);
    // Each answer came from the target its header names: the upstreams' own counts.
    expect(heavy.up.calls).toBe(first);
    expect(light.up.calls).toBe(n - first);
  }, 120_000);
});

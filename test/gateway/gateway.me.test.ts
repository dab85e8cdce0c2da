/**
 * GET {gatewayBaseUrl}/v1/me: the end user's view of its access where its SDK is pointed, on an openai and
 * an anthropic connection, as well as at the root; and the words of the 409 for an endpoint Nexus does not meter.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicUpstream, startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { suspendWorkspaceAccess } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, type Tenant } from './gateway-support.js';

const KEY = testProviderKey('me');
let t: TestApp;
let openaiUp: FakeUpstream;
let anthropicUp: FakeUpstream;
let oa: Tenant;
let an: Tenant;

beforeAll(async () => {
  t = await startTestApp();
  openaiUp = await startOpenAiUpstream({ apiKey: KEY });
  anthropicUp = await startAnthropicUpstream({ apiKey: KEY });
  oa = await createTenant(t, { baseUrl: openaiUp.url, providerKey: KEY });
  an = await createTenant(t, { baseUrl: anthropicUp.url, providerKey: KEY, profile: 'anthropic' });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await openaiUp?.close();
  await anthropicUp?.close();
});

const upstreamCalls = () => openaiUp.requests.length + anthropicUp.requests.length;

async function me(url: string, headers: Record<string, string>) {
  const res = await gatewayFetch()(url, { headers });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> };
}

describe('GET {gatewayBaseUrl}/v1/me', () => {
  it("answers the key's access under an openai connection, through the official SDK pointed at gatewayBaseUrl + '/v1'", async () => {
    const before = upstreamCalls();
    const client = new OpenAI({ baseURL: oa.gatewayBaseUrl + '/v1', apiKey: oa.apiKey, fetch: gatewayFetch(), maxRetries: 0 });
    const answer = (await client.get('/me')) as Record<string, any>;
    expect(answer).toMatchObject({ accessId: oa.accessId, workspaceId: oa.workspaceId, status: 'ACTIVE', key: { id: oa.apiKeyId } });
    expect(BigInt(answer.quotaPeriod.grantedUnits)).toBe(1_000_000n);
    // The same answer as at the root.
    const root = await me(`${t.url}/v1/me`, { authorization: `Bearer ${oa.apiKey}` });
    expect(root.status).toBe(200);
    expect(answer).toEqual(root.body);
    expect(upstreamCalls()).toBe(before);
  });

  it('answers under an anthropic connection (its SDK is pointed at gatewayBaseUrl), with x-api-key, query string and all', async () => {
    const before = upstreamCalls();
    const res = await me(`${an.gatewayBaseUrl}/v1/me?x=1`, { 'x-api-key': an.apiKey });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toMatchObject({ accessId: an.accessId, workspaceId: an.workspaceId, status: 'ACTIVE' });
    expect(upstreamCalls()).toBe(before);
  });

  it('still answers for a suspended access, so its user can see why calls are refused', async () => {
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: KEY });
    expect((await suspendWorkspaceAccess({ client: t.client, path: { accessId: tenant.accessId } })).response.status).toBe(200);
    const res = await me(`${tenant.gatewayBaseUrl}/v1/me`, { authorization: `Bearer ${tenant.apiKey}` });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('SUSPENDED');
  });

  it('refuses a connection of another workspace or none (404), a wrong or missing key (401), and answers GET only', async () => {
    const before = upstreamCalls();
    const otherWorkspace = await me(`${an.gatewayBaseUrl}/v1/me`, { authorization: `Bearer ${oa.apiKey}` });
    expect(otherWorkspace.status).toBe(404);
    expect(otherWorkspace.body.error).toMatchObject({ code: 'provider_connection_not_found', param: 'providerConnectionId' });
    expect(JSON.stringify(otherWorkspace.body)).not.toContain(oa.accessId);
    const unknown = await me(`${t.url}/providers/5f0c7d2e-1111-4a4a-9b9b-0123456789ab/v1/me`, { authorization: `Bearer ${oa.apiKey}` });
    expect(unknown.status).toBe(404);
    const wrongKey = await me(`${oa.gatewayBaseUrl}/v1/me`, { authorization: 'Bearer nx-test-not-a-key-0123456789' });
    expect(wrongKey.status).toBe(401);
    expect(wrongKey.body.error.code).toBe('invalid_inference_key');
    const noKey = await me(`${oa.gatewayBaseUrl}/v1/me`, {});
    expect(noKey.status).toBe(401);
    // Another method there is a gateway call like any other: not metered, so refused (this workspace allows no passthrough).
    const post = await gatewayFetch()(`${oa.gatewayBaseUrl}/v1/me`, {
      method: 'POST',
      headers: { authorization: `Bearer ${oa.apiKey}` },
      body: '{}',
    });
    expect(post.status).toBe(409);
    expect(upstreamCalls()).toBe(before);
  });
});

describe('409 for an endpoint Nexus does not meter', () => {
  it.each([
    ['openai', () => oa, 'POST', 'v1/files'],
    ['anthropic', () => an, 'GET', 'v1/files'],
  ] as const)(
    'says in words what is not metered on an %s connection, its class, and what letting it through opens',
    async (profile, tenant, method, path) => {
      const before = upstreamCalls();
      const res = await gatewayFetch()(`${tenant().gatewayBaseUrl}/${path}`, {
        method,
        headers: { authorization: `Bearer ${tenant().apiKey}`, 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: '{}' } : {}),
      });
      expect(res.status).toBe(409);
      const body = (await res.json()) as { error: { code: string; message: string; passthrough_class: string } };
      expect(body.error.code).toBe('unmetered_endpoint');
      expect(body.error.passthrough_class).toBe('files');
      expect(body.error.message).toBe(
        `${method} ${path} is not metered on an '${profile}' connection: its passthrough class 'files' is not let through. ` +
          'Letting it through (passthroughClasses of the workspace or the plan) opens files stored at the provider: uploaded, ' +
          'listed, downloaded and deleted, uncharged to quota (rate limits, the budget and a per-call price still apply), on the ' +
          'provider account every end user of the workspace shares',
      );
      expect(upstreamCalls()).toBe(before);
    },
  );
});

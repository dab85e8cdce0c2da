/**
 * What the Admin API's changes to a connection mean on the data plane: the next
 * gateway call after a rotation uses the new key, SUSPENDED stops traffic (403),
 * ARCHIVED makes the connection disappear (404) while it stays readable here.
 * The auth cache is off (TTL 0) so "the next call" is exactly that.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveProviderConnection, getProviderConnection, rotateProviderSecret, updateProviderConnection } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch } from '../gateway/gateway-support.js';
import { SECRET_MARKER, startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';

let t: TestApp;
let openaiUp: FakeUpstream;
let anthropicUp: FakeUpstream;
const callGateway = gatewayFetch();

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_AUTH_CACHE_TTL_MS: '0' } });
  openaiUp = await startFakeUpstream('openai', []);
  anthropicUp = await startFakeUpstream('anthropic', []);
});
afterAll(async () => {
  await openaiUp?.close();
  await anthropicUp?.close();
  await t?.close();
});

async function listModels(gatewayBaseUrl: string, inferenceKey: string, headers: Record<string, string> = {}) {
  const res = await callGateway(`${gatewayBaseUrl}/v1/models`, { headers: { authorization: `Bearer ${inferenceKey}`, ...headers } });
  const text = await res.text();
  expect(text).not.toContain(SECRET_MARKER);
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

describe('provider connection changes on the data plane', () => {
  it('rotation: the next gateway call carries the new key', async () => {
    const oldKey = testProviderKey('dp-old');
    const newKey = testProviderKey('dp-new');
    openaiUp.keys.add(oldKey);
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: oldKey, allowUnmeteredPassthrough: true });

    expect((await listModels(tenant.gatewayBaseUrl, tenant.apiKey)).status).toBe(200);
    expect(openaiUp.requests.at(-1)!.headers.authorization).toBe(`Bearer ${oldKey}`);

    // The provider issues a new key and revokes the old one; the connection is rotated.
    openaiUp.keys.add(newKey);
    openaiUp.keys.delete(oldKey);
    const rotated = await rotateProviderSecret({
      client: t.client,
      path: { providerConnectionId: tenant.connectionId },
      body: { apiKey: newKey },
    });
    expect(rotated.response.status).toBe(200);

    const next = await listModels(tenant.gatewayBaseUrl, tenant.apiKey);
    expect(next.status).toBe(200);
    expect(next.body.data[0].id).toBe('fake-model');
    expect(openaiUp.requests.at(-1)!.headers.authorization).toBe(`Bearer ${newKey}`);
    // The inference key never reaches the upstream.
    expect(JSON.stringify(openaiUp.requests.at(-1)!.headers)).not.toContain(tenant.apiKey);
  });

  it('an anthropic connection sends its key as x-api-key, rotated too', async () => {
    const oldKey = testProviderKey('dp-ant-old');
    const newKey = testProviderKey('dp-ant-new');
    anthropicUp.keys.add(oldKey);
    const tenant = await createTenant(t, {
      profile: 'anthropic',
      baseUrl: anthropicUp.url,
      providerKey: oldKey,
      allowUnmeteredPassthrough: true,
    });
    const version = { 'anthropic-version': '2023-06-01' };
    expect((await listModels(tenant.gatewayBaseUrl, tenant.apiKey, version)).status).toBe(200);
    expect(anthropicUp.requests.at(-1)!.headers['x-api-key']).toBe(oldKey);

    anthropicUp.keys.add(newKey);
    anthropicUp.keys.delete(oldKey);
    await rotateProviderSecret({ client: t.client, path: { providerConnectionId: tenant.connectionId }, body: { apiKey: newKey } });
    expect((await listModels(tenant.gatewayBaseUrl, tenant.apiKey, version)).status).toBe(200);
    expect(anthropicUp.requests.at(-1)!.headers['x-api-key']).toBe(newKey);
  });

  it('SUSPENDED answers 403 until ACTIVE again; ARCHIVED answers 404 and stays readable', async () => {
    const key = testProviderKey('dp-status');
    openaiUp.keys.add(key);
    const tenant = await createTenant(t, { baseUrl: openaiUp.url, providerKey: key, allowUnmeteredPassthrough: true });
    const path = { providerConnectionId: tenant.connectionId };

    await updateProviderConnection({ client: t.client, path, body: { status: 'SUSPENDED' } });
    const seen = openaiUp.requests.length;
    const suspended = await listModels(tenant.gatewayBaseUrl, tenant.apiKey);
    expect(suspended.status).toBe(403);
    expect(suspended.body.error.code).toBe('connection_suspended');
    expect(openaiUp.requests.length).toBe(seen);

    await updateProviderConnection({ client: t.client, path, body: { status: 'ACTIVE' } });
    expect((await listModels(tenant.gatewayBaseUrl, tenant.apiKey)).status).toBe(200);

    expect((await archiveProviderConnection({ client: t.client, path })).response.status).toBe(204);
    const archived = await listModels(tenant.gatewayBaseUrl, tenant.apiKey);
    expect(archived.status).toBe(404);
    expect(archived.body.error.type).toBe('not_found_error');
    const readable = await getProviderConnection({ client: t.client, path });
    expect(readable.data).toMatchObject({ status: 'ARCHIVED', id: tenant.connectionId });
  });
});

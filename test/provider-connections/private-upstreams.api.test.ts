/**
 * A deployment without NEXUS_ALLOW_PRIVATE_UPSTREAMS: provider base URLs that
 * resolve to loopback, private, link-local or metadata addresses are refused
 * on create, test and update, and a connection saved earlier under a looser
 * setting is not called either.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createProviderConnection,
  createWorkspace,
  testProviderConnection,
  updateProviderConnection,
  verifyProviderConnection,
} from '../support/sdk.js';
import { newId } from '../../src/ids.js';
import { sealProviderApiKey } from '../../src/domain/provider-connections/provider-secret.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';

let t: TestApp;
let upstream: FakeUpstream;
let workspaceId: string;
const KEY = testProviderKey('private');

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'false' } });
  upstream = await startFakeUpstream('openai', [KEY]);
  const ws = await createWorkspace({ client: t.client, body: { name: 'private-upstreams' } });
  workspaceId = ws.data!.id;
});
afterAll(async () => {
  await upstream?.close();
  await t?.close();
});

function errorOf(res: { error?: unknown }) {
  return (res.error as { error: { code: string; param?: string | null } }).error;
}

describe('with NEXUS_ALLOW_PRIVATE_UPSTREAMS=false', () => {
  it('the config says so', () => {
    expect(t.config.allowPrivateUpstreams).toBe(false);
  });

  it.each([
    ['the running upstream on 127.0.0.1', () => upstream.url],
    ['localhost', () => upstream.url.replace('127.0.0.1', 'localhost')],
    ['IPv6 loopback', () => 'http://[::1]:9'],
    ['IPv4-mapped IPv6 loopback', () => 'http://[::ffff:127.0.0.1]:9'],
    ['the metadata address', () => 'http://169.254.169.254'],
    ['0.0.0.0', () => 'http://0.0.0.0:9'],
    ['a private network', () => 'http://10.0.0.5:8000'],
    ['shared address space', () => 'http://100.64.0.1'],
    ['unique local IPv6', () => 'http://[fd00:ec2::254]'],
    ['a decimal loopback', () => 'http://2130706433:9'],
  ])('refuses %s on create, test and update, and calls nothing', async (_label, url) => {
    const seen = upstream.requests.length;
    const body = { name: 'private', protocolProfile: 'openai' as const, baseUrl: url(), apiKey: KEY };
    const created = await createProviderConnection({ client: t.client, path: { workspaceId }, body });
    expect(created.response.status).toBe(400);
    expect(errorOf(created)).toMatchObject({ code: 'private_upstream_refused', param: 'baseUrl' });
    const tested = await testProviderConnection({
      client: t.client,
      path: { workspaceId },
      body: { protocolProfile: 'openai', baseUrl: url(), apiKey: KEY },
    });
    expect(tested.response.status).toBe(400);
    expect(errorOf(tested).code).toBe('private_upstream_refused');
    expect(upstream.requests.length).toBe(seen);
  });

  it('accepts a public address (without calling it) and refuses moving it to a private one', async () => {
    const created = await createProviderConnection({
      client: t.client,
      path: { workspaceId },
      body: { name: 'public', protocolProfile: 'openai', baseUrl: 'https://8.8.8.8', apiKey: KEY },
    });
    expect(created.response.status).toBe(201);
    const moved = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: created.data!.id },
      body: { baseUrl: 'http://169.254.169.254' },
    });
    expect(moved.response.status).toBe(400);
    expect(errorOf(moved)).toMatchObject({ code: 'private_upstream_refused', param: 'baseUrl' });
  });

  it('does not call a private upstream saved earlier under another setting', async () => {
    // A literal address (checked before connecting) and a name (checked by the guarded lookup).
    for (const baseUrl of [upstream.url, upstream.url.replace('127.0.0.1', 'localhost')]) {
      const id = newId();
      const sealed = sealProviderApiKey(t.nexus.services.secretBox, id, KEY);
      const now = new Date();
      await t.hooks.providerConnectionRepo.insert({
        id,
        workspace_id: workspaceId,
        name: 'legacy',
        protocol_profile: 'openai',
        base_url: baseUrl,
        status: 'ACTIVE',
        api_key_ciphertext: sealed.ciphertext,
        api_key_key_id: sealed.keyId,
        secret_preview: 'sk-...',
        upstream_timeout_ms: null,
        retry: null,
        enforces_output_cap: true,
        metadata: {},
        last_verified_at: null,
        created_at: now,
        updated_at: now,
        archived_at: null,
      });
      const seen = upstream.requests.length;
      const res = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: id } });
      expect(res.response.status).toBe(200);
      expect(res.data).toMatchObject({ accepted: false, outcome: 'unreachable' });
      expect(res.data!.message).toMatch(/private/);
      expect(upstream.requests.length).toBe(seen);
    }
  });
});

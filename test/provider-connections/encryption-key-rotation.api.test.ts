/**
 * The key id beside each ciphertext lets the deployment rotate its encryption
 * key: after NEXUS_ENCRYPTION_KEY changes (the old one kept in
 * NEXUS_PREVIOUS_ENCRYPTION_KEYS), keys sealed under the old one still reach the
 * upstream, and rotating a provider key seals it under the new one.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkspace, getProviderConnection, rotateProviderSecret, verifyProviderConnection } from '../support/sdk.js';
import { openProviderApiKey, sealProviderApiKey } from '../../src/domain/provider-connections/provider-secret.js';
import { createSecretBox, keyIdOf } from '../../src/domain/security/secret-box.js';
import { newId } from '../../src/ids.js';
import { startTestApp, TEST_ENCRYPTION_KEY, type TestApp } from '../support/test-app.js';
import { startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';

const OLD_KEY = Buffer.from(TEST_ENCRYPTION_KEY, 'base64');
const NEW_KEY = randomBytes(32);
let t: TestApp;
let upstream: FakeUpstream;
const API_KEY = testProviderKey('enc-rotation');
const NEXT_API_KEY = testProviderKey('enc-rotation-next');

beforeAll(async () => {
  t = await startTestApp({
    env: { NEXUS_ENCRYPTION_KEY: NEW_KEY.toString('base64'), NEXUS_PREVIOUS_ENCRYPTION_KEYS: TEST_ENCRYPTION_KEY },
  });
  upstream = await startFakeUpstream('openai', [API_KEY, NEXT_API_KEY]);
});
afterAll(async () => {
  await upstream?.close();
  await t?.close();
});

describe('encryption key rotation', () => {
  it('opens keys sealed under a previous encryption key and re-seals on rotate', async () => {
    const ws = await createWorkspace({ client: t.client, body: { name: 'enc-rotation' } });
    // A connection written before the deployment changed its key.
    const id = newId();
    const sealed = sealProviderApiKey(createSecretBox(OLD_KEY), id, API_KEY);
    const now = new Date();
    await t.hooks.providerConnectionRepo.insert({
      id,
      workspace_id: ws.data!.id,
      name: 'sealed-under-old-key',
      protocol_profile: 'openai',
      base_url: upstream.url,
      status: 'ACTIVE',
      api_key_ciphertext: sealed.ciphertext,
      api_key_key_id: sealed.keyId,
      secret_preview: `sk-...${API_KEY.slice(-4)}`,
      upstream_timeout_ms: null,
      retry: null,
      enforces_output_cap: true,
      metadata: {},
      last_verified_at: null,
      created_at: now,
      updated_at: now,
      archived_at: null,
    });
    expect(sealed.keyId).toBe(keyIdOf(OLD_KEY));

    const verified = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: id } });
    expect(verified.data).toMatchObject({ accepted: true, outcome: 'reachable' });
    expect(upstream.requests.at(-1)!.headers.authorization).toBe(`Bearer ${API_KEY}`);

    const rotated = await rotateProviderSecret({ client: t.client, path: { providerConnectionId: id }, body: { apiKey: NEXT_API_KEY } });
    expect(rotated.response.status).toBe(200);
    const row = await t.database.db('provider_connections').where({ id }).first();
    expect(row.api_key_key_id).toBe(keyIdOf(NEW_KEY));
    // Only the new encryption key opens it now.
    expect(openProviderApiKey(createSecretBox(NEW_KEY), row)).toBe(NEXT_API_KEY);
    expect(() => openProviderApiKey(createSecretBox(OLD_KEY), row)).toThrow();
    expect((await getProviderConnection({ client: t.client, path: { providerConnectionId: id } })).data!.secretPreview).toBe(
      `sk-...${NEXT_API_KEY.slice(-4)}`,
    );
  });

  it('fails closed when the ciphertext key id is not configured', () => {
    const foreign = createSecretBox(randomBytes(32));
    const id = newId();
    const sealed = sealProviderApiKey(foreign, id, API_KEY);
    expect(() =>
      openProviderApiKey(t.nexus.services.secretBox, { id, api_key_ciphertext: sealed.ciphertext, api_key_key_id: sealed.keyId }),
    ).toThrow(/no encryption key/);
  });
});

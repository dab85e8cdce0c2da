/**
 * The billing operations one by one through HTTP: happy paths, errors with their
 * exact codes, tenant isolation, write-only secrets, and the webhook receiver's
 * refusals (signature, secret rotation, unknown types and customers).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  configureBillingProviderCredential,
  configureBillingWebhookSecret,
  createBillingConnection,
  createBillingProductMapping,
  createCheckout,
  deleteBillingProductMapping,
  disableBillingConnection,
  listBillingConnections,
  listBillingProductMappings,
  listBillingWebhookEvents,
  listExternalSubscriptions,
  reconcileBillingConnection,
  replayBillingWebhookEvent,
  syncWorkspaceAccessBillingPeriod,
  verifyBillingConnection,
} from '../support/sdk.js';
import { systemActor } from '../../src/domain/actor.js';
import { credentialAad } from '../../src/domain/billing/billing-secrets.js';
import { newId } from '../../src/ids.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { TEST_ROOT_KEY } from '../support/test-app.js';
import {
  at,
  deliver,
  HOUR,
  newConnection,
  newMapping,
  newPlan,
  newWorkspace,
  provision,
  startBillingWorld,
  stripeKey,
  webhookSecret,
  type BillingWorld,
} from './billing-fixture.js';
import { FakePaddle } from './fake-paddle.js';
import { FakeStripe } from './fake-stripe.js';

let w: BillingWorld;
let workspaceId: string;
let planId: string;
let otherWorkspace: string;
let scopedKey: string;

beforeAll(async () => {
  w = await startBillingWorld();
  workspaceId = await newWorkspace(w, 'api');
  planId = await newPlan(w, workspaceId, 'pro');
  otherWorkspace = await newWorkspace(w, 'other');
  scopedKey = (await w.t.nexus.services.managementKeys.createScoped(systemActor('test'), { name: 'other', workspaceIds: [otherWorkspace] }))
    .key;
  w.stripe.prices.set('price_pro', 'prod_pro');
});
afterAll(async () => {
  await w?.close();
});

async function raw(method: string, path: string, body?: string) {
  const res = await w.t.fetch(`${w.t.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body } : {}),
  });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

describe('createBillingConnection', () => {
  it('returns the DTO with the webhookUrl, previews and booleans, never the credential', async () => {
    const credential = stripeKey();
    const res = await createBillingConnection({
      client: w.t.client,
      path: { workspaceId },
      body: { name: 'Stripe', provider: 'STRIPE', kind: 'HOSTED', mode: 'TEST', credential },
    });
    expect(res.response.status).toBe(201);
    const dto = res.data!;
    expect(Object.keys(dto).sort()).toEqual(
      [
        'credentialConfigured',
        'credentialPreview',
        'credentialVerificationStatus',
        'id',
        'kind',
        'mode',
        'name',
        'provider',
        'status',
        'webhookSecretConfigured',
        'webhookUrl',
        'workspaceId',
      ].sort(),
    );
    expect(dto).toMatchObject({
      workspaceId,
      kind: 'HOSTED',
      provider: 'STRIPE',
      mode: 'TEST',
      status: 'ACTIVE',
      credentialConfigured: true,
      webhookSecretConfigured: false,
      credentialVerificationStatus: 'UNVERIFIED',
      webhookUrl: `${w.t.url}/webhooks/billing/${dto.id}`,
      credentialPreview: `sk_...${credential.slice(-4)}`,
    });
    expect(JSON.stringify(dto)).not.toContain(credential);
    const row = await w.t.database.db('billing_connections').where({ id: dto.id }).first();
    expect(row.credential_ciphertext).not.toContain(credential.slice(8, 30));
    // Bound to its row: the ciphertext does not open as another connection's.
    const box = w.t.nexus.services.secretBox;
    expect(box.open({ keyId: row.credential_key_id, ciphertext: row.credential_ciphertext }, credentialAad(dto.id))).toBe(credential);
    expect(() => box.open({ keyId: row.credential_key_id, ciphertext: row.credential_ciphertext }, credentialAad(newId()))).toThrow();
    const audit = await w.t.database.db('audit_logs').where({ resource_id: dto.id, action: 'billing_connection.created' }).first();
    expect(JSON.stringify(audit.changes)).not.toContain(credential);
  });

  describe.each([
    ['a short Paddle key', 'PADDLE', 'pdl_sdbx_abc', '...abc'],
    ['a short Stripe key', 'STRIPE', 'sk_test_abcd', '...bcd'],
    ['a key of 16 characters', 'STRIPE', 'sk_test_abcdWXYZ', '...WXYZ'],
    ['a Paddle sandbox key', 'PADDLE', `pdl_sdbx_apikey_01${SECRET_MARKER}abcdefWXYZ`, 'pdl_...WXYZ'],
    ['a Stripe test key', 'STRIPE', `sk_test_51${SECRET_MARKER}abcdefghijWXYZ`, 'sk_...WXYZ'],
  ] as const)('credentialPreview of %s', (_label, provider, credential, expected) => {
    it(`is ${expected}: at most a quarter of the credential and its last 4 characters`, async () => {
      const res = await createBillingConnection({
        client: w.t.client,
        path: { workspaceId },
        body: { name: 'preview', provider, kind: 'HOSTED', mode: 'TEST', credential },
      });
      expect(res.response.status).toBe(201);
      expect(res.data!.credentialPreview).toBe(expected);
      expect(expected.replace('...', '').length).toBeLessThanOrEqual(credential.length / 4);
    });
  });

  it('reads the public URL at call time', async () => {
    const { dto } = await newConnection(w, workspaceId, { kind: 'APP_SYNC', credential: false });
    expect(dto).toMatchObject({
      kind: 'APP_SYNC',
      credentialConfigured: false,
      credentialVerificationStatus: 'NOT_CONFIGURED',
      webhookSecretConfigured: true,
    });
    expect(dto.credentialPreview).toBeUndefined();
  });

  describe.each([
    ['unknown provider', { name: 'x', provider: 'BRAINTREE', kind: 'HOSTED', mode: 'TEST' }, 'invalid_parameter', 'provider'],
    ['unknown kind', { name: 'x', provider: 'STRIPE', kind: 'OTHER', mode: 'TEST' }, 'invalid_parameter', 'kind'],
    ['missing mode', { name: 'x', provider: 'STRIPE', kind: 'HOSTED' }, 'invalid_parameter', 'mode'],
    ['unknown field', { name: 'x', provider: 'STRIPE', kind: 'HOSTED', mode: 'TEST', secret: 'y' }, 'invalid_parameter', 'secret'],
    [
      'a live key on a TEST connection',
      { name: 'x', provider: 'STRIPE', kind: 'HOSTED', mode: 'TEST', credential: 'sk_live_abcdefghijkl' },
      'invalid_parameter',
      'credential',
    ],
  ])('rejects %s with 400', (_label, body, code, param) => {
    it('and creates nothing', async () => {
      const before = (await w.t.database.db('billing_connections').count('* as n'))[0]!.n;
      const res = await raw('POST', `/admin/v1/workspaces/${workspaceId}/billing-connections`, JSON.stringify(body));
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code, param });
      expect((await w.t.database.db('billing_connections').count('* as n'))[0]!.n).toBe(before);
    });
  });

  it('answers 404 for another tenant and for a missing workspace', async () => {
    const scoped = w.t.clientWith(scopedKey);
    const res = await createBillingConnection({
      client: scoped,
      path: { workspaceId },
      body: { name: 'x', provider: 'STRIPE', kind: 'HOSTED', mode: 'TEST' },
    });
    expect(res.response.status).toBe(404);
    expect((res.error as any).error.code).toBe('workspace_not_found');
    const missing = await createBillingConnection({
      client: w.t.client,
      path: { workspaceId: newId() },
      body: { name: 'x', provider: 'STRIPE', kind: 'HOSTED', mode: 'TEST' },
    });
    expect(missing.response.status).toBe(404);
  });

  it('answers 401 without a Management Key', async () => {
    const res = await createBillingConnection({
      client: w.t.clientWith(undefined),
      path: { workspaceId },
      body: { name: 'x', provider: 'STRIPE', kind: 'HOSTED', mode: 'TEST' },
    });
    expect(res.response.status).toBe(401);
  });
});

describe('listBillingConnections', () => {
  it('pages newest first and filters by status; another tenant gets 404', async () => {
    const ws = await newWorkspace(w, 'list');
    const a = await newConnection(w, ws);
    const b = await newConnection(w, ws, { provider: 'PADDLE' });
    const first = await listBillingConnections({ client: w.t.client, path: { workspaceId: ws }, query: { limit: 1 } });
    expect(first.data!.map((c) => c.id)).toEqual([b.dto.id]);
    const cursor = first.response.headers.get('x-next-cursor')!;
    expect(first.response.headers.get('link')).toContain('rel="next"');
    const second = await listBillingConnections({ client: w.t.client, path: { workspaceId: ws }, query: { limit: 1, cursor } });
    expect(second.data!.map((c) => c.id)).toEqual([a.dto.id]);
    expect(second.response.headers.get('x-next-cursor')).toBeNull();
    await disableBillingConnection({ client: w.t.client, path: { connectionId: a.dto.id } });
    const disabled = await listBillingConnections({ client: w.t.client, path: { workspaceId: ws }, query: { status: 'DISABLED' } });
    expect(disabled.data!.map((c) => c.id)).toEqual([a.dto.id]);
    const scoped = await listBillingConnections({ client: w.t.clientWith(scopedKey), path: { workspaceId: ws } });
    expect(scoped.response.status).toBe(404);
  });
});

describe('credentials, webhook secrets and verification', () => {
  it('stores and rotates the credential (verification back to UNVERIFIED) and verifies it against Stripe', async () => {
    const conn = await newConnection(w, workspaceId);
    const verified = await verifyBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(verified.response.status).toBe(200);
    expect(verified.data).toMatchObject({
      credentialVerificationStatus: 'VERIFIED',
      externalAccountId: 'acct_fake123',
      lastVerifiedAt: w.clock.now().toISOString(),
    });
    expect(w.stripe.requests.some((r) => r.path === '/v1/account' && r.headers.authorization === `Bearer ${conn.credential}`)).toBe(true);

    const rotated = stripeKey();
    const res = await configureBillingProviderCredential({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      body: { credential: rotated },
    });
    expect(res.data).toMatchObject({ credentialVerificationStatus: 'UNVERIFIED', credentialPreview: `sk_...${rotated.slice(-4)}` });
    expect(res.data!.externalAccountId).toBeUndefined();
    // The fake does not know the new key: the outcome is recorded, not an error.
    const failed = await verifyBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(failed.response.status).toBe(200);
    expect(failed.data!.credentialVerificationStatus).toBe('FAILED');
    const row = await w.t.database.db('billing_connections').where({ id: conn.dto.id }).first();
    expect(row.last_verification_error).toBe('credential_rejected');
  });

  it('verifies a Paddle credential', async () => {
    const conn = await newConnection(w, workspaceId, { provider: 'PADDLE' });
    const verified = await verifyBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(verified.data).toMatchObject({ credentialVerificationStatus: 'VERIFIED', provider: 'PADDLE' });
    expect(w.paddle.requests.some((r) => r.path === '/event-types' && r.headers.authorization === `Bearer ${conn.credential}`)).toBe(true);
  });

  it('refuses to verify without a credential (409) and for another tenant (404)', async () => {
    const conn = await newConnection(w, workspaceId, { credential: false });
    const res = await verifyBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error.code).toBe('billing_not_configured');
    const scoped = await verifyBillingConnection({ client: w.t.clientWith(scopedKey), path: { connectionId: conn.dto.id } });
    expect(scoped.response.status).toBe(404);
    expect((scoped.error as any).error.code).toBe('billing_connection_not_found');
  });

  it('a rotated webhook secret keeps verifying for the overlap, then stops', async () => {
    w.clock.set('2026-11-05T00:00:00Z');
    const conn = await newConnection(w, workspaceId);
    const newSecret = webhookSecret();
    const rotated = await configureBillingWebhookSecret({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      body: { webhookSecret: newSecret },
    });
    expect(rotated.data!.webhookSecretConfigured).toBe(true);
    expect(JSON.stringify(rotated.data)).not.toContain(newSecret);

    const oldSigned = w.stripe.event('product.created', { id: 'prod_x', object: 'product' }, w.clock.now());
    const viaOld = await deliver(w, conn, oldSigned.body, FakeStripe.sign(oldSigned.body, conn.secret, w.clock.now()));
    expect(viaOld.status).toBe(200);
    const newSigned = w.stripe.event('product.created', { id: 'prod_y', object: 'product' }, w.clock.now());
    expect((await deliver(w, conn, newSigned.body, FakeStripe.sign(newSigned.body, newSecret, w.clock.now()))).status).toBe(200);
    const stored = await w.t.database.db('billing_webhook_events').where({ billing_connection_id: conn.dto.id }).orderBy('id');
    expect(stored.map((e: any) => e.verified_with)).toEqual(['PREVIOUS_SECRET', 'CURRENT_SECRET']);

    w.clock.advance(25 * HOUR);
    const late = w.stripe.event('product.created', { id: 'prod_z', object: 'product' }, w.clock.now());
    const refused = await deliver(w, conn, late.body, FakeStripe.sign(late.body, conn.secret, w.clock.now()));
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('invalid_signature');
  });
});

describe('disableBillingConnection', () => {
  it('disables (twice is fine); changes are refused after; its webhooks are acknowledged and ignored', async () => {
    const conn = await newConnection(w, workspaceId);
    expect((await disableBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } })).response.status).toBe(204);
    expect((await disableBillingConnection({ client: w.t.client, path: { connectionId: conn.dto.id } })).response.status).toBe(204);
    const res = await configureBillingProviderCredential({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      body: { credential: stripeKey() },
    });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error.code).toBe('billing_connection_disabled');
    const event = w.stripe.event(
      'customer.subscription.updated',
      { id: 'sub_unknown', object: 'subscription', status: 'active', items: { data: [] } },
      w.clock.now(),
    );
    expect((await deliver(w, conn, event.body, FakeStripe.sign(event.body, conn.secret, w.clock.now()))).status).toBe(200);
    await w.t.hooks.billingPasses.processPending();
    const events = await listBillingWebhookEvents({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(events.data![0]).toMatchObject({ status: 'IGNORED', lastError: 'connection_disabled' });
    const missing = await disableBillingConnection({ client: w.t.client, path: { connectionId: newId() } });
    expect(missing.response.status).toBe(404);
  });
});

describe('product mappings', () => {
  it('creates, lists, refuses a duplicate, disables, and allows a new one after', async () => {
    const conn = await newConnection(w, workspaceId);
    const id = await newMapping(w, conn.dto.id, planId, 'prod_pro', 'price_pro');
    const dup = await createBillingProductMapping({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      body: { externalProductId: 'prod_pro', externalPriceId: 'price_pro', planId },
    });
    expect(dup.response.status).toBe(409);
    expect((dup.error as any).error.code).toBe('billing_mapping_exists');
    const productOnly = await newMapping(w, conn.dto.id, planId, 'prod_pro');
    const list = await listBillingProductMappings({ client: w.t.client, path: { connectionId: conn.dto.id } });
    expect(list.data!.map((m) => m.id)).toEqual([productOnly, id]);
    expect(list.data![1]).toMatchObject({
      externalProductId: 'prod_pro',
      externalPriceId: 'price_pro',
      planId,
      checkoutEnabled: true,
      status: 'ACTIVE',
      billingConnectionId: conn.dto.id,
    });
    expect(list.data![0]!.externalPriceId).toBeUndefined();

    expect((await deleteBillingProductMapping({ client: w.t.client, path: { mappingId: id } })).response.status).toBe(204);
    expect((await deleteBillingProductMapping({ client: w.t.client, path: { mappingId: id } })).response.status).toBe(204);
    const disabled = await listBillingProductMappings({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      query: { status: 'DISABLED' },
    });
    expect(disabled.data).toEqual([
      expect.objectContaining({ id, status: 'DISABLED', checkoutEnabled: false, disabledAt: expect.any(String) }),
    ]);
    await newMapping(w, conn.dto.id, planId, 'prod_pro', 'price_pro');
  });

  it.each([
    [
      'checkoutEnabled without a price',
      (p: string) => ({ externalProductId: 'prod_a', planId: p, checkoutEnabled: true }),
      400,
      'invalid_parameter',
    ],
    ['a plan of another workspace', () => ({ externalProductId: 'prod_b', planId: otherPlan }), 404, 'plan_not_found'],
    ['a missing plan', () => ({ externalProductId: 'prod_c', planId: newId() }), 404, 'plan_not_found'],
  ])('refuses %s', async (_label, body, status, code) => {
    const conn = await newConnection(w, workspaceId, { credential: false });
    otherPlan ??= await newPlan(w, otherWorkspace, 'theirs');
    const res = await createBillingProductMapping({ client: w.t.client, path: { connectionId: conn.dto.id }, body: body(planId) });
    expect(res.response.status).toBe(status);
    expect((res.error as any).error.code).toBe(code);
  });

  it('answers 404 for a missing mapping and for another tenant', async () => {
    expect((await deleteBillingProductMapping({ client: w.t.client, path: { mappingId: newId() } })).response.status).toBe(404);
    const conn = await newConnection(w, workspaceId, { credential: false });
    const id = await newMapping(w, conn.dto.id, planId, 'prod_t');
    const res = await deleteBillingProductMapping({ client: w.t.clientWith(scopedKey), path: { mappingId: id } });
    expect(res.response.status).toBe(404);
    expect(
      (await listBillingProductMappings({ client: w.t.clientWith(scopedKey), path: { connectionId: conn.dto.id } })).response.status,
    ).toBe(404);
  });
});

let otherPlan: string;

describe('createCheckout', () => {
  it('a retry with the same Idempotency-Key replays the checkout; the key reached Stripe', async () => {
    const conn = await newConnection(w, workspaceId);
    const accessId = await provision(w, workspaceId, planId);
    const mappingId = await newMapping(w, conn.dto.id, planId, 'prod_pro', 'price_pro');
    const body = {
      billingConnectionId: conn.dto.id,
      productMappingId: mappingId,
      successUrl: 'https://a.example/ok',
      cancelUrl: 'https://a.example/no',
      customerEmail: 'u@example.com',
    };
    const headers = { 'Idempotency-Key': `checkout-${accessId}` };
    const sessionsBefore = w.stripe.sessions.size;
    const first = await createCheckout({ client: w.t.client, path: { accessId }, body, headers });
    expect(first.response.status).toBe(201);
    const again = await createCheckout({ client: w.t.client, path: { accessId }, body, headers });
    expect(again.data).toEqual(first.data);
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(w.stripe.sessions.size).toBe(sessionsBefore + 1);
    const request = w.stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1)!;
    expect(request.headers['idempotency-key']).toBe(`nexus-checkout-${accessId}-checkout-${accessId}`);
    expect(new URLSearchParams(request.body).get('customer_email')).toBe('u@example.com');
    expect(new URLSearchParams(request.body).get('cancel_url')).toBe('https://a.example/no');
  });
});

describe('createCheckout refusals', () => {
  it('needs a checkout-enabled mapping, a HOSTED connection, a success URL for Stripe, and a provider that accepts it', async () => {
    const conn = await newConnection(w, workspaceId);
    const accessId = await provision(w, workspaceId, planId);
    const noCheckout = await newMapping(w, conn.dto.id, planId, 'prod_pro', 'price_pro', false);
    const call = (body: Record<string, unknown>) =>
      createCheckout({
        client: w.t.client,
        path: { accessId },
        body: { billingConnectionId: conn.dto.id, productMappingId: noCheckout, successUrl: 'https://a.example/ok', ...body },
      });

    let res = await call({});
    expect(res.response.status).toBe(409);
    expect((res.error as any).error.code).toBe('checkout_not_available');

    w.stripe.prices.delete('price_gone');
    const unknownPrice = await newMapping(w, conn.dto.id, planId, 'prod_gone', 'price_gone');
    res = await call({ productMappingId: unknownPrice });
    expect(res.response.status).toBe(502);
    expect((res.error as any).error.code).toBe('billing_provider_error');

    const ok = await newMapping(w, conn.dto.id, planId, 'prod_pro2', 'price_pro2');
    res = await call({ productMappingId: ok, successUrl: undefined });
    expect(res.response.status).toBe(400);
    expect((res.error as any).error).toMatchObject({ code: 'invalid_parameter', param: 'successUrl' });

    const sync = await newConnection(w, workspaceId, { kind: 'APP_SYNC' });
    const syncMapping = await newMapping(w, sync.dto.id, planId, 'prod_pro', 'price_pro');
    res = await call({ billingConnectionId: sync.dto.id, productMappingId: syncMapping });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error.code).toBe('checkout_not_available');

    res = await createCheckout({
      client: w.t.clientWith(scopedKey),
      path: { accessId },
      body: { billingConnectionId: conn.dto.id, productMappingId: ok },
    });
    expect(res.response.status).toBe(404);
    res = await createCheckout({
      client: w.t.client,
      path: { accessId: newId() },
      body: { billingConnectionId: conn.dto.id, productMappingId: ok },
    });
    expect(res.response.status).toBe(404);
    expect((res.error as any).error.code).toBe('access_not_found');
  });

  describe.each(['successUrl', 'cancelUrl'])('%s', (field) => {
    it.each([
      'javascript:alert(1)',
      'mailto:x@y.z',
      'ftp://x/y',
      'data:text/html,hi',
      'https://',
      '/relative/path',
      'https://a.example/a b',
    ])('refuses %s with 400 naming the field, before Stripe is asked', async (url) => {
      const conn = await newConnection(w, workspaceId);
      const accessId = await provision(w, workspaceId, planId);
      const mappingId = await newMapping(w, conn.dto.id, planId, 'prod_pro', 'price_pro');
      const seen = w.stripe.requests.length;
      const res = await raw(
        'POST',
        `/admin/v1/workspace-accesses/${accessId}/billing-checkouts`,
        JSON.stringify({ billingConnectionId: conn.dto.id, productMappingId: mappingId, successUrl: 'https://a.example/ok', [field]: url }),
      );
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_parameter', param: field, type: 'invalid_request_error' });
      expect(res.body.error.message).toMatch(new RegExp(`^${field} must be `));
      expect(res.body.error.message).not.toContain('[Hh]');
      expect(w.stripe.requests.slice(seen)).toEqual([]);
      expect(await w.t.database.db('billing_checkouts').where({ workspace_access_id: accessId })).toEqual([]);
    });

    it('accepts http and https in any case', async () => {
      const conn = await newConnection(w, workspaceId);
      const accessId = await provision(w, workspaceId, planId);
      const mappingId = await newMapping(w, conn.dto.id, planId, 'prod_pro', 'price_pro');
      // Stripe's own placeholder, which it fills in with the session id.
      for (const url of [
        'http://localhost:3000/done',
        'HTTPS://App.Example.com/done?x=1',
        'https://app.example/ok?session_id={CHECKOUT_SESSION_ID}',
      ]) {
        const res = await createCheckout({
          client: w.t.client,
          path: { accessId },
          body: { billingConnectionId: conn.dto.id, productMappingId: mappingId, successUrl: 'https://a.example/ok', [field]: url },
        });
        expect(res.response.status).toBe(201);
        const sent = new URLSearchParams(w.stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1)!.body);
        expect(sent.get(field === 'successUrl' ? 'success_url' : 'cancel_url')).toBe(url);
      }
    });
  });
});

describe('the webhook receiver', () => {
  it('refuses a missing or bad signature with 400 and stores nothing but a count of rejections per reason', async () => {
    const conn = await newConnection(w, workspaceId);
    const event = w.stripe.event('customer.subscription.updated', { id: 'sub_1', object: 'subscription' }, w.clock.now());
    const cases: [string | null, string][] = [
      [null, 'missing_signature'],
      [FakeStripe.sign(event.body, 'whsec_wrong_secret_123', w.clock.now()), 'no_matching_signature'],
      [FakeStripe.sign(event.body, conn.secret, at(w.clock.now(), -10 * 60_000)), 'timestamp_out_of_tolerance'],
      [FakeStripe.sign(event.body + ' ', conn.secret, w.clock.now()), 'no_matching_signature'],
    ];
    for (const [signature, reason] of cases) {
      const res = await deliver(w, conn, event.body, signature);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_signature', type: 'invalid_request_error' });
      expect(res.body.error.message).toContain(reason);
    }
    expect(await w.t.database.db('billing_webhook_events').where({ billing_connection_id: conn.dto.id })).toEqual([]);
    await w.t.hooks.billingPasses.flushRejections();
    const counts = await w.t.database
      .db('billing_webhook_rejection_counts')
      .where({ billing_connection_id: conn.dto.id })
      .orderBy('reason');
    expect(counts.map((r: any) => [r.reason, Number(r.count)])).toEqual([
      ['missing_signature', 1],
      ['no_matching_signature', 2],
      ['timestamp_out_of_tolerance', 1],
    ]);
    // Neither the body nor a signature reached the logs.
    const logs = w.t.logs.join('\n');
    expect(logs).not.toContain('sub_1');
    expect(logs).not.toContain(conn.secret);
    expect(logs).not.toMatch(/v1=[0-9a-f]{64}/);
  });

  it('a flood of bad signatures writes one count, not a row each, and the counts add up across passes', async () => {
    const conn = await newConnection(w, workspaceId);
    const event = w.stripe.event('customer.subscription.updated', { id: 'sub_flood', object: 'subscription' }, w.clock.now());
    const bad = FakeStripe.sign(event.body, 'whsec_wrong_secret_123', w.clock.now());
    const flood = async (n: number) => {
      for (let i = 0; i < n; i++) expect((await deliver(w, conn, event.body, bad)).status).toBe(400);
      await w.t.hooks.billingPasses.flushRejections();
    };
    await flood(30);
    await flood(20);
    const counts = await w.t.database.db('billing_webhook_rejection_counts').where({ billing_connection_id: conn.dto.id });
    expect(counts).toHaveLength(1);
    expect(counts[0]).toMatchObject({ reason: 'no_matching_signature', count: 50n, last_body_bytes: Buffer.byteLength(event.body) });
  });

  it('accepts a Paddle signature among several h1 values, and refuses a body over the limit with 413', async () => {
    const conn = await newConnection(w, workspaceId, { provider: 'PADDLE' });
    const event = w.paddle.event('product.updated', { id: 'pro_1' }, w.clock.now());
    const header = FakePaddle.sign(event.body, conn.secret, w.clock.now(), ['ab'.repeat(32)]);
    expect(header.split(';').filter((p) => p.startsWith('h1='))).toHaveLength(2);
    const res = await deliver(w, conn, event.body, header);
    expect(res).toEqual({ status: 200, body: { received: true, duplicate: false } });
    const huge = JSON.stringify({ event_id: 'evt_huge', event_type: 'x', pad: 'x'.repeat(1_100_000) });
    const tooLarge = await deliver(w, conn, huge, FakePaddle.sign(huge, conn.secret, w.clock.now()));
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error.code).toBe('payload_too_large');
  });

  it('answers 400, not 500, for a body that does not decode as its Content-Encoding says', async () => {
    const conn = await newConnection(w, workspaceId);
    const res = await w.t.fetch(conn.dto.webhookUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'stripe-signature': 't=1,v1=00' },
      body: '{"id":"evt_not_gzip"}',
    });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'invalid_request', type: 'invalid_request_error' });
  });

  it('answers 404 for an unknown connection (or a malformed id) and 400 for a connection without a secret', async () => {
    const unknown = await w.t.fetch(`${w.t.url}/webhooks/billing/${newId()}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(unknown.status).toBe(404);
    const bad = await w.t.fetch(`${w.t.url}/webhooks/billing/not-a-uuid`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(bad.status).toBe(404);
    const created = await createBillingConnection({
      client: w.t.client,
      path: { workspaceId },
      body: { name: 'nosecret', provider: 'STRIPE', kind: 'HOSTED', mode: 'TEST' },
    });
    const event = w.stripe.event('product.created', { id: 'p' }, w.clock.now());
    const res = await w.t.fetch(created.data!.webhookUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': FakeStripe.sign(event.body, 'whsec_anything_1', w.clock.now()) },
      body: event.body,
    });
    expect(res.status).toBe(400);
  });

  it('acknowledges unknown event types and unknown customers with 200 and records them IGNORED', async () => {
    const conn = await newConnection(w, workspaceId);
    const unknownType = w.stripe.event('charge.refunded', { id: 'ch_1', object: 'charge' }, w.clock.now());
    const sub = w.stripe.createSubscription({
      price: 'price_pro',
      metadata: {},
      period: { start: w.clock.now(), end: at(w.clock.now(), 30 * 24 * HOUR) },
    });
    const unknownCustomer = w.stripe.event('customer.subscription.created', w.stripe.snapshot(sub.id), w.clock.now());
    for (const e of [unknownType, unknownCustomer]) {
      const res = await deliver(w, conn, e.body, FakeStripe.sign(e.body, conn.secret, w.clock.now()));
      expect(res.status).toBe(200);
    }
    await w.t.hooks.billingPasses.processPending();
    const ignored = await listBillingWebhookEvents({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      query: { status: 'IGNORED' },
    });
    expect(ignored.data!.map((e) => [e.type, e.lastError])).toEqual([
      ['customer.subscription.created', 'unknown_customer'],
      ['charge.refunded', 'unhandled_event_type: charge.refunded'],
    ]);
    const stored = await w.t.database.db('billing_webhook_events').where({ billing_connection_id: conn.dto.id }).first();
    expect(stored.headers).toEqual({
      'stripe-signature': '[redacted]',
      'content-type': 'application/json',
      'user-agent': 'Stripe/1.0',
      'content-length': expect.any(String),
    });
  });

  it('a RECEIVED event left by a crash is picked up by the periodic pass', async () => {
    const conn = await newConnection(w, workspaceId);
    const event = w.stripe.event('charge.refunded', { id: 'ch_2', object: 'charge' }, w.clock.now());
    const id = newId();
    await w.t.database.db('billing_webhook_events').insert({
      id,
      workspace_id: workspaceId,
      billing_connection_id: conn.dto.id,
      provider_event_id: event.id,
      event_type: 'charge.refunded',
      raw_body: event.body,
      headers: '{}',
      verified_with: 'CURRENT_SECRET',
      status: 'RECEIVED',
      attempts: 0,
      received_at: w.clock.now(),
    });
    expect(await w.t.hooks.billingPasses.processPending()).toBeGreaterThanOrEqual(1);
    expect(await w.t.database.db('billing_webhook_events').where({ id }).first()).toMatchObject({ status: 'IGNORED', attempts: 1 });
  });
});

describe('listBillingWebhookEvents', () => {
  it('pages with a cursor, filters by type and status, and hides other tenants', async () => {
    const conn = await newConnection(w, workspaceId);
    for (const type of ['a.one', 'a.two', 'a.one']) {
      const e = w.stripe.event(type, { id: 'x' }, w.clock.now());
      await deliver(w, conn, e.body, FakeStripe.sign(e.body, conn.secret, w.clock.now()));
    }
    await w.t.hooks.billingPasses.processPending();
    const page1 = await listBillingWebhookEvents({ client: w.t.client, path: { connectionId: conn.dto.id }, query: { limit: 2 } });
    expect(page1.data).toHaveLength(2);
    const page2 = await listBillingWebhookEvents({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      query: { limit: 2, cursor: page1.response.headers.get('x-next-cursor')! },
    });
    expect(page2.data).toHaveLength(1);
    const ones = await listBillingWebhookEvents({
      client: w.t.client,
      path: { connectionId: conn.dto.id },
      query: { type: 'a.one', status: 'IGNORED' },
    });
    expect(ones.data).toHaveLength(2);
    expect(
      (await listBillingWebhookEvents({ client: w.t.client, path: { connectionId: conn.dto.id }, query: { status: 'FAILED' } })).data,
    ).toEqual([]);
    expect(
      (await listBillingWebhookEvents({ client: w.t.clientWith(scopedKey), path: { connectionId: conn.dto.id } })).response.status,
    ).toBe(404);
    const badStatus = await raw('GET', `/admin/v1/billing-connections/${conn.dto.id}/webhook-events?status=DONE`);
    expect(badStatus.status).toBe(400);
  });

  it('replay: 404 for a missing event, 409 for one that did not fail', async () => {
    expect((await replayBillingWebhookEvent({ client: w.t.client, path: { eventId: newId() } })).response.status).toBe(404);
    const conn = await newConnection(w, workspaceId);
    const e = w.stripe.event('a.three', { id: 'x' }, w.clock.now());
    await deliver(w, conn, e.body, FakeStripe.sign(e.body, conn.secret, w.clock.now()));
    await w.t.hooks.billingPasses.processPending();
    const [event] = (await listBillingWebhookEvents({ client: w.t.client, path: { connectionId: conn.dto.id } })).data!;
    const res = await replayBillingWebhookEvent({ client: w.t.client, path: { eventId: event!.id } });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error).toMatchObject({ code: 'event_not_replayable', current_status: 'IGNORED' });
    expect((await replayBillingWebhookEvent({ client: w.t.clientWith(scopedKey), path: { eventId: event!.id } })).response.status).toBe(
      404,
    );
  });
});

describe('reconcile, projections and sync refusals', () => {
  it('reconcile needs a HOSTED connection with a credential; projections of a missing access are 404', async () => {
    const noCred = await newConnection(w, workspaceId, { credential: false });
    let res = await reconcileBillingConnection({ client: w.t.client, path: { connectionId: noCred.dto.id } });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error.code).toBe('billing_not_configured');
    const sync = await newConnection(w, workspaceId, { kind: 'APP_SYNC' });
    res = await reconcileBillingConnection({ client: w.t.client, path: { connectionId: sync.dto.id } });
    expect(res.response.status).toBe(409);
    res = await reconcileBillingConnection({ client: w.t.clientWith(scopedKey), path: { connectionId: sync.dto.id } });
    expect(res.response.status).toBe(404);
    const subs = await listExternalSubscriptions({ client: w.t.client, path: { accessId: newId() } });
    expect(subs.response.status).toBe(404);
    expect((subs.error as any).error.code).toBe('access_not_found');
  });

  it('sync needs an APP_SYNC connection, a plan, and a period that ends after it starts', async () => {
    const hosted = await newConnection(w, workspaceId, { credential: false });
    const sync = await newConnection(w, workspaceId, { kind: 'APP_SYNC', credential: false });
    const accessId = await provision(w, workspaceId, planId);
    const body = {
      billingConnectionId: sync.dto.id,
      externalPeriodId: 'p1',
      planId,
      periodStart: '2026-12-01T00:00:00Z',
      periodEnd: '2027-01-01T00:00:00Z',
      status: 'active' as const,
      sourceUpdatedAt: '2026-12-01T00:00:00Z',
    };
    const cases: [Record<string, unknown>, number, string][] = [
      [{ billingConnectionId: hosted.dto.id }, 409, 'billing_not_configured'],
      [{ periodEnd: '2026-11-01T00:00:00Z' }, 400, 'invalid_parameter'],
      [{ planId: undefined }, 400, 'invalid_parameter'],
      [{ planId: undefined, externalProductId: 'prod_none' }, 404, 'product_mapping_not_found'],
      [{ status: 'lapsed' }, 400, 'invalid_parameter'],
      [{ periodStart: 'yesterday' }, 400, 'invalid_parameter'],
    ];
    for (const [over, status, code] of cases) {
      const res = await raw('POST', `/admin/v1/workspace-accesses/${accessId}/billing-periods/sync`, JSON.stringify({ ...body, ...over }));
      expect(res.status, JSON.stringify(over)).toBe(status);
      expect(res.body.error.code).toBe(code);
    }
    const scoped = await syncWorkspaceAccessBillingPeriod({ client: w.t.clientWith(scopedKey), path: { accessId }, body });
    expect(scoped.response.status).toBe(404);
  });
});

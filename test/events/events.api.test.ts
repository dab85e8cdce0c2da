/**
 * Outbound events through HTTP: endpoints made with the Admin API, events caused through the Admin API and the
 * gateway (the openai SDK), and a real receiver on 127.0.0.1 that verifies every delivery with `standardwebhooks`.
 * Retries are shortened by configuration (NEXUS_EVENTS_RETRY_SCHEDULE_MS), as is the failure window.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CreateQuotaStrategyDto, CreateWebhookEndpointDto, WebhookMessageDto } from '../../generated/client/types.gen.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import {
  activateWorkspaceAccess,
  bindPlanStrategy,
  createModelPrice,
  createProviderConnection,
  createRoute,
  createPlan,
  createQuotaStrategy,
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  disableWebhookEndpoint,
  getWebhookEndpoint,
  getPlan,
  getWebhookMessage,
  issueInferenceKey,
  listAuditLogs,
  listPlans,
  listWebhookEndpoints,
  listWebhookMessages,
  publishPlan,
  publishPlanStrategy,
  provisionWorkspaceUser,
  replayFailedWebhookMessages,
  replayWebhookMessage,
  revokeInferenceKey,
  rotateProviderSecret,
  rotateWebhookEndpointSecret,
  sendTestWebhookEvent,
  setWorkspaceBudget,
  suspendWorkspaceAccess,
  updatePlan,
  updateWebhookEndpoint,
  verifyProviderConnection,
} from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startFaultyUpstream } from '../support/upstreams/faulty.js';
import type { TenantSpec } from '../support/tenant.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';
import { createTenant, openAiFor, periodOf, reclaimLease, until, type Tenant } from '../gateway/gateway-support.js';
import { acceptedMessages, acceptedMessagesOf, acceptedOf, endpointFor, startReceiver, type Receiver } from './receiver.js';

const FAST = {
  NEXUS_EVENTS_POLL_MS: '20',
  NEXUS_EVENTS_RETRY_SCHEDULE_MS: '0,100,100,100,100,100,100,100',
  NEXUS_EVENTS_TIMEOUT_MS: '500',
};
const PROVIDER_KEY = testProviderKey('events');

let t: TestApp;
let upstream: FakeUpstream;
const receivers: Receiver[] = [];

beforeAll(async () => {
  t = await startTestApp({ env: FAST });
  upstream = await startOpenAiUpstream({ apiKey: PROVIDER_KEY });
});
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.close();
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

async function tenant(o: Pick<TenantSpec, 'quotaUnits' | 'eventThresholds'> = {}, app: TestApp = t): Promise<Tenant> {
  return createTenant(app, { baseUrl: upstream.url, providerKey: PROVIDER_KEY, ...o });
}

async function messagesOf(app: TestApp, endpointId: string): Promise<WebhookMessageDto[]> {
  const res = await listWebhookMessages({ client: app.client, path: { webhookEndpointId: endpointId }, query: { limit: 100 } });
  expect(res.response.status).toBe(200);
  return res.data!;
}

const settle = (ms = 300) => new Promise((resolve) => setTimeout(resolve, ms));
const hourAgo = () => new Date(Date.now() - 3_600_000).toISOString();

describe('webhook endpoints', () => {
  it('are created with a whsec_ secret shown once, listed, read, updated, disabled and deleted', async () => {
    const ten = await tenant();
    const r = await receiver();
    const created = await endpointFor(t, ten.workspaceId, r, ['access.status_changed']);
    expect(created).toMatchObject({ url: r.url, status: 'ACTIVE', eventTypes: ['access.status_changed'], description: 'test receiver' });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32}$/);

    const got = await getWebhookEndpoint({ client: t.client, path: { webhookEndpointId: created.id } });
    expect(got.data).not.toHaveProperty('secret');
    const listed = await listWebhookEndpoints({ client: t.client, path: { workspaceId: ten.workspaceId } });
    expect(listed.data!.map((e) => e.id)).toEqual([created.id]);

    const updated = await updateWebhookEndpoint({ client: t.client, path: { webhookEndpointId: created.id }, body: { eventTypes: null } });
    expect(updated.data).toMatchObject({ eventTypes: null });
    const disabled = await disableWebhookEndpoint({ client: t.client, path: { webhookEndpointId: created.id } });
    expect(disabled.data).toMatchObject({ status: 'DISABLED', disabledReason: 'admin' });
    const test = await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: created.id } });
    expect(test.response.status).toBe(409);
    expect(test.error).toMatchObject({ error: { code: 'webhook_endpoint_disabled' } });

    expect((await deleteWebhookEndpoint({ client: t.client, path: { webhookEndpointId: created.id } })).response.status).toBe(204);
    expect((await getWebhookEndpoint({ client: t.client, path: { webhookEndpointId: created.id } })).response.status).toBe(404);
    const audit = await listAuditLogs({ client: t.client, path: { workspaceId: ten.workspaceId }, query: { limit: 100 } });
    const actions = audit.data!.map((e) => e.action);
    for (const action of [
      'webhook_endpoint.created',
      'webhook_endpoint.updated',
      'webhook_endpoint.disabled',
      'webhook_endpoint.deleted',
    ]) {
      expect(actions).toContain(action);
    }
    expect(JSON.stringify(audit.data)).not.toContain(created.secret);
    expect(t.logs.join('\n')).not.toContain(created.secret);
  });

  describe.each([
    ['an unknown event type', { url: 'https://example.com/hooks', eventTypes: ['quota.nope'] }, 'unknown_event_type', 'eventTypes.0'],
    ['a URL that is not one', { url: 'not a url' }, 'invalid_webhook_url', 'url'],
    ['a URL of another scheme', { url: 'ftp://example.com/hooks' }, 'invalid_webhook_url', 'url'],
    ['a URL with credentials', { url: 'https://user:pw@example.com/hooks' }, 'invalid_webhook_url', 'url'],
  ])('refuse %s with 400', (_name, body, code, param) => {
    it('naming the field, and make nothing', async () => {
      const ten = await tenant();
      // The unknown event type is sent as it is: the client's types refuse it.
      const res = await createWebhookEndpoint({
        client: t.client,
        path: { workspaceId: ten.workspaceId },
        body: body as CreateWebhookEndpointDto,
      });
      expect(res.response.status).toBe(400);
      expect(res.error).toMatchObject({ error: { code, param } });
      const listed = await listWebhookEndpoints({ client: t.client, path: { workspaceId: ten.workspaceId } });
      expect(listed.data).toEqual([]);
    });
  });

  it('refuse plain http and private addresses where private upstreams are not allowed (the provider URLs’ guard)', async () => {
    const strict = await t.withEnv({ NEXUS_ALLOW_PRIVATE_UPSTREAMS: 'false' });
    try {
      const ten = await tenant();
      for (const [url, code] of [
        ['https://127.0.0.1/hooks', 'private_upstream_refused'],
        ['https://169.254.169.254/latest', 'private_upstream_refused'],
        ['http://93.184.215.14/hooks', 'invalid_webhook_url'],
      ] as const) {
        const res = await createWebhookEndpoint({ client: strict.client, path: { workspaceId: ten.workspaceId }, body: { url } });
        expect(res.response.status, url).toBe(400);
        expect(res.error, url).toMatchObject({ error: { code, param: 'url' } });
      }
    } finally {
      await strict.close();
    }
  });
});

describe('Standard Webhooks on the wire', () => {
  it('a test event arrives signed, verified by standardwebhooks, and its attempt is listed', async () => {
    const ten = await tenant();
    const r = await receiver();
    const endpoint = await endpointFor(t, ten.workspaceId, r);
    const sent = await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    expect(sent.data).toMatchObject({ eventType: 'webhook.test', status: 'PENDING' });
    const [delivery] = await acceptedOf(r, 'webhook.test', 1);
    expect(delivery!.id).toBe(sent.data!.id);
    expect(delivery!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
    expect(Number(delivery!.headers['webhook-timestamp'])).toBeGreaterThan(Date.now() / 1000 - 60);
    expect(delivery!.verified).toMatchObject({ type: 'webhook.test', data: { webhookEndpointId: endpoint.id } });
    expect(new Date(delivery!.verified!.timestamp).toISOString()).toBe(delivery!.verified!.timestamp);

    await until(async () => (await messagesOf(t, endpoint.id))[0]?.status === 'DELIVERED');
    const message = await getWebhookMessage({ client: t.client, path: { webhookEndpointId: endpoint.id, messageId: sent.data!.id } });
    expect(message.data).toMatchObject({ status: 'DELIVERED', attemptCount: 1 });
    expect(message.data!.attempts).toEqual([
      expect.objectContaining({ outcome: 'SUCCEEDED', responseStatus: 200, responseBody: 'ok', latencyMs: expect.any(Number) }),
    ]);
  });

  it('a rotated secret: both the new and the old one sign during the overlap', async () => {
    const ten = await tenant();
    const r = await receiver();
    const endpoint = await endpointFor(t, ten.workspaceId, r);
    const rotated = await rotateWebhookEndpointSecret({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    expect(rotated.data!.secret).not.toBe(endpoint.secret);
    expect(rotated.data!.previousSecretValidUntil).toBeDefined();
    // A receiver that knows only the new secret, and one that knows only the old one, both verify.
    r.secrets.splice(0, r.secrets.length, rotated.data!.secret);
    const old = await receiver();
    old.secrets.push(endpoint.secret);
    await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    const [delivery] = await acceptedOf(r, 'webhook.test', 1);
    expect(String(delivery!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    const { Webhook } = await import('standardwebhooks');
    expect(() => new Webhook(endpoint.secret).verify(delivery!.body, delivery!.headers as Record<string, string>)).not.toThrow();
  });
});

describe('secrets rotated out within the overlap', () => {
  const DAY = 86_400_000;
  const signatures = (d: { headers: Record<string, unknown> }) => String(d.headers['webhook-signature']).split(' ');
  const verifies = async (secret: string, d: { body: string; headers: Record<string, unknown> }) => {
    const { Webhook } = await import('standardwebhooks');
    try {
      new Webhook(secret).verify(d.body, d.headers as Record<string, string>);
      return true;
    } catch {
      return false;
    }
  };

  it('each signs until its own overlap (24 h) ends: a second rotation ends none early', async () => {
    // This app's clock runs `offset` ahead of the host's (behind, when negative); the receiver verifies on the host's,
    // and takes a timestamp up to 5 minutes off it.
    let offset = 0;
    const app = await startTestApp({ env: FAST, clock: { now: () => new Date(Date.now() + offset) } });
    try {
      const ten = await tenant({}, app);
      const r = await receiver();
      const endpoint = await endpointFor(app, ten.workspaceId, r);
      const rotate = async () => {
        const res = await rotateWebhookEndpointSecret({ client: app.client, path: { webhookEndpointId: endpoint.id } });
        expect(res.response.status).toBe(200);
        return res.data!;
      };
      // The first rotation 23 h 59 min ago: the first secret signs for one more minute.
      offset = -DAY + 60_000;
      const second = await rotate();
      // The second 23 h 57 min ago, within the first's overlap: the second secret signs for three more minutes.
      offset = -DAY + 180_000;
      const third = await rotate();
      expect(Date.parse(third.previousSecretValidUntil!)).toBe(Date.parse(third.updatedAt) + DAY);
      offset = 0;
      r.secrets.push(second.secret, third.secret);

      const sent = async (): Promise<Parameters<typeof verifies>[1]> => {
        const test = await sendTestWebhookEvent({ client: app.client, path: { webhookEndpointId: endpoint.id } });
        await until(async () => r.accepted().some((d) => d.id === test.data!.id));
        return r.accepted().find((d) => d.id === test.data!.id)!;
      };
      const now = await sent();
      expect(signatures(now)).toHaveLength(3);
      for (const secret of [endpoint.secret, second.secret, third.secret]) expect(await verifies(secret, now), secret).toBe(true);

      // Two minutes on: the first secret's overlap has ended, the second's has not.
      offset = 120_000;
      const later = await sent();
      expect(signatures(later)).toHaveLength(2);
      expect(await verifies(endpoint.secret, later)).toBe(false);
      expect(await verifies(second.secret, later)).toBe(true);
      expect(await verifies(third.secret, later)).toBe(true);
    } finally {
      await app.close();
    }
  });

  it('at most 10 sign at once: a rotation that would make more is refused with 409, and changes nothing', async () => {
    const ten = await tenant();
    const r = await receiver();
    const endpoint = await endpointFor(t, ten.workspaceId, r);
    const rotate = () => rotateWebhookEndpointSecret({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    const secrets = [endpoint.secret];
    for (let i = 0; i < 9; i++) {
      const res = await rotate();
      expect(res.response.status).toBe(200);
      secrets.push(res.data!.secret);
    }
    const refused = await rotate();
    expect(refused.response.status).toBe(409);
    expect(refused.error).toMatchObject({ error: { code: 'too_many_webhook_secrets' } });
    r.secrets.push(...secrets);
    await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    const [delivery] = await acceptedOf(r, 'webhook.test', 1);
    expect(signatures(delivery!)).toHaveLength(10);
    for (const secret of secrets) expect(await verifies(secret, delivery!)).toBe(true);
  });
});

describe('events, each delivered once per cause', () => {
  it('access.status_changed on suspend and activate (reason admin); inference_key.revoked; inference_key.expiring once, its days configurable', async () => {
    const ten = await tenant();
    const r = await receiver();
    await endpointFor(t, ten.workspaceId, r);
    expect((await suspendWorkspaceAccess({ client: t.client, path: { accessId: ten.accessId } })).response.status).toBe(200);
    expect((await activateWorkspaceAccess({ client: t.client, path: { accessId: ten.accessId } })).response.status).toBe(200);
    const changes = await acceptedOf(r, 'access.status_changed', 2);
    expect(changes.map((d) => d.verified!.data)).toEqual([
      { workspaceAccessId: ten.accessId, from: 'ACTIVE', to: 'SUSPENDED', reason: 'admin' },
      { workspaceAccessId: ten.accessId, from: 'SUSPENDED', to: 'ACTIVE', reason: 'admin' },
    ]);

    expect((await revokeInferenceKey({ client: t.client, path: { accessId: ten.accessId, keyId: ten.apiKeyId } })).response.status).toBe(
      204,
    );
    expect((await revokeInferenceKey({ client: t.client, path: { accessId: ten.accessId, keyId: ten.apiKeyId } })).response.status).toBe(
      204,
    );
    const revoked = await acceptedOf(r, 'inference_key.revoked', 1);
    expect(revoked[0]!.verified!.data).toEqual({ inferenceKeyId: ten.apiKeyId, workspaceAccessId: ten.accessId });

    const soon = new Date(Date.now() + 3 * 86_400_000).toISOString();
    const key = await issueInferenceKey({ client: t.client, path: { accessId: ten.accessId }, body: { name: 'soon', expiresAt: soon } });
    expect(key.response.status).toBe(201);
    // Ten days out: past the 7 days of the default, within the 14 a deployment may set.
    const later = new Date(Date.now() + 10 * 86_400_000).toISOString();
    const laterKey = await issueInferenceKey({
      client: t.client,
      path: { accessId: ten.accessId },
      body: { name: 'later', expiresAt: later },
    });
    expect(laterKey.response.status).toBe(201);
    await t.nexus.services.inferenceKeyExpiry.announceExpiring();
    await t.nexus.services.inferenceKeyExpiry.announceExpiring();
    const expiring = await acceptedMessagesOf(r, 'inference_key.expiring', 1);
    expect(expiring[0]!.verified!.data).toEqual({ inferenceKeyId: key.data!.id, workspaceAccessId: ten.accessId, expiresAt: soon });
    await settle();
    expect(acceptedMessages(r, 'inference_key.expiring')).toHaveLength(1);
    const fortnight = await t.withEnv({ NEXUS_EVENTS_KEY_EXPIRING_DAYS: '14' });
    try {
      await fortnight.nexus.services.inferenceKeyExpiry.announceExpiring();
      await fortnight.nexus.services.inferenceKeyExpiry.announceExpiring();
    } finally {
      await fortnight.close();
    }
    const both = await acceptedMessagesOf(r, 'inference_key.expiring', 2);
    expect(both[1]!.verified!.data).toEqual({ inferenceKeyId: laterKey.data!.id, workspaceAccessId: ten.accessId, expiresAt: later });

    await settle();
    const types = acceptedMessages(r).map((d) => d.verified!.type);
    expect(types.filter((x) => x === 'access.status_changed')).toHaveLength(2);
    expect(types.filter((x) => x === 'inference_key.revoked')).toHaveLength(1);
    expect(types.filter((x) => x === 'inference_key.expiring')).toHaveLength(2);
  });

  it('workspace.budget_crossed once per level and window: crossed by calls, and by a budget set below what was spent', async () => {
    const ten = await tenant();
    const path = { workspaceId: ten.workspaceId };
    // 1000 per million tokens: 1000 micros a token, input and output alike.
    const price = { modelPattern: 'gpt-test*', inputPerMillion: '1000', outputPerMillion: '1000', effectiveFrom: hourAgo() };
    expect((await createModelPrice({ client: t.client, path, body: price })).response.status).toBe(201);
    const set = await setWorkspaceBudget({
      client: t.client,
      path,
      body: { period: 'DAY', softLimitMicros: '15000', hardLimitMicros: '30000' },
    });
    expect(set.response.status).toBe(200);
    const r = await receiver();
    await endpointFor(t, ten.workspaceId, r, ['workspace.budget_crossed']);
    const call = async () => {
      await openAiFor(ten, { 'x-fake-usage': '10,0,0' }).chat.completions.create({ model: 'gpt-test', messages: [], max_tokens: 5 });
      await t.nexus.gateway.drain();
    };
    await call(); // 10,000 micros: under both
    await call(); // 20,000: past the soft level
    await call(); // 30,000: at the hard level
    const crossed = (await acceptedOf(r, 'workspace.budget_crossed', 2)).map((d) => d.verified!.data);
    const byLevel = (level: string) => crossed.find((d) => d['level'] === level);
    expect(byLevel('soft')).toMatchObject({ period: 'DAY', limitMicros: '15000', currency: 'USD' });
    expect(byLevel('hard')).toMatchObject({ period: 'DAY', limitMicros: '30000', currency: 'USD' });
    expect(BigInt(byLevel('hard')!['spentMicros'] as string)).toBeGreaterThanOrEqual(30_000n);

    // A monthly budget whose soft level is below what the month has spent: crossed as it is set, once.
    const monthly = { period: 'MONTH' as const, softLimitMicros: '1000', hardLimitMicros: '1000000' };
    expect((await setWorkspaceBudget({ client: t.client, path, body: monthly })).response.status).toBe(200);
    expect((await setWorkspaceBudget({ client: t.client, path, body: monthly })).response.status).toBe(200);
    const all = await acceptedOf(r, 'workspace.budget_crossed', 3);
    expect(all[2]!.verified!.data).toMatchObject({ level: 'soft', period: 'MONTH', limitMicros: '1000', currency: 'USD' });
    await settle();
    expect(acceptedMessages(r)).toHaveLength(3);
  });

  it('provider_connection.unhealthy once when verification fails (again and again), .recovered once when it passes', async () => {
    const ten = await tenant();
    const r = await receiver();
    await endpointFor(t, ten.workspaceId, r, ['provider_connection.unhealthy', 'provider_connection.recovered']);
    // The first verification passes: nothing to tell (healthy is where a connection starts).
    await verifyProviderConnection({ client: t.client, path: { providerConnectionId: ten.connectionId } });
    await rotateProviderSecret({
      client: t.client,
      path: { providerConnectionId: ten.connectionId },
      body: { apiKey: testProviderKey('wrong') },
    });
    for (let i = 0; i < 2; i++) {
      const res = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: ten.connectionId } });
      expect(res.data).toMatchObject({ accepted: false });
    }
    const unhealthy = await acceptedOf(r, 'provider_connection.unhealthy', 1);
    expect(unhealthy[0]!.verified!.data).toMatchObject({ providerConnectionId: ten.connectionId, source: 'verification', httpStatus: 401 });
    await rotateProviderSecret({ client: t.client, path: { providerConnectionId: ten.connectionId }, body: { apiKey: PROVIDER_KEY } });
    await verifyProviderConnection({ client: t.client, path: { providerConnectionId: ten.connectionId } });
    await verifyProviderConnection({ client: t.client, path: { providerConnectionId: ten.connectionId } });
    const recovered = await acceptedOf(r, 'provider_connection.recovered', 1);
    expect(recovered[0]!.verified!.data).toEqual({ providerConnectionId: ten.connectionId, source: 'verification' });
    await settle();
    expect(r.accepted().map((d) => d.verified!.type)).toEqual(['provider_connection.unhealthy', 'provider_connection.recovered']);
  });

  it("provider_connection.unhealthy when a route's breaker opens, .recovered when its probe closes it: each once, verified", async () => {
    const ten = await tenant();
    const r = await receiver();
    await endpointFor(t, ten.workspaceId, r, ['provider_connection.unhealthy', 'provider_connection.recovered']);
    const flaky = await startFaultyUpstream('status-500');
    try {
      const conn = await createProviderConnection({
        client: t.client,
        path: { workspaceId: ten.workspaceId },
        body: { name: 'flaky', protocolProfile: 'openai', baseUrl: flaky.url, apiKey: PROVIDER_KEY },
      });
      expect(conn.response.status).toBe(201);
      const flakyId = conn.data!.id;
      const created = await createRoute({
        client: t.client,
        path: { workspaceId: ten.workspaceId },
        body: {
          name: 'breaker events',
          targets: [{ providerConnectionId: flakyId }, { providerConnectionId: ten.connectionId }],
          breaker: { consecutiveFailures: 1, cooldownMs: 300 },
        },
      });
      expect(created.response.status).toBe(201);
      const route = created.data!;
      await t.nexus.gateway.refreshRoutes();
      const call = async () => {
        const res = await fetch(`${route.gatewayBaseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ten.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 }),
        });
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        return res.headers.get('x-nexus-served-by');
      };
      // A failure opens the breaker (the healthy target answers); the next call skips the flaky target.
      expect(await call()).toBe(ten.connectionId);
      expect(await call()).toBe(ten.connectionId);
      expect(flaky.calls).toBe(1);
      const unhealthy = await acceptedOf(r, 'provider_connection.unhealthy', 1);
      expect(unhealthy[0]!.verified!.data).toEqual({ providerConnectionId: flakyId, source: 'breaker', routeId: route.id });
      // After the cooldown a call probes the target, which answers now: the breaker closes.
      flaky.mode = 'ok';
      await settle(350);
      expect(await call()).toBe(flakyId);
      const recovered = await acceptedOf(r, 'provider_connection.recovered', 1);
      expect(recovered[0]!.verified!.data).toEqual({ providerConnectionId: flakyId, source: 'breaker', routeId: route.id });
      // Signed for this endpoint: its headers, and a timestamp the receiver accepted.
      for (const d of [...unhealthy, ...recovered]) {
        expect(d.headers['webhook-signature']).toMatch(/^v1,/);
        expect(d.headers['webhook-id']).toBe(d.id);
      }
      await settle();
      expect(acceptedMessages(r).map((d) => d.verified!.type)).toEqual(['provider_connection.unhealthy', 'provider_connection.recovered']);
    } finally {
      await flaky.close();
    }
  });

  it('quota.threshold_crossed from gateway calls: once per threshold, not again while usage stays over it', async () => {
    const ten = await tenant({ quotaUnits: 1000n });
    const r = await receiver();
    const endpoint = await endpointFor(t, ten.workspaceId, r, ['quota.threshold_crossed']);
    const call = (usage: string) =>
      openAiFor(ten, { 'x-fake-usage': usage }).chat.completions.create({ model: 'gpt-test', messages: [], max_tokens: 5 });
    // x-fake-usage: input, output, cached tokens; 1 unit per input token.
    await call('790,0,0'); // 790: under 80%
    await call('20,0,0'); // 810: crosses 80%
    await call('30,0,0'); // 840: still over 80%, under 100%
    await call('10,0,0'); // 850
    await t.nexus.gateway.drain();
    const eighty = await acceptedOf(r, 'quota.threshold_crossed', 1);
    expect(eighty[0]!.verified!.data).toMatchObject({ workspaceAccessId: ten.accessId, thresholdPercent: 80, grantedUnits: '1000' });
    // The period's units once the settlement that crossed it committed: the recorder may settle the later calls with it.
    expect(['810', '840', '850']).toContain(eighty[0]!.verified!.data['consumedUnits']);
    await call('150,0,0'); // 1000: crosses 100%
    await t.nexus.gateway.drain();
    const all = await acceptedOf(r, 'quota.threshold_crossed', 2);
    expect(all.map((d) => d.verified!.data['thresholdPercent'])).toEqual([80, 100]);
    await settle();
    expect(acceptedMessages(r)).toHaveLength(2);
    expect((await messagesOf(t, endpoint.id)).map((m) => m.status)).toEqual(['DELIVERED', 'DELIVERED']);
  });
});

describe('thresholds set on the strategy or the plan', () => {
  const base: CreateQuotaStrategyDto = {
    key: 'thresholds',
    resetInterval: 'MONTH',
    quotaUnits: '1000',
    inputMultiplierPpm: '1000000',
    outputMultiplierPpm: '1000000',
    cachedInputMultiplierPpm: '1000000',
    maxOutputTokens: 100,
  };

  it('a strategy takes its own thresholds, checked and kept in ascending order', async () => {
    const ten = await tenant();
    const made = await createQuotaStrategy({
      client: t.client,
      path: { workspaceId: ten.workspaceId },
      body: { ...base, eventThresholds: [90, 50] },
    });
    expect(made.response.status).toBe(201);
    expect(made.data!.eventThresholds).toEqual([50, 90]);
    const bad = await createQuotaStrategy({
      client: t.client,
      path: { workspaceId: ten.workspaceId },
      body: { ...base, eventThresholds: [0] },
    });
    expect(bad.response.status).toBe(400);
    expect(bad.error).toMatchObject({ error: { code: 'invalid_parameter', param: expect.stringMatching(/^eventThresholds/) } });
  });

  it('a plan’s are set at its creation and on a DRAFT plan, read back in ascending order, and removed with null', async () => {
    const ten = await tenant();
    const made = await createPlan({
      client: t.client,
      path: { workspaceId: ten.workspaceId },
      body: { key: 'alerts', name: 'Alerts', billingInterval: 'MONTH', eventThresholds: [90, 10] },
    });
    expect(made.response.status).toBe(201);
    expect(made.data!.eventThresholds).toEqual([10, 90]);
    const planId = made.data!.id;
    expect((await getPlan({ client: t.client, path: { planId } })).data!.eventThresholds).toEqual([10, 90]);
    const listed = await listPlans({ client: t.client, path: { workspaceId: ten.workspaceId }, query: { key: 'alerts' } });
    expect(listed.data!.map((p) => p.eventThresholds)).toEqual([[10, 90]]);

    const changed = await updatePlan({ client: t.client, path: { planId }, body: { eventThresholds: [30] } });
    expect(changed.data!.eventThresholds).toEqual([30]);
    const untouched = await updatePlan({ client: t.client, path: { planId }, body: { name: 'Alerts 2' } });
    expect(untouched.data!.eventThresholds).toEqual([30]);
    const removed = await updatePlan({ client: t.client, path: { planId }, body: { eventThresholds: null } });
    expect(removed.response.status).toBe(200);
    expect(removed.data).not.toHaveProperty('eventThresholds');
    // The tenant's plan sets none: 80 and 100 apply, and it says nothing.
    expect((await getPlan({ client: t.client, path: { planId: ten.planId } })).data).not.toHaveProperty('eventThresholds');
  });

  describe.each([
    ['none', []],
    ['six', [10, 20, 30, 40, 50, 60]],
    ['zero', [0]],
    ['over 1000', [1001]],
    ['a fraction', [50.5]],
    ['one twice', [50, 50]],
    ['not a number', ['80']],
  ])('a plan’s thresholds: %s, refused with 400', (_name, eventThresholds) => {
    it('naming the field, on create and update, and change nothing', async () => {
      const ten = await tenant();
      const made = await createPlan({
        client: t.client,
        path: { workspaceId: ten.workspaceId },
        body: { key: 'bad-thresholds', name: 'Bad', billingInterval: 'MONTH', eventThresholds: eventThresholds as number[] },
      });
      expect(made.response.status).toBe(400);
      expect(made.error).toMatchObject({ error: { code: 'invalid_parameter', param: expect.stringMatching(/^eventThresholds/) } });
      const listed = await listPlans({ client: t.client, path: { workspaceId: ten.workspaceId }, query: { key: 'bad-thresholds' } });
      expect(listed.data).toEqual([]);

      const draft = await createPlan({
        client: t.client,
        path: { workspaceId: ten.workspaceId },
        body: { key: 'draft', name: 'Draft', billingInterval: 'MONTH', eventThresholds: [80] },
      });
      const updated = await updatePlan({
        client: t.client,
        path: { planId: draft.data!.id },
        body: { eventThresholds: eventThresholds as number[] },
      });
      expect(updated.response.status).toBe(400);
      expect(updated.error).toMatchObject({ error: { code: 'invalid_parameter', param: expect.stringMatching(/^eventThresholds/) } });
      expect((await getPlan({ client: t.client, path: { planId: draft.data!.id } })).data!.eventThresholds).toEqual([80]);
    });
  });

  it('a plan with [50] raises a 50% event, and no 80% or 100% one, where its strategy sets none', async () => {
    const ten = await tenant({ quotaUnits: 1000n, eventThresholds: [50] });
    const r = await receiver();
    await endpointFor(t, ten.workspaceId, r, ['quota.threshold_crossed']);
    const call = (usage: string) =>
      openAiFor(ten, { 'x-fake-usage': usage }).chat.completions.create({ model: 'gpt-test', messages: [], max_tokens: 5 });
    await call('900,0,0'); // 900: past 50% (and 80%)
    await t.nexus.gateway.drain();
    const crossed = await acceptedOf(r, 'quota.threshold_crossed', 1);
    expect(crossed[0]!.verified!.data).toMatchObject({ workspaceAccessId: ten.accessId, thresholdPercent: 50, consumedUnits: '900' });
    await call('150,0,0'); // 1050: past 100%
    await t.nexus.gateway.drain();
    await settle();
    expect(r.accepted().map((d) => d.verified!.data['thresholdPercent'])).toEqual([50]);
  });

  it('the strategy’s thresholds win over the plan’s', async () => {
    const ten = await tenant();
    const strategy = await createQuotaStrategy({
      client: t.client,
      path: { workspaceId: ten.workspaceId },
      body: { ...base, key: 'own-thresholds', eventThresholds: [20] },
    });
    expect(strategy.response.status).toBe(201);
    const plan = await createPlan({
      client: t.client,
      path: { workspaceId: ten.workspaceId },
      body: { key: 'both', name: 'Both', billingInterval: 'MONTH', eventThresholds: [50] },
    });
    expect((await publishPlanStrategy({ client: t.client, path: { strategyId: strategy.data!.id } })).response.status).toBe(200);
    const bound = await bindPlanStrategy({
      client: t.client,
      path: { planId: plan.data!.id },
      body: { strategyId: strategy.data!.id, effectiveFrom: '2020-01-01T00:00:00Z' },
    });
    expect(bound.response.status).toBe(201);
    expect((await publishPlan({ client: t.client, path: { planId: plan.data!.id } })).response.status).toBe(200);
    const user = await provisionWorkspaceUser({
      client: t.client,
      path: { workspaceId: ten.workspaceId },
      body: { externalUserId: 'both-user', email: 'both@example.com', planId: plan.data!.id, issueInferenceKey: true },
    });
    expect(user.response.status).toBe(201);
    const onBoth = { ...ten, accessId: user.data!.access.id, apiKey: user.data!.apiKey! };

    const r = await receiver();
    await endpointFor(t, ten.workspaceId, r, ['quota.threshold_crossed']);
    await openAiFor(onBoth, { 'x-fake-usage': '600,0,0' }).chat.completions.create({ model: 'gpt-test', messages: [], max_tokens: 5 });
    await t.nexus.gateway.drain();
    const crossed = await acceptedOf(r, 'quota.threshold_crossed', 1);
    expect(crossed[0]!.verified!.data).toMatchObject({ workspaceAccessId: onBoth.accessId, thresholdPercent: 20, consumedUnits: '600' });
    await settle();
    expect(r.accepted()).toHaveLength(1);
  });
});

describe('a call its process did not live to record', () => {
  it('is charged by the sweeper’s reclaim, which raises the thresholds the charge crosses, once', async () => {
    const ten = await tenant({ quotaUnits: 1000n, eventThresholds: [1] });
    const r = await receiver();
    await endpointFor(t, ten.workspaceId, r, ['quota.threshold_crossed']);
    // The answer starts and never ends; what the call would be charged, were its process to die, is written on its
    // lease (lease_calls) within a snapshot: its input, some 100 tokens, is past 1% of 1000.
    const cut = new AbortController();
    const res = await fetch(`${ten.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ten.apiKey}`, 'content-type': 'application/json', 'x-fake-fault': 'stall' },
      body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'word '.repeat(100) }], max_tokens: 10, stream: true }),
      signal: cut.signal,
    });
    expect(res.status).toBe(200);
    const leaseIds = t.database.db('quota_leases').select('id').where({ workspace_access_id: ten.accessId });
    await until(async () => (await t.database.db('lease_calls').whereIn('lease_id', leaseIds)).length === 1);
    // As if its process had died: another process's sweeper reclaims the lease, and records and charges the call.
    await reclaimLease(t, ten.accessId);
    cut.abort();
    await t.nexus.gateway.drain();

    const invocations = await t.database.db('invocations').where({ workspace_access_id: ten.accessId });
    expect(invocations.map((i) => [i.status, i.error_code])).toEqual([['FAILED', 'gateway_lost']]);
    const units = BigInt(invocations[0].quota_units);
    expect(units).toBeGreaterThanOrEqual(10n);
    const crossed = await acceptedOf(r, 'quota.threshold_crossed', 1);
    expect(crossed[0]!.verified!.data).toMatchObject({
      workspaceAccessId: ten.accessId,
      thresholdPercent: 1,
      grantedUnits: '1000',
      consumedUnits: `${units}`,
    });
    await settle();
    expect(r.accepted()).toHaveLength(1);
    expect(await periodOf(t, ten.accessId)).toMatchObject({ reserved: 0n, consumed: units });
  });
});

describe('delivery', () => {
  it('a receiver down for a while gets every message once it returns, each with its one id', async () => {
    const ten = await tenant();
    const r = await receiver();
    const endpoint = await endpointFor(t, ten.workspaceId, r);
    let down = true;
    r.answer = () => (down ? 503 : 200);
    const sent: string[] = [];
    for (let i = 0; i < 3; i++)
      sent.push((await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } })).data!.id);
    await until(async () => r.deliveries.length >= 6);
    down = false;
    await until(async () => r.accepted().length >= 3);
    await settle();
    const accepted = r.accepted().map((d) => d.id);
    expect(new Set(accepted)).toEqual(new Set(sent));
    expect(accepted).toHaveLength(3);
    // Every attempt of a message carried its id: the receiver saw no other id.
    expect(new Set(r.deliveries.map((d) => d.id))).toEqual(new Set(sent));
    // The receiver answers before Nexus writes the attempt down: the last one's row follows a moment later (past a
    // fixed wait under load).
    await until(async () => (await messagesOf(t, endpoint.id)).every((m) => m.status !== 'PENDING'), 5_000);
    const messages = await messagesOf(t, endpoint.id);
    expect(messages.every((m) => m.status === 'DELIVERED' && m.attempts.at(-1)!.outcome === 'SUCCEEDED')).toBe(true);
    expect(messages.some((m) => m.attempts.some((a) => a.outcome === 'FAILED' && a.responseStatus === 503))).toBe(true);
  });

  it('a success makes the endpoint’s messages waiting for a later retry due at once: they follow, oldest first', async () => {
    // Its own database, and a retry an hour after a failure: only a success can bring the waiting ones forward.
    const hourly = await startTestApp({ env: { ...FAST, NEXUS_EVENTS_RETRY_SCHEDULE_MS: '0,3600000,3600000,3600000' } });
    try {
      const ten = await tenant({}, hourly);
      const r = await receiver();
      const endpoint = await endpointFor(hourly, ten.workspaceId, r);
      r.answer = () => 503;
      const waiting: string[] = [];
      for (let i = 0; i < 4; i++) {
        waiting.push((await sendTestWebhookEvent({ client: hourly.client, path: { webhookEndpointId: endpoint.id } })).data!.id);
      }
      await until(async () => (await messagesOf(hourly, endpoint.id)).every((m) => m.attemptCount === 1 && m.status === 'PENDING'));
      for (const m of await messagesOf(hourly, endpoint.id)) {
        expect(Date.parse(m.nextAttemptAt!)).toBeGreaterThan(Date.now() + 3_000_000);
      }
      // The receiver is back; the next message goes at once, and is accepted.
      r.answer = () => 200;
      const next = await sendTestWebhookEvent({ client: hourly.client, path: { webhookEndpointId: endpoint.id } });
      await until(async () => acceptedMessages(r).length === 5, 5_000);
      expect(acceptedMessages(r).map((d) => d.id)).toEqual([next.data!.id, ...waiting]);
      // The receiver answers before Nexus writes the attempt down: the last one's row follows a moment later.
      await until(async () => (await messagesOf(hourly, endpoint.id)).every((m) => m.status !== 'PENDING'), 5_000);
      const messages = await messagesOf(hourly, endpoint.id);
      expect(messages.map((m) => [m.status, m.attemptCount])).toEqual([['DELIVERED', 1], ...waiting.map(() => ['DELIVERED', 2])]);
    } finally {
      await hourly.close();
    }
  });

  it('a 3xx is a failure (the redirect is not followed); a hanging receiver is cut at the timeout', async () => {
    const ten = await tenant();
    const target = await receiver();
    const r = await receiver();
    const endpoint = await endpointFor(t, ten.workspaceId, r);
    r.answer = (_d, res) => {
      res.writeHead(302, { location: target.url });
      return 302;
    };
    const sent = await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    await until(async () => r.deliveries.length >= 2);
    expect(target.deliveries).toHaveLength(0);
    const redirected = await getWebhookMessage({ client: t.client, path: { webhookEndpointId: endpoint.id, messageId: sent.data!.id } });
    expect(redirected.data!.attempts[0]).toMatchObject({ outcome: 'FAILED', responseStatus: 302 });

    r.answer = () => null;
    const hung = await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    // The Admin API answers at once, whatever the receiver does.
    const started = Date.now();
    expect((await getWebhookEndpoint({ client: t.client, path: { webhookEndpointId: endpoint.id } })).response.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(400);
    await until(async () => {
      const m = await getWebhookMessage({ client: t.client, path: { webhookEndpointId: endpoint.id, messageId: hung.data!.id } });
      return m.data!.attempts.length > 0;
    });
    const cut = await getWebhookMessage({ client: t.client, path: { webhookEndpointId: endpoint.id, messageId: hung.data!.id } });
    expect(cut.data!.attempts[0]).toMatchObject({ outcome: 'FAILED', error: 'no answer within 500 ms' });
    expect(cut.data!.attempts[0]!.latencyMs).toBeGreaterThanOrEqual(450);
  });

  it('honours Retry-After on 429', async () => {
    const ten = await tenant();
    const r = await receiver();
    const endpoint = await endpointFor(t, ten.workspaceId, r);
    r.answer = (_d, res) => {
      if (r.deliveries.length > 0) return 200;
      res.writeHead(429, { 'retry-after': '1' });
      return 429;
    };
    await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    await acceptedOf(r, 'webhook.test', 1, 5000);
    const [first, second] = r.deliveries;
    const gap = Number(second!.headers['webhook-timestamp']) - Number(first!.headers['webhook-timestamp']);
    expect(gap).toBeGreaterThanOrEqual(1);
  });

  it('410 stops the retries and disables the endpoint, with an audit entry and a webhook_endpoint.disabled event', async () => {
    const ten = await tenant();
    const gone = await receiver();
    const watcher = await receiver();
    const endpoint = await endpointFor(t, ten.workspaceId, gone);
    await endpointFor(t, ten.workspaceId, watcher, ['webhook_endpoint.disabled']);
    gone.answer = () => 410;
    await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    const told = await acceptedOf(watcher, 'webhook_endpoint.disabled', 1);
    expect(told[0]!.verified!.data).toMatchObject({ webhookEndpointId: endpoint.id, reason: 'gone' });
    await settle();
    expect(gone.deliveries).toHaveLength(1);
    const after = await getWebhookEndpoint({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    expect(after.data).toMatchObject({ status: 'DISABLED', disabledReason: 'gone' });
    const audit = await listAuditLogs({ client: t.client, path: { workspaceId: ten.workspaceId }, query: { limit: 100 } });
    expect(audit.data!.find((e) => e.action === 'webhook_endpoint.disabled' && e.resourceId === endpoint.id)).toBeTruthy();
  });

  it('an endpoint failing for its whole failure window is disabled (window shortened by configuration)', async () => {
    // Its own database: no other process's worker takes a turn at this endpoint.
    const short = await startTestApp({ env: { ...FAST, NEXUS_EVENTS_DISABLE_AFTER_HOURS: '0.0001' } }); // 0.36 s
    try {
      const ten = await tenant({}, short);
      const r = await receiver();
      const endpoint = await endpointFor(short, ten.workspaceId, r);
      r.answer = () => 500;
      await sendTestWebhookEvent({ client: short.client, path: { webhookEndpointId: endpoint.id } });
      await until(
        async () =>
          (await getWebhookEndpoint({ client: short.client, path: { webhookEndpointId: endpoint.id } })).data!.status === 'DISABLED',
      );
      const after = await getWebhookEndpoint({ client: short.client, path: { webhookEndpointId: endpoint.id } });
      expect(after.data).toMatchObject({ status: 'DISABLED', disabledReason: 'failing' });
      const audit = await listAuditLogs({ client: short.client, path: { workspaceId: ten.workspaceId }, query: { limit: 100 } });
      expect(audit.data!.find((e) => e.action === 'webhook_endpoint.disabled' && e.resourceId === endpoint.id)).toMatchObject({
        changes: { reason: 'failing' },
      });
      const [message] = await messagesOf(short, endpoint.id);
      expect(message!.status).toBe('FAILED');
    } finally {
      await short.close();
    }
  });
});

describe('replay', () => {
  it('replays one message with its id, and every failed one since a time', async () => {
    const ten = await tenant();
    const r = await receiver();
    const endpoint = await endpointFor(t, ten.workspaceId, r);
    const one = await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } });
    await acceptedOf(r, 'webhook.test', 1);
    await until(async () => (await messagesOf(t, endpoint.id))[0]!.status === 'DELIVERED');
    const replay = await replayWebhookMessage({ client: t.client, path: { webhookEndpointId: endpoint.id, messageId: one.data!.id } });
    expect(replay.data).toMatchObject({ accepted: true });
    const twice = await acceptedOf(r, 'webhook.test', 2);
    expect(twice.map((d) => d.id)).toEqual([one.data!.id, one.data!.id]);

    // Spent: the schedule has 8 attempts of 100 ms; the receiver refuses them all.
    const since = new Date().toISOString();
    r.answer = () => 500;
    const failed: string[] = [];
    for (let i = 0; i < 2; i++)
      failed.push((await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: endpoint.id } })).data!.id);
    await until(async () => {
      const messages = await listWebhookMessages({
        client: t.client,
        path: { webhookEndpointId: endpoint.id },
        query: { status: 'FAILED' },
      });
      return messages.data!.length === 2;
    }, 10_000);
    r.answer = () => 200;
    const res = await replayFailedWebhookMessages({ client: t.client, path: { webhookEndpointId: endpoint.id }, body: { since } });
    expect(res.data).toEqual({ replayed: 2 });
    await until(async () => failed.every((id) => r.accepted().some((d) => d.id === id)));
    const unknown = await replayWebhookMessage({
      client: t.client,
      path: { webhookEndpointId: endpoint.id, messageId: '01900000-0000-7000-8000-000000000000' },
    });
    expect(unknown.response.status).toBe(404);
  });
});

describe('two processes sending to one endpoint', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('a success on one never makes due a message the other is still sending: that one is sent once', async () => {
    const first = await startTestApp({ database, env: { ...FAST, NEXUS_EVENTS_TIMEOUT_MS: '20000' } });
    const ten = await tenant({}, first);
    const r = await receiver();
    const endpoint = await endpointFor(first, ten.workspaceId, r);
    const held = (await sendTestWebhookEvent({ client: first.client, path: { webhookEndpointId: endpoint.id } })).data!.id;
    // The receiver holds this one unanswered: the first process waits on it, under its claim.
    r.answer = (d) => (d.id === held ? null : 200);
    await until(async () => r.deliveries.some((d) => d.id === held));
    const second = await startTestApp({ database, env: FAST });
    try {
      const next = await sendTestWebhookEvent({ client: second.client, path: { webhookEndpointId: endpoint.id } });
      await until(async () => r.accepted().some((d) => d.id === next.data!.id));
      await settle(500);
      expect(r.deliveries.filter((d) => d.id === held)).toHaveLength(1);
    } finally {
      await second.close();
      await first.close();
    }
  });
});

describe('a process that stops between the change and the delivery', () => {
  // Processes on a database of their own, so that no other worker takes a turn.
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('loses nothing: another process delivers what it wrote', async () => {
    // This one looks for due messages once a minute: it commits the change, and stops before it sends.
    const first = await startTestApp({ database, env: { ...FAST, NEXUS_EVENTS_POLL_MS: '60000' } });
    const ten = await tenant({}, first);
    const r = await receiver();
    await endpointFor(first, ten.workspaceId, r, ['access.status_changed']);
    expect((await suspendWorkspaceAccess({ client: first.client, path: { accessId: ten.accessId } })).response.status).toBe(200);
    await settle(100);
    await first.close();
    expect(r.deliveries).toHaveLength(0);
    const second = await startTestApp({ database, env: FAST });
    try {
      const [delivery] = await acceptedOf(r, 'access.status_changed', 1);
      expect(delivery!.verified!.data).toMatchObject({ workspaceAccessId: ten.accessId, from: 'ACTIVE', to: 'SUSPENDED', reason: 'admin' });
      await settle();
      expect(r.deliveries).toHaveLength(1);
    } finally {
      await second.close();
    }
  });

  it('a process that stops gives back the claims of the sends it cuts: another sends them at once, with the same id', async () => {
    const first = await startTestApp({ database, env: { ...FAST, NEXUS_EVENTS_CLAIM_MS: '60000', NEXUS_EVENTS_TIMEOUT_MS: '30000' } });
    const ten = await tenant({}, first);
    const r = await receiver();
    r.answer = () => null; // hangs: the first process stops while it waits
    const endpoint = await endpointFor(first, ten.workspaceId, r);
    const sent = await sendTestWebhookEvent({ client: first.client, path: { webhookEndpointId: endpoint.id } });
    await until(async () => r.deliveries.length >= 1);
    await first.close();
    r.answer = () => 200;
    const second = await startTestApp({ database, env: FAST });
    try {
      // Not a minute later, when the claim would have run out: at the second process's first rounds.
      const [delivery] = await acceptedOf(r, 'webhook.test', 1, 5_000);
      expect(delivery!.id).toBe(sent.data!.id);
      expect(r.deliveries.map((d) => d.id)).toEqual([sent.data!.id, sent.data!.id]);
    } finally {
      await second.close();
    }
  });

  it('a message claimed by a process that died mid-delivery is sent by another once the claim runs out, with the same id', async () => {
    // This one looks for due messages once a minute: the message it writes is claimed below as a process that then
    // died would have left it (it cannot give the claim back).
    const first = await startTestApp({ database, env: { ...FAST, NEXUS_EVENTS_POLL_MS: '60000' } });
    const ten = await tenant({}, first);
    const r = await receiver();
    const endpoint = await endpointFor(first, ten.workspaceId, r);
    const sent = await sendTestWebhookEvent({ client: first.client, path: { webhookEndpointId: endpoint.id } });
    const claim = () => database.db('webhook_messages').where({ event_id: sent.data!.id });
    await claim().update({ next_attempt_at: new Date(Date.now() + 60_000) });
    await first.close();
    const second = await startTestApp({ database, env: FAST });
    try {
      // The claim stands (a minute here): no one sends it meanwhile.
      await settle();
      expect(r.deliveries).toHaveLength(0);
      // As the claim runs out:
      await claim().update({ next_attempt_at: new Date(Date.now() - 1) });
      const [delivery] = await acceptedOf(r, 'webhook.test', 1);
      expect(delivery!.id).toBe(sent.data!.id);
      await settle();
      expect(r.deliveries).toHaveLength(1);
    } finally {
      await second.close();
    }
  });
});

/**
 * A provider connection whose upstream does not enforce the output cap it is sent (`enforcesOutputCap: false`,
 * docs/reliability.md "Connections that do not enforce the cap"): its metered calls are admitted at the most
 * output their plan lets a call ask for (the strategy's maxOutputTokens, times the choices), not at the request's
 * cap. Through the Admin API (the field, its default, its update and audit) and the gateway (a call the quota
 * covers at its own cap but not at the plan's is refused 429 before the upstream is called).
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProviderConnection, createRoute, getProviderConnection, updateProviderConnection } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { chatInputBound, createTenant, gatewayFetch, openAiFor, periodOf } from './gateway-support.js';

const KEY = testProviderKey('uncapped');
/** The plan lets a call ask for 4,000 output tokens; the quota is 1,000 units (one a token). */
const PLAN_MAX = 4000;
const GRANT = 1000n;

let t: TestApp;
let up: FakeUpstream;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const tenantOf = () =>
  createTenant(t, {
    baseUrl: up.url,
    providerKey: KEY,
    quotaUnits: GRANT,
    maxOutputTokens: PLAN_MAX,
    outputPpm: 1_000_000n,
    cachedPpm: 1_000_000n,
  });

const body = { model: 'gpt-self-hosted', messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 20 };

async function setEnforces(connectionId: string, enforcesOutputCap: boolean) {
  const res = await updateProviderConnection({
    client: t.client,
    path: { providerConnectionId: connectionId },
    body: { enforcesOutputCap },
  });
  expect(res.response.status).toBe(200);
  expect(res.data!.enforcesOutputCap).toBe(enforcesOutputCap);
  return res;
}

describe('enforcesOutputCap through the Admin API', () => {
  it('is true by default, set at creation or by an update, audited, and refused when not a boolean', async () => {
    const tenant = await tenantOf();
    const made = await getProviderConnection({ client: t.client, path: { providerConnectionId: tenant.connectionId } });
    expect(made.data!.enforcesOutputCap).toBe(true);

    const created = await createProviderConnection({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'self-hosted', protocolProfile: 'openai', baseUrl: up.url, apiKey: KEY, enforcesOutputCap: false },
    });
    expect(created.response.status).toBe(201);
    expect(created.data!.enforcesOutputCap).toBe(false);
    const audited = await t.database
      .db('audit_logs')
      .where({ resource_id: created.data!.id, action: 'provider_connection.created' })
      .first();
    expect(audited.changes).toMatchObject({ enforcesOutputCap: false });

    const updated = await setEnforces(created.data!.id, true);
    const update = await t.database
      .db('audit_logs')
      .where({ request_id: updated.response.headers.get('x-request-id'), action: 'provider_connection.updated' })
      .first();
    expect(update.changes).toEqual({ enforcesOutputCap: true });
    expect(
      (await getProviderConnection({ client: t.client, path: { providerConnectionId: created.data!.id } })).data!.enforcesOutputCap,
    ).toBe(true);

    const bad = await t.fetch(`${t.url}/admin/v1/provider-connections/${created.data!.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ enforcesOutputCap: 'no' }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string; param: string } }).error).toMatchObject({ param: 'enforcesOutputCap' });
  });
});

describe('a call on a connection that does not enforce the output cap', () => {
  it("reserves the plan's maxOutputTokens: refused 429 before the upstream is called when the quota covers only its own cap", async () => {
    const tenant = await tenantOf();
    const input = chatInputBound(JSON.stringify(body));
    // The request's own bound fits the quota; the plan's does not.
    expect(input + 20n).toBeLessThan(GRANT);
    expect(input + BigInt(PLAN_MAX)).toBeGreaterThan(GRANT);
    // Enforcing (the default): admitted at its own cap, answered.
    const answered = await openAiFor(tenant).chat.completions.create(body);
    expect(answered.usage?.completion_tokens).toBe(5);

    await setEnforces(tenant.connectionId, false);
    const seen = up.requests.length;
    const refused = await openAiFor(tenant)
      .chat.completions.create(body)
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    const error = refused as InstanceType<typeof OpenAI.RateLimitError>;
    expect(error.code).toBe('quota_insufficient');
    expect(error.message).toContain(`may need up to ${input + BigInt(PLAN_MAX)} units`);
    expect(up.requests.length).toBe(seen);
    await t.nexus.gateway.drain();
    const [last] = await t.database
      .db('invocations')
      .where({ workspace_access_id: tenant.accessId })
      .orderBy('started_at', 'desc')
      .limit(1);
    expect(last).toMatchObject({ status: 'REJECTED', error_code: 'quota_insufficient' });

    // A call whose plan-wide bound fits is admitted, and charged what it used, as on any connection.
    const fits = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      quotaUnits: 10_000n,
      maxOutputTokens: PLAN_MAX,
      outputPpm: 1_000_000n,
    });
    await setEnforces(fits.connectionId, false);
    const ok = await openAiFor(fits).chat.completions.create(body);
    expect(ok.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 5 });
    await t.nexus.gateway.drain();
    expect(await periodOf(t, fits.accessId)).toMatchObject({ consumed: 15n, reserved: 0n });
  });

  it('counts each choice asked for, and leaves embeddings (no output) at their bound', async () => {
    const tenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      quotaUnits: 10_000n,
      maxOutputTokens: PLAN_MAX,
      outputPpm: 1_000_000n,
    });
    await setEnforces(tenant.connectionId, false);
    // Three choices at the plan's 4,000: 12,000 output tokens, more than the 10,000 units.
    const refused = await openAiFor(tenant)
      .chat.completions.create({ ...body, n: 3 })
      .catch((err: unknown) => err);
    expect((refused as { status?: number }).status).toBe(429);
    const embedded = await openAiFor(tenant).embeddings.create({ model: 'emb', input: 'hi' });
    expect(embedded.usage.prompt_tokens).toBe(10);
  });

  it('on a route: admitted at the plan-wide bound when one of its targets does not enforce the cap', async () => {
    const tenant = await tenantOf();
    const other = await createProviderConnection({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'self-hosted', protocolProfile: 'openai', baseUrl: up.url, apiKey: KEY, enforcesOutputCap: false },
    });
    const route = await createRoute({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        name: 'mixed',
        strategy: 'fallback',
        targets: [{ providerConnectionId: tenant.connectionId }, { providerConnectionId: other.data!.id }],
      },
    });
    expect(route.response.status).toBe(201);
    await t.nexus.gateway.refreshRoutes();
    const seen = up.requests.length;
    const res = await gatewayFetch()(`${route.data!.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(429);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('quota_insufficient');
    expect(up.requests.length).toBe(seen);
  });
});

/**
 * Every call can be found: a call its access refuses is recorded REJECTED with its reason and message (a 401 of an
 * unknown key is not), listInvocations finds a call by request id, invocation id, an end user's email or external
 * id, and by the beginning of its model's name, each row naming its end user; exportInvocations takes the same
 * filters. Through HTTP, with the official `openai` SDK as the caller.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import {
  getInvocation,
  getUsageSummary,
  listInvocations,
  revokeInferenceKey,
  suspendWorkspaceAccess,
  updateProviderConnection,
} from '../support/sdk.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, openAiFor, type Tenant } from '../gateway/gateway-support.js';

let t: TestApp;
let up: FakeUpstream;
const KEY = `${SECRET_MARKER}-search-openai-0123456789`;
const CACHE_TTL_MS = 100;

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_AUTH_CACHE_TTL_MS: String(CACHE_TTL_MS) } });
  up = await startOpenAiUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const chat = (client: OpenAI, model = 'gpt-4o') =>
  client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });

/** The error a call was refused with (its status and Error body's code), and its request id. */
async function refusal(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (err) {
    if (err instanceof OpenAI.APIError) return { status: err.status, code: err.code, requestId: err.headers?.get('x-nexus-request-id') };
    throw err;
  }
  throw new Error('the call was not refused');
}

async function list(workspaceId: string, query: Record<string, string | number>) {
  const res = await listInvocations({ client: t.client, path: { workspaceId }, query });
  expect(res.response.status).toBe(200);
  return res.data!;
}

describe('refused calls are recorded', () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      users: 2,
      quotaUnits: 200n,
      allowedModels: ['gpt-4o', 'gpt-4o-mini'],
    });
  });

  it("a suspended access's 403 becomes a REJECTED invocation with its code and message, named by its request id", async () => {
    const [, other] = tenant.users;
    await suspendWorkspaceAccess({ client: t.client, path: { accessId: other!.accessId } });
    await new Promise((r) => setTimeout(r, CACHE_TTL_MS + 50));
    const refused = await refusal(chat(openAiFor({ ...tenant, ...other! })));
    expect(refused).toMatchObject({ status: 403, code: 'access_suspended' });
    await t.nexus.gateway.drain();
    const [row, ...more] = await list(tenant.workspaceId, { q: refused.requestId! });
    expect(more).toEqual([]);
    expect(row).toMatchObject({
      requestId: refused.requestId,
      workspaceAccessId: other!.accessId,
      status: 'REJECTED',
      errorCode: 'access_suspended',
      errorMessage: 'The workspace access is suspended',
      endpoint: 'v1/chat/completions',
      method: 'POST',
      inferenceKeyId: other!.apiKeyId,
      quotaUnits: '0',
    });
    expect(row!.user).toMatchObject({
      email: expect.stringMatching(/-1@example\.com$/),
      externalUserId: expect.stringMatching(/-user-1$/),
    });
    // Counted in usage: the summary by access has the refused call in its bucket.
    const summary = await getUsageSummary({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { groupBy: 'access' } });
    expect(summary.response.status).toBe(200);
    const buckets = summary.data!.buckets.filter((b) => b.key === other!.accessId);
    expect(buckets.reduce((n, b) => n + b.refusedCalls, 0)).toBe(1);
    expect(buckets.reduce((n, b) => n + b.calls, 0)).toBe(1);
  });

  it('a model the plan does not allow (403) and a quota refusal (429) are recorded with their reasons', async () => {
    const client = openAiFor(tenant);
    expect(await refusal(chat(client, 'o3'))).toMatchObject({ status: 403, code: 'model_not_allowed' });
    // 200 units: a 10-token cap on gpt-4o's bound of input + 2 x output fits; 5000 tokens do not.
    const big = client.chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'x'.repeat(2000) }],
      max_tokens: 500,
    });
    expect(await refusal(big)).toMatchObject({ status: 429, code: 'quota_insufficient' });
    await t.nexus.gateway.drain();
    const rejected = await list(tenant.workspaceId, { workspaceAccessId: tenant.accessId, status: 'REJECTED' });
    expect(rejected.map((r) => r.errorCode).sort()).toEqual(['model_not_allowed', 'quota_insufficient']);
    expect(rejected.find((r) => r.errorCode === 'model_not_allowed')).toMatchObject({
      requestedModel: 'o3',
      errorMessage: "The model 'o3' is not allowed on this plan",
    });
  });

  it('a 401 for an unknown key is not recorded, but counted by its reason', async () => {
    const before = await list(tenant.workspaceId, { limit: 100 });
    const refused = await refusal(chat(openAiFor({ ...tenant, apiKey: 'nx-unknown-key-0000000000000000' })));
    expect(refused.status).toBe(401);
    await t.nexus.gateway.drain();
    expect(await list(tenant.workspaceId, { limit: 100 })).toEqual(before);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(/nexus_gateway_refusals_total\{reason="invalid_inference_key"\} [1-9]/);
    // The suspended access's refusal is counted as well, now that it is recorded.
    expect(metrics).toMatch(/nexus_gateway_refusals_total\{reason="access_suspended"\} [1-9]/);
  });
});

describe('refusals of a connection and of a key', () => {
  it("a suspended connection's 403 is recorded REJECTED; a revoked key's 401 is not recorded", async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, users: 2 });
    const [, second] = tenant.users;
    await revokeInferenceKey({ client: t.client, path: { accessId: second!.accessId, keyId: second!.apiKeyId } });
    await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: tenant.connectionId },
      body: { status: 'SUSPENDED' },
    });
    await new Promise((r) => setTimeout(r, CACHE_TTL_MS + 50));
    const suspended = await refusal(chat(openAiFor(tenant)));
    expect(suspended).toMatchObject({ status: 403, code: 'connection_suspended' });
    expect((await refusal(chat(openAiFor({ ...tenant, ...second! })))).status).toBe(401);
    await t.nexus.gateway.drain();
    const rows = await list(tenant.workspaceId, {});
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      requestId: suspended.requestId,
      status: 'REJECTED',
      errorCode: 'connection_suspended',
      providerConnectionId: tenant.connectionId,
      errorMessage: 'The provider connection is suspended',
    });
  });
});

describe('an upstream error is recorded with its message', () => {
  it("an upstream 500's own error message is on the invocation", async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const refused = await refusal(chat(openAiFor(tenant, { 'x-fake-fault': 'status-500' })));
    expect(refused.status).toBe(500);
    await t.nexus.gateway.drain();
    const [row] = await list(tenant.workspaceId, { q: refused.requestId! });
    expect(row).toMatchObject({ status: 'UPSTREAM_ERROR', errorMessage: 'upstream says no' });
    const detail = await getInvocation({ client: t.client, path: { invocationId: row!.id } });
    expect(detail.data).toMatchObject({ errorMessage: 'upstream says no', attempt: { httpStatus: 500 }, user: { id: expect.any(String) } });
  });
});

describe('listInvocations finds a call', () => {
  let tenant: Tenant;
  let ids: string[];
  beforeAll(async () => {
    tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, users: 2 });
    const [first, second] = tenant.users;
    await chat(openAiFor({ ...tenant, ...first! }), 'gpt-4o');
    await chat(openAiFor({ ...tenant, ...first! }), 'gpt-4o-mini');
    await chat(openAiFor({ ...tenant, ...second! }), 'gpt-3.5-turbo');
    await t.nexus.gateway.drain();
    ids = (await list(tenant.workspaceId, {})).map((r) => r.id);
    expect(ids).toHaveLength(3);
  });

  it('by an end user email (any case) or external id, each row naming its user, tokens and endpoint', async () => {
    const all = await list(tenant.workspaceId, {});
    const email = all.find((r) => r.workspaceAccessId === tenant.users[0]!.accessId)!.user!.email;
    const byEmail = await list(tenant.workspaceId, { q: `  ${email.toUpperCase()} ` });
    expect(byEmail.map((r) => r.requestedModel)).toEqual(['gpt-4o-mini', 'gpt-4o']);
    expect(byEmail[0]).toMatchObject({
      endpoint: 'v1/chat/completions',
      streamed: false,
      inputTokens: expect.any(String),
      outputTokens: expect.any(String),
    });
    const external = all.find((r) => r.workspaceAccessId === tenant.users[1]!.accessId)!.user!.externalUserId;
    expect((await list(tenant.workspaceId, { q: external })).map((r) => r.requestedModel)).toEqual(['gpt-3.5-turbo']);
  });

  it('by invocation id; another workspace does not see it; an unknown text finds nothing', async () => {
    expect((await list(tenant.workspaceId, { q: ids[1]! })).map((r) => r.id)).toEqual([ids[1]]);
    const other = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    expect(await list(other.workspaceId, { q: ids[1]! })).toEqual([]);
    expect(await list(tenant.workspaceId, { q: 'nobody@example.com' })).toEqual([]);
  });

  it('by the beginning of the model name, its LIKE characters taken as they are', async () => {
    expect((await list(tenant.workspaceId, { model: 'gpt-4o' })).map((r) => r.requestedModel)).toEqual(['gpt-4o-mini', 'gpt-4o']);
    expect((await list(tenant.workspaceId, { model: 'gpt-4o-mini' })).map((r) => r.requestedModel)).toEqual(['gpt-4o-mini']);
    expect(await list(tenant.workspaceId, { model: 'gpt%' })).toEqual([]);
    expect(await list(tenant.workspaceId, { model: 'gpt_4o' })).toEqual([]);
  });

  it('exportInvocations takes the same filters: the CSV is the list', async () => {
    const email = (await list(tenant.workspaceId, {})).find((r) => r.workspaceAccessId === tenant.users[0]!.accessId)!.user!.email;
    const res = await t.fetch(
      `${t.url}/admin/v1/workspaces/${tenant.workspaceId}/invocations/export?q=${encodeURIComponent(email)}&model=gpt-4o-`,
      { headers: { authorization: `Bearer ${t.config.managementKey}` } },
    );
    expect(res.status).toBe(200);
    const lines = (await res.text()).trimEnd().split('\r\n');
    const header = lines[0]!.split(',');
    expect(lines).toHaveLength(2);
    const cells = lines[1]!.split(',');
    expect(cells[header.indexOf('requested_model')]).toBe('gpt-4o-mini');
    expect(cells[header.indexOf('user_email')]).toBe(email);
    expect(cells[header.indexOf('endpoint')]).toBe('v1/chat/completions');
  });

  it('refuses a search longer than the contract allows, naming the field', async () => {
    const res = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { q: 'x'.repeat(321) } });
    expect(res.response.status).toBe(400);
    expect((res.error as { error: { param?: string } }).error.param).toBe('q');
  });
});

/**
 * Passthrough by endpoint class (docs/decisions.md "Passthrough classes"), through the official SDKs and HTTP
 * against real fake upstreams: a workspace or a plan lets through the classes of unmetered paths it lists; a
 * call of such a class is forwarded, recorded, and still counts against the plan's rate limits and the
 * workspace's budget; any other is refused with 409 `unmetered_endpoint` naming its class and what letting it
 * through opens, the upstream not called. The deprecated `allowUnmeteredPassthrough` lets every class through.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicUpstream, startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import {
  createModelPrice,
  getPlan,
  provisionWorkspaceUser,
  setPlanPassthroughClasses,
  setWorkspaceBudget,
  updatePlan,
  updateWorkspace,
} from '../support/sdk.js';
import { activePlan } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, invocationByRequestId, openAiFor, type Tenant } from './gateway-support.js';

const KEY = testProviderKey('passthrough');
let t: TestApp;
let up: FakeUpstream;
let anthropicUp: FakeUpstream;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
  anthropicUp = await startAnthropicUpstream({ apiKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
  await anthropicUp?.close();
});

interface Refusal {
  status: number;
  code: string | undefined;
  passthroughClass: string | undefined;
  message: string;
  requestId: string | null;
}

/** What an SDK call gave: the gateway's request id of its answer, or the refusal it threw. */
async function outcome(call: () => Promise<{ response: Response }>): Promise<{ ok: true; requestId: string } | ({ ok: false } & Refusal)> {
  try {
    const { response } = await call();
    expect(response.headers.get('x-nexus-metering-status')).toBe('unmetered');
    return { ok: true, requestId: response.headers.get('x-nexus-request-id')! };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    const body = err.error as { code?: string; passthrough_class?: string; message?: string } | undefined;
    return {
      ok: false,
      status: err.status!,
      code: body?.code,
      passthroughClass: body?.passthrough_class,
      message: body?.message ?? '',
      requestId: err.headers?.get('x-nexus-request-id') ?? null,
    };
  }
}

const files = (tenant: Tenant) => outcome(() => openAiFor(tenant).files.list().withResponse());
const fineTuning = (tenant: Tenant) => outcome(() => openAiFor(tenant).fineTuning.jobs.list().withResponse());
// Evals: the Batch API is metered on OpenAI connections (docs/batches.md), no longer a passthrough class there.
const evals = (tenant: Tenant) => outcome(() => openAiFor(tenant).evals.list().withResponse());

/** A raw call of the tenant's gateway (a path no SDK method names). */
const raw = (tenant: Tenant, method: string, path: string, headers: Record<string, string> = {}) =>
  gatewayFetch()(`${tenant.gatewayBaseUrl}/${path}`, { method, headers: { authorization: `Bearer ${tenant.apiKey}`, ...headers } });

describe('a workspace that lets `files` through', () => {
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      passthroughClasses: ['files'],
      rateLimits: { requestsPerMinute: 3 },
    });
  });

  it('forwards its files calls, each recorded unmetered and counted against the plan rate limits: the limit refuses the next', async () => {
    const before = up.requests.length;
    const first = await files(tenant);
    expect(first.ok).toBe(true);
    expect(up.requests.at(-1)).toMatchObject({ method: 'GET', url: '/v1/files' });
    const inv = await invocationByRequestId(t, tenant.workspaceId, (first as { requestId: string }).requestId);
    expect(inv).toMatchObject({ status: 'SUCCEEDED', method: 'GET', endpoint: 'v1/files', quotaUnits: '0' });
    // A file's own path is of the class too.
    const del = await raw(tenant, 'DELETE', 'v1/files/file-1');
    expect(del.status).toBe(200);
    expect(del.headers.get('x-nexus-metering-status')).toBe('unmetered');
    // 3 requests a minute: the third files call is the last the plan admits.
    expect((await files(tenant)).ok).toBe(true);
    expect(up.requests.length).toBe(before + 3);
    const limited = await files(tenant);
    expect(limited).toMatchObject({ ok: false, status: 429, code: 'rate_limited' });
    expect(up.requests.length).toBe(before + 3);
  });

  it('refuses fine_tuning with a 409 that names the class and warns what letting it through opens, the upstream not called', async () => {
    const other = await createTenant(t, { baseUrl: up.url, providerKey: KEY, passthroughClasses: ['files'] });
    const before = up.requests.length;
    const refused = await fineTuning(other);
    expect(refused).toMatchObject({ ok: false, status: 409, code: 'unmetered_endpoint', passthroughClass: 'fine_tuning' });
    const { message, requestId } = refused as Refusal;
    expect(message).toContain("GET v1/fine_tuning/jobs is not metered on an 'openai' connection: its passthrough class 'fine_tuning'");
    expect(message).toContain('passthroughClasses of the workspace or the plan');
    expect(message).toContain('opens fine-tuning jobs: training the provider bills');
    expect(message).toContain('on the provider account every end user of the workspace shares');
    expect(up.requests.length).toBe(before);
    const inv = await invocationByRequestId(t, other.workspaceId, requestId!);
    expect(inv).toMatchObject({ status: 'REJECTED', errorCode: 'unmetered_endpoint', endpoint: 'v1/fine_tuning/jobs' });
  });

  it("classes a path by the resource it names first: a vector store's files are not `files`", async () => {
    const other = await createTenant(t, { baseUrl: up.url, providerKey: KEY, passthroughClasses: ['files'] });
    const before = up.requests.length;
    const res = await raw(other, 'GET', 'v1/vector_stores/vs_1/files');
    expect(res.status).toBe(409);
    expect((await res.json()).error).toMatchObject({ code: 'unmetered_endpoint', passthrough_class: 'vector_stores' });
    // Any path of no class of its own is `other`.
    const unknown = await raw(other, 'GET', 'v1/organization/projects');
    expect((await unknown.json()).error).toMatchObject({ code: 'unmetered_endpoint', passthrough_class: 'other' });
    expect(up.requests.length).toBe(before);
  });

  it('lets a class through from the next call once the workspace adds it, and stops when it removes it', async () => {
    const other = await createTenant(t, { baseUrl: up.url, providerKey: KEY, passthroughClasses: ['files'] });
    expect(await evals(other)).toMatchObject({ ok: false, status: 409, passthroughClass: 'evals' });
    const path = { workspaceId: other.workspaceId };
    const opened = await updateWorkspace({ client: t.client, path, body: { passthroughClasses: ['evals', 'files'] } });
    expect(opened.data).toMatchObject({ passthroughClasses: ['files', 'evals'], allowUnmeteredPassthrough: false });
    expect((await evals(other)).ok).toBe(true);
    await updateWorkspace({ client: t.client, path, body: { passthroughClasses: [] } });
    expect(await files(other)).toMatchObject({ ok: false, status: 409, passthroughClass: 'files' });
    const audited = await t.database
      .db('audit_logs')
      .where({ resource_id: other.workspaceId, action: 'workspace.updated' })
      .orderBy(['created_at', 'id']);
    expect(audited.map((a: { changes: unknown }) => a.changes)).toEqual([
      { passthroughClasses: ['evals', 'files'] },
      { passthroughClasses: [] },
    ]);
  });
});

describe("a plan's passthrough classes", () => {
  it('let its users through while another plan of the workspace refuses them; changed on a published plan, they apply to the next call', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, planPassthroughClasses: ['evals'] });
    const { plan: other } = await activePlan(t.client, tenant.workspaceId, { key: `${tenant.planId.slice(-8)}-other` });
    expect(other.passthroughClasses).toEqual([]);
    const user = await provisionWorkspaceUser({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { externalUserId: 'on-the-other-plan', email: 'other-plan@example.com', planId: other.id, issueInferenceKey: true },
    });
    const onOther: Tenant = { ...tenant, accessId: user.data!.access.id, apiKey: user.data!.apiKey!, planId: other.id };

    expect((await evals(tenant)).ok).toBe(true);
    expect(await evals(onOther)).toMatchObject({ ok: false, status: 409, code: 'unmetered_endpoint', passthroughClass: 'evals' });
    // The workspace lets nothing through: the plan's classes are the ones its users get.
    expect(await files(tenant)).toMatchObject({ ok: false, status: 409, passthroughClass: 'files' });

    // Both plans are published: updatePlan refuses, setPlanPassthroughClasses replaces them.
    const draftOnly = await updatePlan({ client: t.client, path: { planId: other.id }, body: { passthroughClasses: ['evals'] } });
    expect(draftOnly.response.status).toBe(409);
    expect(draftOnly.error).toMatchObject({ error: { code: 'plan_not_draft' } });
    const set = await setPlanPassthroughClasses({
      client: t.client,
      path: { planId: other.id },
      body: { passthroughClasses: ['fine_tuning', 'evals'] },
    });
    expect(set.response.status).toBe(200);
    expect(set.data).toMatchObject({ status: 'ACTIVE', passthroughClasses: ['fine_tuning', 'evals'] });
    expect((await evals(onOther)).ok).toBe(true);
    expect((await fineTuning(onOther)).ok).toBe(true);
    await setPlanPassthroughClasses({ client: t.client, path: { planId: tenant.planId }, body: { passthroughClasses: [] } });
    expect(await evals(tenant)).toMatchObject({ ok: false, status: 409, passthroughClass: 'evals' });
    expect((await getPlan({ client: t.client, path: { planId: tenant.planId } })).data).toMatchObject({ passthroughClasses: [] });

    const audited = await t.database.db('audit_logs').where({ resource_id: other.id, action: 'plan.passthrough_classes_changed' });
    expect(audited.map((a: { changes: unknown }) => a.changes)).toEqual([{ before: [], after: ['fine_tuning', 'evals'] }]);
    // The same classes again change nothing, and are not audited again.
    await setPlanPassthroughClasses({
      client: t.client,
      path: { planId: other.id },
      body: { passthroughClasses: ['evals', 'fine_tuning'] },
    });
    expect(await t.database.db('audit_logs').where({ resource_id: other.id, action: 'plan.passthrough_classes_changed' })).toHaveLength(1);
  });
});

describe('the deprecated allowUnmeteredPassthrough', () => {
  it('lets every class through, `other` too', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, allowUnmeteredPassthrough: true });
    for (const call of [files, fineTuning, evals]) expect((await call(tenant)).ok).toBe(true);
    const unknown = await raw(tenant, 'GET', 'v1/organization/projects');
    // Forwarded: the fake has no such route, and its own 404 comes back.
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('x-nexus-metering-status')).toBe('unmetered');
  });
});

describe('the budget', () => {
  it('refuses a passed-through call with 402 once the hard budget is reached, the upstream not called', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, passthroughClasses: ['files'] });
    const path = { workspaceId: tenant.workspaceId };
    expect((await files(tenant)).ok).toBe(true);
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    await createModelPrice({
      client: t.client,
      path,
      body: { modelPattern: 'gpt-4o*', inputPerMillion: '2.50', outputPerMillion: '10', effectiveFrom: hourAgo },
    });
    const budget = await setWorkspaceBudget({ client: t.client, path, body: { period: 'DAY', hardLimitMicros: '1' } });
    expect(budget.response.status).toBe(200);
    // One priced call spends more than the hard level.
    await openAiFor(tenant, { 'x-fake-usage': '1000,500,0' }).chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 600,
    });
    await t.nexus.gateway.drain();
    await expect.poll(async () => (await files(tenant)).ok === false).toBe(true);
    const before = up.requests.length;
    const refused = await files(tenant);
    expect(refused).toMatchObject({ ok: false, status: 402, code: 'workspace_budget_exceeded' });
    expect(up.requests.length).toBe(before);
    // Free endpoints still answer.
    expect((await openAiFor(tenant).models.list()).data.length).toBeGreaterThan(0);
  });
});

describe('on an anthropic connection', () => {
  it("classes its files and other paths (its message batches are metered), the refusals in Anthropic's error shape", async () => {
    const tenant = await createTenant(t, {
      profile: 'anthropic',
      baseUrl: anthropicUp.url,
      providerKey: KEY,
      passthroughClasses: ['files'],
    });
    const headers = { 'x-api-key': tenant.apiKey, 'anthropic-version': '2023-06-01' };
    const before = anthropicUp.requests.length;
    const allowed = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/files`, { headers });
    // Forwarded: the fake has no such route, and its own 404 comes back.
    expect(allowed.status).toBe(404);
    expect(allowed.headers.get('x-nexus-metering-status')).toBe('unmetered');
    expect(anthropicUp.requests.length).toBe(before + 1);
    const refused = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/messages/batches`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: '{"requests":[]}',
    });
    // Message Batches are metered (docs/batches.md): a batch of no request is refused as a bad request.
    expect(refused.status).toBe(400);
    const body = await refused.json();
    expect(body).toMatchObject({ type: 'error', error: { code: 'invalid_parameter', param: 'requests' } });
    const unmetered = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/complete`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(unmetered.status).toBe(409);
    expect((await unmetered.json()).error).toMatchObject({ code: 'unmetered_endpoint', passthrough_class: 'other' });
    expect(anthropicUp.requests.length).toBe(before + 1);
  });
});

describe('a bad class', () => {
  it.each([
    ['a class that is not one', ['images2'], 'passthroughClasses.0'],
    ['a class listed twice', ['files', 'files'], 'passthroughClasses'],
    ['not a list', 'files', 'passthroughClasses'],
  ])('is refused with 400 on the workspace and the plan, and changes nothing: %s', async (_name, classes, param) => {
    const tenant = await createTenant(t, {
      baseUrl: up.url,
      providerKey: KEY,
      passthroughClasses: ['files'],
      planPassthroughClasses: ['evals'],
    });
    const onWorkspace = await updateWorkspace({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { passthroughClasses: classes as never },
    });
    expect(onWorkspace.response.status).toBe(400);
    expect(onWorkspace.error).toMatchObject({ error: { code: 'invalid_parameter', type: 'invalid_request_error', param } });
    const onPlan = await setPlanPassthroughClasses({
      client: t.client,
      path: { planId: tenant.planId },
      body: { passthroughClasses: classes as never },
    });
    expect(onPlan.response.status).toBe(400);
    expect(onPlan.error).toMatchObject({ error: { code: 'invalid_parameter', param } });
    expect((await files(tenant)).ok).toBe(true);
    expect((await evals(tenant)).ok).toBe(true);
    expect((await getPlan({ client: t.client, path: { planId: tenant.planId } })).data).toMatchObject({ passthroughClasses: ['evals'] });
  });
});

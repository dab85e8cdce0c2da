/**
 * Canonical ids and strict bodies, through HTTP: a UUID sent in upper case (path, query,
 * body) finds what the lower-case one does and is stored lower-case; a body that is not
 * valid UTF-8 is refused 400 invalid_json, on the Admin API and on the gateway's metered
 * JSON paths, and changes nothing.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemActor } from '../../src/domain/actor.js';
import {
  createWorkspace,
  getInvocation,
  listAuditLogs,
  listInvocations,
  listWorkspaces,
  provisionWorkspaceUser,
  updateWorkspace,
} from '../support/sdk.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { createTenant, gatewayFetch, type Tenant } from '../gateway/gateway-support.js';

let t: TestApp;
let up: FakeUpstream;
let tenant: Tenant;
const KEY = `${SECRET_MARKER}-upstream-canonical-0123456789`;

beforeAll(async () => {
  t = await startTestApp();
  up = await startOpenAiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const upper = (id: string) => id.toUpperCase();

async function adminFetch(path: string, init: RequestInit & { token?: string } = {}) {
  return t.fetch(`${t.url}${path}`, {
    ...init,
    headers: {
      authorization: `Bearer ${init.token ?? TEST_ROOT_KEY}`,
      'content-type': 'application/json',
      ...(init.headers as Record<string, string>),
    },
  });
}

describe('UUIDs in upper case', () => {
  it('in a path: finds the resource, and its audit entry is stored lower-case (found by either case)', async () => {
    const ws = (await createWorkspace({ client: t.client, body: { name: 'canonical-path' } })).data!;
    const res = await updateWorkspace({ client: t.client, path: { workspaceId: upper(ws.id) }, body: { name: 'renamed' } });
    expect(res.response.status).toBe(200);
    expect(res.data!.id).toBe(ws.id);
    for (const resourceId of [ws.id, upper(ws.id)]) {
      const logs = await listAuditLogs({ client: t.client, path: { workspaceId: ws.id }, query: { resourceId, limit: 100 } });
      expect(logs.response.status).toBe(200);
      const updated = logs.data!.filter((e) => e.action === 'workspace.updated');
      expect(updated).toHaveLength(1);
      expect(updated[0]!.resourceId).toBe(ws.id);
    }
  });

  it("in a path: a scoped key's workspace is the same workspace in either case", async () => {
    const ws = (await createWorkspace({ client: t.client, body: { name: 'canonical-scope' } })).data!;
    const { key } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
      name: 'scoped-canonical',
      workspaceIds: [ws.id],
    });
    const res = await adminFetch(`/admin/v1/workspaces/${upper(ws.id)}`, { token: key });
    expect(res.status).toBe(200);
    expect((await res.json()).id).toBe(ws.id);
  });

  it('in a body: the reference resolves and is stored lower-case', async () => {
    const res = await provisionWorkspaceUser({
      client: t.client,
      path: { workspaceId: upper(tenant.workspaceId) },
      body: { externalUserId: 'canonical-user', email: 'canonical@example.com', planId: upper(tenant.planId) },
    });
    expect(res.response.status, JSON.stringify(res.error)).toBe(201);
    expect(res.data!.access).toMatchObject({ workspaceId: tenant.workspaceId, planId: tenant.planId });
  });

  it('a urn:uuid: form is not a UUID of the contract: 400', async () => {
    const res = await adminFetch(`/admin/v1/workspaces/${tenant.workspaceId}/audit-logs?resourceId=urn:uuid:${tenant.workspaceId}`);
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'invalid_parameter', param: 'resourceId' });
  });

  it("in the gateway's path: the connection is found and recorded lower-case", async () => {
    const base = tenant.gatewayBaseUrl.replace(tenant.connectionId, upper(tenant.connectionId));
    expect(base).not.toBe(tenant.gatewayBaseUrl);
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: tenant.apiKey, fetch: gatewayFetch(), maxRetries: 0 });
    const { response } = await client.chat.completions
      .create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 })
      .withResponse();
    expect(response.status).toBe(200);
    await t.nexus.gateway.drain();
    const requestId = response.headers.get('x-nexus-request-id');
    const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 100 } });
    const found = list.data!.find((i) => i.requestId === requestId)!;
    const inv = (await getInvocation({ client: t.client, path: { invocationId: found.id } })).data!;
    expect(inv.providerConnectionId).toBe(tenant.connectionId);
  });
});

/** `{"name":"caf\xe9"}`: Latin-1, not UTF-8. */
const LATIN1 = Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);

describe('a body that is not valid UTF-8', () => {
  it.each([
    ['Latin-1', LATIN1],
    ['a lone continuation byte', Buffer.concat([Buffer.from('{"name":"a'), Buffer.from([0x80]), Buffer.from('"}')])],
    ['an overlong encoding', Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')])],
  ])('Admin API (%s): 400 invalid_json, nothing created', async (_label, body) => {
    const before = (await listWorkspaces({ client: t.client, query: { limit: 100 } })).data!.length;
    const res = await adminFetch('/admin/v1/workspaces', { method: 'POST', body });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'invalid_json', message: 'The request body is not valid UTF-8' });
    expect((await listWorkspaces({ client: t.client, query: { limit: 100 } })).data!.length).toBe(before);
  });

  it('gateway, a metered JSON path: 400 invalid_json, the upstream not called, nothing charged', async () => {
    const seen = up.requests.length;
    const body = Buffer.concat([
      Buffer.from('{"model":"gpt-test","max_tokens":5,"messages":[{"role":"user","content":"caf'),
      Buffer.from([0xe9]),
      Buffer.from('"}]}'),
    ]);
    const res = await gatewayFetch()(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body,
    });
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code: 'invalid_json', message: 'The request body is not valid UTF-8' });
    expect(up.requests.length).toBe(seen);
    await t.nexus.gateway.drain();
    const list = await listInvocations({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { limit: 100 } });
    const refused = list.data!.find((i) => i.requestId === res.headers.get('x-nexus-request-id'))!;
    expect(refused).toMatchObject({ status: 'REJECTED', errorCode: 'invalid_json', quotaUnits: '0' });
  });
});

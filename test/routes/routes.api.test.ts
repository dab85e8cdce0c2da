/**
 * Routes through the Admin API: create, read, list, update, archive and health, and the rules a route's
 * targets are held to (docs/routes.md): each refusal names its field and saves nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  archiveProviderConnection,
  archiveRoute,
  createProviderConnection,
  createRoute,
  createWorkspace,
  getRoute,
  getRouteHealth,
  listAuditLogs,
  listRoutes,
  updateRoute,
} from '../support/sdk.js';
import { startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

let t: TestApp;
let up: FakeUpstream;
const KEY = testProviderKey('routes');

beforeAll(async () => {
  t = await startTestApp();
  up = await startFakeUpstream('openai', [KEY]);
});
afterAll(async () => {
  await up?.close();
  await t?.close();
});

async function newWorkspace() {
  const res = await createWorkspace({ client: t.client, body: { name: 'routes-ws' } });
  expect(res.response.status).toBe(201);
  return res.data!;
}

async function newConnection(workspaceId: string, protocolProfile: 'openai' | 'anthropic' | 'azure-openai' = 'openai') {
  const res = await createProviderConnection({
    client: t.client,
    path: { workspaceId },
    body: { name: `${protocolProfile} conn`, protocolProfile, baseUrl: up.url, apiKey: KEY },
  });
  expect(res.response.status).toBe(201);
  return res.data!;
}

async function raw(method: string, path: string, body?: unknown) {
  const res = await t.fetch(`${t.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as { error: { code: string; param: string | null } } };
}

const routeCount = async (workspaceId: string) =>
  Number((await t.database.db('routes').where({ workspace_id: workspaceId }).count('* as n'))[0]!.n);

describe('routes', () => {
  it('are created with defaults, read, listed, updated, archived, and audited', async () => {
    const ws = await newWorkspace();
    const a = await newConnection(ws.id);
    const b = await newConnection(ws.id);
    const created = await createRoute({
      client: t.client,
      path: { workspaceId: ws.id },
      body: {
        name: 'chat',
        targets: [{ providerConnectionId: a.id }, { providerConnectionId: b.id, weight: 3, modelMap: { 'gpt-4o': 'gpt-4o-mini' } }],
      },
    });
    expect(created.response.status).toBe(201);
    const route = created.data!;
    expect(route).toMatchObject({
      workspaceId: ws.id,
      strategy: 'fallback',
      status: 'ACTIVE',
      retryOn: [429, 500, 502, 503, 504, 529],
      tryWhenAllOpen: true,
      targets: [
        { providerConnectionId: a.id, weight: 1, attempts: 1 },
        { providerConnectionId: b.id, weight: 3, attempts: 1, modelMap: { 'gpt-4o': 'gpt-4o-mini' } },
      ],
      retry: { baseDelayMs: 200, maxDelayMs: 2000, retryAfterCapMs: 5000, budgetMs: 10000 },
      breaker: { consecutiveFailures: 5, errorRatePercent: 50, minimumCalls: 20, windowMs: 60000, cooldownMs: 30000 },
    });
    expect(route.gatewayBaseUrl).toBe(`${t.url}/providers/${route.id}`);

    expect((await getRoute({ client: t.client, path: { routeId: route.id } })).data).toEqual(route);
    const listed = await listRoutes({ client: t.client, path: { workspaceId: ws.id } });
    expect(listed.data!.map((r) => r.id)).toEqual([route.id]);

    const updated = await updateRoute({
      client: t.client,
      path: { routeId: route.id },
      body: { strategy: 'loadbalance', breaker: { consecutiveFailures: 2 }, targets: [{ providerConnectionId: b.id }] },
    });
    expect(updated.response.status).toBe(200);
    expect(updated.data).toMatchObject({ strategy: 'loadbalance', targets: [{ providerConnectionId: b.id, weight: 1 }] });
    expect(updated.data!.breaker).toMatchObject({ consecutiveFailures: 2, cooldownMs: 30000 });

    const health = await getRouteHealth({ client: t.client, path: { routeId: route.id } });
    expect(health.response.status).toBe(200);
    expect(health.data).toMatchObject({
      routeId: route.id,
      status: 'ACTIVE',
      targets: [{ providerConnectionId: b.id, connectionStatus: 'ACTIVE', breakerState: 'closed', callsLastMinute: 0, callsLastHour: 0 }],
    });

    expect((await archiveRoute({ client: t.client, path: { routeId: route.id } })).response.status).toBe(204);
    expect((await archiveRoute({ client: t.client, path: { routeId: route.id } })).response.status).toBe(204);
    const after = await getRoute({ client: t.client, path: { routeId: route.id } });
    expect(after.data).toMatchObject({ status: 'ARCHIVED' });
    expect(after.data!.archivedAt).toBeTruthy();
    const again = await raw('PATCH', `/admin/v1/routes/${route.id}`, { name: 'x' });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('route_archived');

    const audit = await listAuditLogs({ client: t.client, path: { workspaceId: ws.id }, query: { limit: 100 } });
    const actions = audit.data!.filter((e) => e.resourceId === route.id).map((e) => e.action);
    expect(actions.sort()).toEqual(['route.archived', 'route.created', 'route.updated']);
  });

  it('shows an archived target connection in its health, as the gateway skips it', async () => {
    const ws = await newWorkspace();
    const a = await newConnection(ws.id);
    const b = await newConnection(ws.id);
    const route = (
      await createRoute({
        client: t.client,
        path: { workspaceId: ws.id },
        body: { name: 'r', targets: [{ providerConnectionId: a.id }, { providerConnectionId: b.id }] },
      })
    ).data!;
    await archiveProviderConnection({ client: t.client, path: { providerConnectionId: a.id } });
    const health = await getRouteHealth({ client: t.client, path: { routeId: route.id } });
    expect(health.data!.targets.map((x) => x.connectionStatus)).toEqual(['ARCHIVED', 'ACTIVE']);
  });

  describe('refuse bad targets, naming the field and saving nothing', () => {
    type Case = [string, (ids: Ids) => unknown, number, string, string];
    interface Ids {
      a: string;
      anthropic: string;
      azure: string;
      archived: string;
      foreign: string;
      route: string;
    }
    const cases: Case[] = [
      ['an empty target list', () => [], 400, 'invalid_parameter', 'targets'],
      ['a weight of 0', (i) => [{ providerConnectionId: i.a, weight: 0 }], 400, 'invalid_parameter', 'targets.0.weight'],
      ['a fractional weight', (i) => [{ providerConnectionId: i.a, weight: 1.5 }], 400, 'invalid_parameter', 'targets.0.weight'],
      [
        'a connection of another workspace',
        (i) => [{ providerConnectionId: i.foreign }],
        404,
        'provider_connection_not_found',
        'targets[0].providerConnectionId',
      ],
      [
        'a route as a target',
        (i) => [{ providerConnectionId: i.a }, { providerConnectionId: i.route }],
        404,
        'provider_connection_not_found',
        'targets[1].providerConnectionId',
      ],
      [
        'an archived connection',
        (i) => [{ providerConnectionId: i.archived }],
        409,
        'connection_archived',
        'targets[0].providerConnectionId',
      ],
      [
        'the same connection twice',
        (i) => [{ providerConnectionId: i.a }, { providerConnectionId: i.a }],
        400,
        'invalid_parameter',
        'targets[1].providerConnectionId',
      ],
      [
        'targets of two shapes',
        (i) => [{ providerConnectionId: i.a }, { providerConnectionId: i.anthropic }],
        400,
        'route_targets_incompatible',
        'targets',
      ],
      [
        'an Azure target without a model map',
        (i) => [{ providerConnectionId: i.a }, { providerConnectionId: i.azure }],
        400,
        'route_model_unserved',
        'targets[1].modelMap',
      ],
      [
        'a mapped model the Azure target serves no deployment for',
        (i) => [
          { providerConnectionId: i.a, modelMap: { 'gpt-4o': 'gpt-4o-2024-08-06' } },
          { providerConnectionId: i.azure, modelMap: { 'gpt-4o-mini': 'mini-deployment' } },
        ],
        400,
        'route_model_unserved',
        'targets[1].modelMap',
      ],
    ];
    it.each(cases)('%s', async (_label, targets, status, code, param) => {
      const ws = await newWorkspace();
      const other = await newWorkspace();
      const a = await newConnection(ws.id);
      const archived = await newConnection(ws.id);
      await archiveProviderConnection({ client: t.client, path: { providerConnectionId: archived.id } });
      const ids: Ids = {
        a: a.id,
        anthropic: (await newConnection(ws.id, 'anthropic')).id,
        azure: (await newConnection(ws.id, 'azure-openai')).id,
        archived: archived.id,
        foreign: (await newConnection(other.id)).id,
        route: (
          await createRoute({
            client: t.client,
            path: { workspaceId: ws.id },
            body: { name: 'r', targets: [{ providerConnectionId: a.id }] },
          })
        ).data!.id,
      };
      const before = await routeCount(ws.id);
      const res = await raw('POST', `/admin/v1/workspaces/${ws.id}/routes`, { name: 'bad', targets: targets(ids) });
      expect(res.status).toBe(status);
      expect(res.body.error).toMatchObject({ code, param });
      expect(await routeCount(ws.id)).toBe(before);
    });
  });

  it("is another workspace's scoped key's 404", async () => {
    const res = await raw('GET', '/admin/v1/routes/01a20000-0000-7000-8000-000000000000');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('gateway_route_not_found');
  });
});

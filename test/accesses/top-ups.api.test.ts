/**
 * One-off grants of units (grantAccessUnits) and the users' finder: a top-up grows the grant of the period running
 * now, is audited, reaches the lease a running process holds (the next call is admitted, nothing counted twice),
 * and moves whole through a plan change, whose pro-rated grant the snapshot explains; the users list finds by
 * email and ranks by the units used.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemActor, type Clock } from '../../src/domain/actor.js';
import { chatInputBound, createTenant, gatewayFetch, periodOf, type Tenant } from '../gateway/gateway-support.js';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import {
  changeAccessPlan,
  createWorkspace,
  getWorkspaceAccessQuota,
  grantAccessUnits,
  listAuditLogs,
  listWorkspaceUsers,
  provisionWorkspaceUser,
} from '../support/sdk.js';
import { activePlan } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const KEY = `${SECRET_MARKER}-upstream-top-ups-0123456789`;
// Each call reserves its input bound + 2 * 10 units and consumes 10 + 2 * 5 = 20.
const BODY = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'top up' }], max_tokens: 10 });
const BOUND = chatInputBound(BODY) + 20n;

let t: TestApp;
let fixed: TestApp;
let up: FakeUpstream;
// November 2026 has 30 days: a monthly period provisioned on the 1st runs to 1 December.
let now = new Date('2026-11-01T00:00:00.000Z');
const clock: Clock = { now: () => new Date(now) };

beforeAll(async () => {
  up = await startOpenAiUpstream({ apiKey: KEY });
  t = await startTestApp();
  fixed = await startTestApp({ clock });
});
afterAll(async () => {
  await t?.close();
  await fixed?.close();
  await up?.close();
});

function call(who: Tenant) {
  return gatewayFetch()(`${who.gatewayBaseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${who.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0' },
    body: BODY,
  });
}

describe('grantAccessUnits', () => {
  it('reaches the lease of a running process: a user refused for quota is admitted again, and nothing is counted twice', async () => {
    // Room for 3 calls: the 4th finds BOUND - 5 available.
    const quota = BOUND + 20n * 2n + 15n;
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: quota });
    for (let i = 0; i < 3; i++) expect((await call(tenant)).status).toBe(200);
    const refused = await call(tenant);
    expect(refused.status).toBe(429);
    expect((await refused.json()).error.code).toBe('quota_insufficient');

    const topUp = await grantAccessUnits({
      client: t.client,
      path: { accessId: tenant.accessId },
      body: { units: `${BOUND * 10n}`, reason: 'goodwill' },
    });
    expect(topUp.response.status).toBe(200);
    expect(topUp.data).toMatchObject({ grantedUnits: `${quota + BOUND * 10n}`, toppedUpUnits: `${BOUND * 10n}`, grantSource: 'provision' });

    // The process remembers its refusal for 250 ms at most; after it, the units are there on its lease's next extension.
    await new Promise((r) => setTimeout(r, 300));
    const admitted = await call(tenant);
    expect(admitted.status).toBe(200);
    await admitted.text();
    for (let i = 0; i < 5; i++) expect((await call(tenant)).status).toBe(200);
    await t.nexus.gateway.drain();

    // 9 calls of 20 units each, every one recorded once; the grant is the plan's and the top-up's, nothing held.
    const period = await periodOf(t, tenant.accessId);
    expect(period).toEqual({ granted: quota + BOUND * 10n, reserved: 0n, consumed: 9n * 20n });
    const events = await t.database.db('usage_events').where({ workspace_access_id: tenant.accessId });
    expect(events.map((e) => BigInt(e.units)).reduce((a, b) => a + b, 0n)).toBe(9n * 20n);
    const snapshot = (await getWorkspaceAccessQuota({ client: t.client, path: { accessId: tenant.accessId } })).data!;
    expect(snapshot).toMatchObject({ consumedUnits: '180', typicalCallUnits: '20', toppedUpUnits: `${BOUND * 10n}` });

    const audit = (
      await listAuditLogs({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { action: 'access.units_granted' } })
    ).data!;
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      resourceType: 'workspace_access',
      resourceId: tenant.accessId,
      actorKeyId: 'root',
      changes: { units: `${BOUND * 10n}`, reason: 'goodwill', toppedUpUnits: `${BOUND * 10n}` },
    });
  });

  it('is moved whole by a plan change, whose pro-rated grant the snapshot explains', async () => {
    now = new Date('2026-11-01T00:00:00.000Z');
    // Plans bound from long ago, whatever the fixed clock says.
    const workspaceId = (await createWorkspace({ client: fixed.client, body: { name: 'top-up plan change' } })).data!.id;
    const small = await activePlan(fixed.client, workspaceId, { key: 'small', quotaUnits: '3000' });
    const bigger = await activePlan(fixed.client, workspaceId, { key: 'bigger', quotaUnits: '9000' });
    const user = await provisionWorkspaceUser({
      client: fixed.client,
      path: { workspaceId },
      body: { externalUserId: 'upgrader', email: 'upgrader@example.com', planId: small.plan.id },
    });
    const tenant = { accessId: user.data!.access.id };
    now = new Date('2026-11-11T00:00:00.000Z');
    const topUp = await grantAccessUnits({ client: fixed.client, path: { accessId: tenant.accessId }, body: { units: '500' } });
    expect(topUp.data).toMatchObject({ grantedUnits: '3500', toppedUpUnits: '500' });
    expect(topUp.data!.proration).toBeUndefined();

    expect(
      (await changeAccessPlan({ client: fixed.client, path: { accessId: tenant.accessId }, body: { planId: bigger.plan.id } })).response
        .status,
    ).toBe(200);
    // The old part [1st, 11th) keeps 3000 x 10/30 = 1000; the new part gets 9000 x 20/30 = 6000, plus the 500 whole.
    const periods = await fixed.database.db('quota_periods').where({ workspace_access_id: tenant.accessId }).orderBy('period_start');
    expect(periods.map((p) => [BigInt(p.granted_units), BigInt(p.topped_up_units)])).toEqual([
      [1000n, 0n],
      [6500n, 500n],
    ]);
    const snapshot = (await getWorkspaceAccessQuota({ client: fixed.client, path: { accessId: tenant.accessId } })).data!;
    expect(snapshot).toMatchObject({
      grantedUnits: '6500',
      toppedUpUnits: '500',
      grantSource: 'plan_change',
      proration: { cycleStart: '2026-11-01T00:00:00.000Z', planQuotaUnits: '9000', shareUnits: '6000', carriedUnits: '0' },
    });
    expect(snapshot.typicalCallUnits).toBeUndefined();
  });

  describe.each([
    ['zero units', { units: '0' }, 'units'],
    ['units that are no number', { units: 'ten' }, 'units'],
    ['no units', { reason: 'x' }, 'units'],
    ['a blank reason', { units: '1', reason: ' ' }, 'reason'],
    ['an unknown field', { units: '1', plan: 'x' }, 'plan'],
    ['a grant past 64 bits', { units: '9223372036854775807' }, 'units'],
  ])('refuses %s with 400', (_label, body, param) => {
    it('and grants nothing', async () => {
      const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1000n });
      const res = await grantAccessUnits({ client: t.client, path: { accessId: tenant.accessId }, body: body as never });
      expect(res.response.status).toBe(400);
      expect((res.error as any).error).toMatchObject({ code: 'invalid_parameter', param });
      expect((await periodOf(t, tenant.accessId)).granted).toBe(1000n);
    });
  });

  it("answers 404 for an unknown access and for another workspace's, and grants nothing there", async () => {
    const mine = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1000n });
    const theirs = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1000n });
    const unknown = await grantAccessUnits({
      client: t.client,
      path: { accessId: '01a20000-0000-7000-8000-000000000000' },
      body: { units: '5' },
    });
    expect(unknown.response.status).toBe(404);
    expect((unknown.error as any).error.code).toBe('access_not_found');
    const { key } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
      name: 'top-ups',
      workspaceIds: [mine.workspaceId],
    });
    const other = await grantAccessUnits({ client: t.clientWith(key), path: { accessId: theirs.accessId }, body: { units: '5' } });
    expect(other.response.status).toBe(404);
    expect((other.error as any).error.code).toBe('access_not_found');
    expect((await periodOf(t, theirs.accessId)).granted).toBe(1000n);
  });
});

describe('listWorkspaceUsers: email and sort', () => {
  it('finds a user by email, whatever its case', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1000n, users: 2 });
    const users = (await listWorkspaceUsers({ client: t.client, path: { workspaceId: tenant.workspaceId } })).data!;
    const target = users[1]!;
    const found = await listWorkspaceUsers({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { email: target.email.toUpperCase() },
    });
    expect(found.data!.map((u) => u.access.id)).toEqual([target.access.id]);
    const none = await listWorkspaceUsers({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { email: 'nobody@example.com' },
    });
    expect(none.data).toEqual([]);
  });

  it('ranks users by the units used in the period running now, then newest first, page after page', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 100_000n, users: 3 });
    // A fourth user with no call; the three others make 1, 3 and 2 calls.
    await provisionWorkspaceUser({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { externalUserId: 'idle', email: 'idle@example.com', planId: tenant.planId },
    });
    const calls = [1, 3, 2];
    for (const [i, n] of calls.entries()) {
      for (let c = 0; c < n; c++) expect((await call({ ...tenant, apiKey: tenant.users[i]!.apiKey })).status).toBe(200);
    }
    await t.nexus.gateway.drain();
    const ranked: string[] = [];
    let cursor: string | undefined;
    do {
      const res = await listWorkspaceUsers({
        client: t.client,
        path: { workspaceId: tenant.workspaceId },
        query: { sort: 'usage', limit: 1, ...(cursor ? { cursor } : {}) },
      });
      expect(res.response.status).toBe(200);
      ranked.push(...res.data!.map((u) => u.access.id));
      cursor = res.response.headers.get('x-next-cursor') ?? undefined;
    } while (cursor);
    const idle = (
      await listWorkspaceUsers({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { externalUserId: 'idle' } })
    ).data![0]!;
    expect(ranked).toEqual([tenant.users[1]!.accessId, tenant.users[2]!.accessId, tenant.users[0]!.accessId, idle.access.id]);
  });
});

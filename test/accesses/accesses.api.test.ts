import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  activateWorkspaceAccess,
  archiveWorkspace,
  bindPlanStrategy,
  changeAccessPlan,
  createPlan,
  createQuotaStrategy,
  createWorkspace,
  getInferenceKey,
  getWorkspaceAccess,
  getWorkspaceAccessQuota,
  issueInferenceKey,
  listInferenceKeys,
  listWorkspaceUsers,
  provisionWorkspaceUser,
  publishPlanStrategy,
  renewWorkspaceAccess,
  revokeInferenceKey,
  suspendWorkspaceAccess,
} from '../support/sdk.js';
import type { Int64String } from '../../generated/client/types.gen.js';
import { systemActor } from '../../src/domain/actor.js';
import { activePlan as activePlanThrough } from '../support/tenant.js';
import { leaseUnits, useUnits } from '../support/quota-use.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

const START = new Date('2026-11-01T00:00:00.000Z');
let current = START;
const clock = { now: () => new Date(current.getTime()) };
const DAY = 86_400_000;
const MISSING = '01a20000-0000-7000-8000-000000000000';
const actor = systemActor('test');

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ clock });
});
afterAll(async () => {
  await t?.close();
});
beforeEach(() => {
  current = START;
});

async function newWorkspace(name = 'accesses') {
  return (await createWorkspace({ client: t.client, body: { name } })).data!;
}

/** A published strategy bound from the distant past, on an ACTIVE plan. */
async function activePlan(workspaceId: string, key = 'pro', quotaUnits: Int64String = '3000', resetInterval: 'MONTH' | 'YEAR' = 'MONTH') {
  const active = await activePlanThrough(t.client, workspaceId, { key, quotaUnits, resetInterval });
  expect(active.plan.status).toBe('ACTIVE');
  return active;
}

async function provision(workspaceId: string, planId: string, externalUserId = 'user-1', issueInferenceKey = false) {
  const res = await provisionWorkspaceUser({
    client: t.client,
    path: { workspaceId },
    body: { externalUserId, email: `${externalUserId}@example.com`, planId, issueInferenceKey },
  });
  expect(res.response.status).toBe(201);
  return res.data!;
}

async function rawPost(path: string, body: string) {
  const res = await t.fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
    body,
  });
  return { status: res.status, body: await res.json() };
}

const periodsOf = (accessId: string) => t.database.db('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_start');

describe('provisionWorkspaceUser', () => {
  it('creates the user and an ACTIVE access with a first period [now, now + 1 month), and no key unless asked', async () => {
    const ws = await newWorkspace();
    const { plan, strategy } = await activePlan(ws.id);
    const res = await provision(ws.id, plan.id);
    expect(res).toMatchObject({ created: true, inferenceKeyIssued: false, quotaPeriodEndsAt: '2026-12-01T00:00:00.000Z' });
    expect(res.apiKey).toBeUndefined();
    expect(res.access).toMatchObject({
      workspaceId: ws.id,
      userId: res.userId,
      externalUserId: 'user-1',
      planId: plan.id,
      status: 'ACTIVE',
      accessStartsAt: START.toISOString(),
    });
    const periods = await periodsOf(res.access.id);
    expect(periods).toHaveLength(1);
    expect(periods[0]).toMatchObject({
      granted_units: 3000n,
      reserved_units: 0n,
      consumed_units: 0n,
      source: 'provision',
      quota_strategy_id: strategy.id,
    });
    expect(await t.database.db('inference_keys').where({ workspace_access_id: res.access.id })).toEqual([]);
    const got = await getWorkspaceAccess({ client: t.client, path: { accessId: res.access.id } });
    expect(got.data).toEqual(res.access);
  });

  it('is idempotent on externalUserId: the same user and access, a key only when asked, nothing granted again', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const first = await provision(ws.id, plan.id, 'same');
    const again = await provision(ws.id, plan.id, 'same');
    expect(again).toMatchObject({ userId: first.userId, created: false, inferenceKeyIssued: false });
    expect(again.access.id).toBe(first.access.id);
    const withKey = await provision(ws.id, plan.id, 'same', true);
    expect(withKey).toMatchObject({ userId: first.userId, created: false, inferenceKeyIssued: true });
    expect(withKey.apiKey).toMatch(/^nx-test-[A-Za-z0-9_-]{43}$/);
    expect(withKey.keyExpiresAt).toBe(new Date(START.getTime() + 365 * DAY).toISOString());
    expect(await periodsOf(first.access.id)).toHaveLength(1);
    expect(await t.database.db('workspace_users').where({ workspace_id: ws.id })).toHaveLength(1);
    // A repeat ignores planId: a draft plan does not make a retried provisioning fail.
    const draft = await createPlan({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { key: 'draft-repeat', name: 'd', billingInterval: 'MONTH' },
    });
    const withDraft = await provision(ws.id, draft.data!.id, 'same');
    expect(withDraft).toMatchObject({ userId: first.userId, created: false });
    expect(withDraft.access.planId).toBe(plan.id);
  });

  it('returns the key plaintext once and stores only its keyed hash', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const res = await provision(ws.id, plan.id, 'keyed', true);
    const apiKey = res.apiKey!;
    const row = await t.database.db('inference_keys').where({ id: res.apiKeyId }).first();
    expect(row.key_hash).toBe(t.nexus.services.hasher.hash(apiKey));
    expect(JSON.stringify(row)).not.toContain(apiKey.slice(8));
    expect(apiKey.startsWith(row.prefix)).toBe(true);
    const listed = await listInferenceKeys({ client: t.client, path: { accessId: res.access.id } });
    expect(JSON.stringify(listed.data)).not.toContain(apiKey.slice(8));
    const audit = await t.database.db('audit_logs').where({ workspace_id: ws.id });
    expect(JSON.stringify(audit)).not.toContain(apiKey.slice(8));
  });

  it('provisions once under concurrent repeats', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const results = await Promise.all(Array.from({ length: 10 }, () => provision(ws.id, plan.id, 'racer')));
    expect(new Set(results.map((r) => r.access.id)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(await periodsOf(results[0]!.access.id)).toHaveLength(1);
  });

  it('needs an ACTIVE plan of the workspace', async () => {
    const ws = await newWorkspace();
    const draft = await createPlan({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { key: 'draft', name: 'd', billingInterval: 'MONTH' },
    });
    const res = await provisionWorkspaceUser({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { externalUserId: 'u', email: 'u@example.com', planId: draft.data!.id },
    });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error).toMatchObject({ code: 'plan_not_active', current_status: 'DRAFT', param: 'planId' });
    const other = await activePlan((await newWorkspace()).id);
    const foreign = await provisionWorkspaceUser({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { externalUserId: 'u', email: 'u@example.com', planId: other.plan.id },
    });
    expect(foreign.response.status).toBe(404);
    expect((foreign.error as any).error).toMatchObject({ code: 'plan_not_found', param: 'planId' });
    expect(await t.database.db('workspace_users').where({ workspace_id: ws.id })).toEqual([]);
  });

  it('needs a strategy in force on the plan', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const [binding] = (await t.database.db('plan_strategy_bindings').where({ plan_id: plan.id })) as { id: string }[];
    await t.nexus.services.plans.closeBinding(actor, binding!.id, new Date('2026-10-01T00:00:00Z'));
    const res = await provisionWorkspaceUser({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { externalUserId: 'late', email: 'l@example.com', planId: plan.id },
    });
    expect(res.response.status).toBe(409);
    expect((res.error as any).error.code).toBe('strategy_not_in_force');
    expect(await t.database.db('workspace_users').where({ workspace_id: ws.id })).toEqual([]);
  });

  it('refuses a missing or unknown Management Key with 401', async () => {
    const ws = await newWorkspace();
    for (const token of [undefined, 'nx-mgmt-unknown-key-000000000000']) {
      const c = t.clientWith(token);
      expect(
        (
          await provisionWorkspaceUser({
            client: c,
            path: { workspaceId: ws.id },
            body: { externalUserId: 'x', email: 'x@example.com', planId: MISSING },
          })
        ).response.status,
      ).toBe(401);
      expect((await getWorkspaceAccess({ client: c, path: { accessId: MISSING } })).response.status).toBe(401);
      expect((await getWorkspaceAccessQuota({ client: c, path: { accessId: MISSING } })).response.status).toBe(401);
    }
  });

  describe.each([
    ['a missing externalUserId', { email: 'a@example.com' }, 'externalUserId'],
    ['a blank externalUserId', { externalUserId: '   ', email: 'a@example.com' }, 'externalUserId'],
    ['an invalid email', { externalUserId: 'x', email: 'not-an-email' }, 'email'],
    ['a missing planId', { externalUserId: 'x', email: 'a@example.com', planId: undefined }, 'planId'],
    ['a planId that is not a uuid', { externalUserId: 'x', email: 'a@example.com', planId: 'pro' }, 'planId'],
    ['issueInferenceKey not a boolean', { externalUserId: 'x', email: 'a@example.com', issueInferenceKey: 'yes' }, 'issueInferenceKey'],
    ['an unknown field', { externalUserId: 'x', email: 'a@example.com', role: 'admin' }, 'role'],
  ])('rejects %s', (_label, over, param) => {
    it('with 400 naming the field', async () => {
      const ws = await newWorkspace();
      const res = await rawPost(`/admin/v1/workspaces/${ws.id}/users`, JSON.stringify({ planId: MISSING, ...over }));
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_parameter', param });
    });
  });
});

describe('listWorkspaceUsers', () => {
  it('filters by status, plan and externalUserId, and pages with a cursor', async () => {
    const ws = await newWorkspace();
    const a = await activePlan(ws.id, 'a');
    const b = await activePlan(ws.id, 'b');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await provision(ws.id, (i % 2 ? b : a).plan.id, `u${i}`)).access.id);
    await suspendWorkspaceAccess({ client: t.client, path: { accessId: ids[0]! } });

    const all = await listWorkspaceUsers({ client: t.client, path: { workspaceId: ws.id } });
    expect(all.data!.map((u) => u.access.id)).toEqual([...ids].reverse());
    expect(all.data![0]).toMatchObject({ externalUserId: 'u4', email: 'u4@example.com', access: { externalUserId: 'u4' } });
    const suspended = await listWorkspaceUsers({ client: t.client, path: { workspaceId: ws.id }, query: { status: 'SUSPENDED' } });
    expect(suspended.data!.map((u) => u.access.id)).toEqual([ids[0]]);
    const onB = await listWorkspaceUsers({ client: t.client, path: { workspaceId: ws.id }, query: { planId: b.plan.id } });
    expect(onB.data!.map((u) => u.externalUserId)).toEqual(['u3', 'u1']);
    const one = await listWorkspaceUsers({ client: t.client, path: { workspaceId: ws.id }, query: { externalUserId: 'u2' } });
    expect(one.data!.map((u) => u.access.id)).toEqual([ids[2]]);

    const page1 = await listWorkspaceUsers({ client: t.client, path: { workspaceId: ws.id }, query: { limit: 2 } });
    const cursor = page1.response.headers.get('x-next-cursor')!;
    const page2 = await listWorkspaceUsers({ client: t.client, path: { workspaceId: ws.id }, query: { limit: 2, cursor } });
    const page3 = await listWorkspaceUsers({
      client: t.client,
      path: { workspaceId: ws.id },
      query: { limit: 2, cursor: page2.response.headers.get('x-next-cursor')! },
    });
    expect([...page1.data!, ...page2.data!, ...page3.data!].map((u) => u.access.id)).toEqual([...ids].reverse());
    expect(page3.response.headers.get('x-next-cursor')).toBeNull();

    const bad = await t.fetch(`${t.url}/admin/v1/workspaces/${ws.id}/users?status=GONE`, {
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}` },
    });
    expect(bad.status).toBe(400);
  });

  it('shows accesses whose last period ended as EXPIRED', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const res = await provision(ws.id, plan.id);
    current = new Date('2026-12-01T00:00:00.000Z');
    const expired = await listWorkspaceUsers({ client: t.client, path: { workspaceId: ws.id }, query: { status: 'EXPIRED' } });
    expect(expired.data!.map((u) => u.access.id)).toEqual([res.access.id]);
  });
});

describe('the access state machine', () => {
  it('ACTIVE -> SUSPENDED -> ACTIVE; repeating a state is a no-op', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const { access } = await provision(ws.id, plan.id);
    const suspended = await suspendWorkspaceAccess({ client: t.client, path: { accessId: access.id } });
    expect(suspended.data!.status).toBe('SUSPENDED');
    expect((await suspendWorkspaceAccess({ client: t.client, path: { accessId: access.id } })).data!.status).toBe('SUSPENDED');
    const active = await activateWorkspaceAccess({ client: t.client, path: { accessId: access.id } });
    expect(active.data!.status).toBe('ACTIVE');
    expect((await activateWorkspaceAccess({ client: t.client, path: { accessId: access.id } })).data!.status).toBe('ACTIVE');
    const actions = (await t.database.db('audit_logs').where({ resource_id: access.id }).orderBy('id')).map((r) => r.action);
    expect(actions).toEqual(['access.provisioned', 'access.suspended', 'access.activated']);
  });

  it('REVOKED is terminal: 409 illegal_transition with the current state', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const { access } = await provision(ws.id, plan.id);
    await t.nexus.db.transaction((tx) => t.nexus.services.accesses.transitionInTx(actor, access.id, 'REVOKED', 'test', tx));
    for (const call of [
      () => activateWorkspaceAccess({ client: t.client, path: { accessId: access.id } }),
      () => suspendWorkspaceAccess({ client: t.client, path: { accessId: access.id } }),
      () =>
        renewWorkspaceAccess({
          client: t.client,
          path: { accessId: access.id },
          body: { planId: plan.id, periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-01-01T00:00:00Z' },
        }),
      () => issueInferenceKey({ client: t.client, path: { accessId: access.id }, body: {} }),
    ]) {
      const res = await call();
      expect(res.response.status).toBe(409);
      expect((res.error as any).error).toMatchObject({ code: 'illegal_transition', current_status: 'REVOKED' });
    }
  });

  it('expires at the end of the last period; renewing brings it back; activate alone cannot', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const { access } = await provision(ws.id, plan.id);
    current = new Date('2026-12-01T00:00:00.000Z');
    expect((await getWorkspaceAccess({ client: t.client, path: { accessId: access.id } })).data!.status).toBe('EXPIRED');
    const quota = await getWorkspaceAccessQuota({ client: t.client, path: { accessId: access.id } });
    expect(quota.response.status).toBe(404);
    expect((quota.error as any).error.code).toBe('quota_period_not_found');
    const suspend = await suspendWorkspaceAccess({ client: t.client, path: { accessId: access.id } });
    expect(suspend.response.status).toBe(409);
    expect((suspend.error as any).error).toMatchObject({ code: 'illegal_transition', current_status: 'EXPIRED' });
    const activate = await activateWorkspaceAccess({ client: t.client, path: { accessId: access.id } });
    expect(activate.response.status).toBe(409);
    expect((activate.error as any).error).toMatchObject({ code: 'illegal_transition', current_status: 'EXPIRED' });

    const renewed = await renewWorkspaceAccess({
      client: t.client,
      path: { accessId: access.id },
      body: { planId: plan.id, periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-01-01T00:00:00Z' },
    });
    expect(renewed.response.status).toBe(200);
    expect(renewed.data!.status).toBe('ACTIVE');
    const snapshot = await getWorkspaceAccessQuota({ client: t.client, path: { accessId: access.id } });
    expect(snapshot.data).toMatchObject({ grantedUnits: '3000', availableUnits: '3000', periodEnd: '2027-01-01T00:00:00.000Z' });
    const audit = await t.database.db('audit_logs').where({ resource_id: access.id, action: 'access.expired' }).first();
    expect(audit).toMatchObject({ actor_key_id: 'system:access-expiry' });
  });

  it('a renewal does not lift a suspension: expired while SUSPENDED comes back SUSPENDED', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const { access } = await provision(ws.id, plan.id);
    await suspendWorkspaceAccess({ client: t.client, path: { accessId: access.id } });
    current = new Date('2026-12-05T00:00:00.000Z');
    expect((await getWorkspaceAccess({ client: t.client, path: { accessId: access.id } })).data!.status).toBe('EXPIRED');
    const renewed = await renewWorkspaceAccess({
      client: t.client,
      path: { accessId: access.id },
      body: { planId: plan.id, periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-01-01T00:00:00Z' },
    });
    expect(renewed.data!.status).toBe('SUSPENDED');
    expect((await activateWorkspaceAccess({ client: t.client, path: { accessId: access.id } })).data!.status).toBe('ACTIVE');
  });

  it('PENDING -> ACTIVE on activation opens the first period from the plan in force', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id, 'yearly', '100', 'YEAR');
    const { access } = await provision(ws.id, plan.id);
    await t.database.db('quota_periods').where({ workspace_access_id: access.id }).del();
    await t.database.db('workspace_accesses').where({ id: access.id }).update({ status: 'PENDING' });
    current = new Date('2026-11-20T00:00:00.000Z');
    const suspend = await suspendWorkspaceAccess({ client: t.client, path: { accessId: access.id } });
    expect(suspend.response.status).toBe(409);
    expect((suspend.error as any).error).toMatchObject({ code: 'illegal_transition', current_status: 'PENDING' });
    const activated = await activateWorkspaceAccess({ client: t.client, path: { accessId: access.id } });
    expect(activated.data!.status).toBe('ACTIVE');
    const periods = await periodsOf(access.id);
    expect(periods.map((p) => [p.period_start.toISOString(), p.period_end.toISOString(), p.granted_units])).toEqual([
      ['2026-11-20T00:00:00.000Z', '2027-11-20T00:00:00.000Z', 100n],
    ]);
  });

  it('expires at accessEndsAt', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const { access } = await provision(ws.id, plan.id);
    await t.database
      .db('workspace_accesses')
      .where({ id: access.id })
      .update({ access_ends_at: new Date('2026-11-10T00:00:00Z') });
    current = new Date('2026-11-10T00:00:00.000Z');
    const got = await getWorkspaceAccess({ client: t.client, path: { accessId: access.id } });
    expect(got.data).toMatchObject({ status: 'EXPIRED', accessEndsAt: '2026-11-10T00:00:00.000Z' });
    expect(await t.nexus.services.accesses.expireDue()).toBe(0);
  });
});

describe('renewWorkspaceAccess', () => {
  it('creates the next period from the strategy in force at its start; the same period again is a no-op; overlaps are refused', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const { access } = await provision(ws.id, plan.id);
    // From Dec 1 a new version (5000 units) is in force.
    const v2 = await createQuotaStrategy({
      client: t.client,
      path: { workspaceId: ws.id },
      body: {
        key: 'pro-q',
        resetInterval: 'MONTH',
        quotaUnits: '5000',
        inputMultiplierPpm: '1',
        outputMultiplierPpm: '1',
        cachedInputMultiplierPpm: '1',
        maxOutputTokens: 10,
      },
    });
    expect(v2.data!.version).toBe(2);
    await publishPlanStrategy({ client: t.client, path: { strategyId: v2.data!.id } });
    await bindPlanStrategy({
      client: t.client,
      path: { planId: plan.id },
      body: { strategyId: v2.data!.id, effectiveFrom: '2026-12-01T00:00:00Z' },
    });

    const body = { planId: plan.id, periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-01-01T00:00:00Z' };
    const first = await renewWorkspaceAccess({ client: t.client, path: { accessId: access.id }, body });
    expect(first.response.status).toBe(200);
    expect(first.data!.status).toBe('ACTIVE');
    const again = await renewWorkspaceAccess({ client: t.client, path: { accessId: access.id }, body });
    expect(again.response.status).toBe(200);
    expect(again.data).toEqual(first.data);
    const periods = await periodsOf(access.id);
    expect(periods.map((p) => [p.source, p.granted_units, p.quota_strategy_id])).toEqual([
      ['provision', 3000n, periods[0]!.quota_strategy_id],
      ['renewal', 5000n, v2.data!.id],
    ]);

    for (const overlap of [
      { periodStart: '2026-12-15T00:00:00Z', periodEnd: '2027-01-15T00:00:00Z' },
      { periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-02-01T00:00:00Z' },
      { periodStart: '2026-11-15T00:00:00Z', periodEnd: '2026-11-20T00:00:00Z' },
    ]) {
      const res = await renewWorkspaceAccess({ client: t.client, path: { accessId: access.id }, body: { planId: plan.id, ...overlap } });
      expect(res.response.status).toBe(409);
      expect((res.error as any).error.code).toBe('period_overlap');
    }
    expect(await periodsOf(access.id)).toHaveLength(2);
  });

  it('refuses bad periods and plans', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const { access } = await provision(ws.id, plan.id);
    const backwards = await renewWorkspaceAccess({
      client: t.client,
      path: { accessId: access.id },
      body: { planId: plan.id, periodStart: '2027-01-01T00:00:00Z', periodEnd: '2026-12-01T00:00:00Z' },
    });
    expect(backwards.response.status).toBe(400);
    expect((backwards.error as any).error.param).toBe('periodEnd');
    const notTime = await rawPost(
      `/admin/v1/workspace-accesses/${access.id}/renew`,
      JSON.stringify({ planId: plan.id, periodStart: 'December', periodEnd: '2027-01-01T00:00:00Z' }),
    );
    expect(notTime.status).toBe(400);
    expect(notTime.body.error.param).toBe('periodStart');
    const draft = await createPlan({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { key: 'draft', name: 'd', billingInterval: 'MONTH' },
    });
    const inactive = await renewWorkspaceAccess({
      client: t.client,
      path: { accessId: access.id },
      body: { planId: draft.data!.id, periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-01-01T00:00:00Z' },
    });
    expect(inactive.response.status).toBe(409);
    expect((inactive.error as any).error.code).toBe('plan_not_active');
    const missing = await renewWorkspaceAccess({
      client: t.client,
      path: { accessId: MISSING },
      body: { planId: plan.id, periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-01-01T00:00:00Z' },
    });
    expect(missing.response.status).toBe(404);
  });

  it('grantPeriodInTx is idempotent on the external period key', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const { access } = await provision(ws.id, plan.id);
    const input = {
      periodStart: new Date('2026-12-01T00:00:00Z'),
      periodEnd: new Date('2027-01-01T00:00:00Z'),
      source: 'billing' as const,
      externalPeriodKey: 'sub_1:2026-12',
    };
    const grant = () => t.nexus.db.transaction((tx) => t.nexus.services.accesses.grantPeriodInTx(actor, access.id, input, tx));
    const first = await grant();
    expect(first.created).toBe(true);
    expect(await grant()).toEqual({ periodId: first.periodId, created: false });
  });
});

describe('changeAccessPlan', () => {
  it('splits the current period at effectiveAt with time proration and carries overuse', async () => {
    const ws = await newWorkspace();
    const small = await activePlan(ws.id, 'small', '3000');
    const big = await activePlan(ws.id, 'big', '9000');
    const { access } = await provision(ws.id, small.plan.id); // [Nov 1, Dec 1): 30 days
    const [period] = await periodsOf(access.id);
    // Use 2000 of 3000 in the first 10 days (old share for 10 days: 1000; 1000 used beyond it).
    current = new Date(START.getTime() + 10 * DAY);
    await useUnits(t.database.db, period, 2000n, current);

    const res = await changeAccessPlan({ client: t.client, path: { accessId: access.id }, body: { planId: big.plan.id } });
    expect(res.response.status).toBe(200);
    expect(res.data!.planId).toBe(big.plan.id);
    const periods = await periodsOf(access.id);
    expect(periods).toHaveLength(2);
    // Old period ends now, keeps what it used; new one: 9000 * 20/30 = 6000, minus the 1000 used beyond the old share.
    expect(periods[0]).toMatchObject({ period_end: current, granted_units: 2000n, consumed_units: 2000n, plan_id: small.plan.id });
    expect(periods[1]).toMatchObject({
      period_start: current,
      period_end: new Date('2026-12-01T00:00:00Z'),
      granted_units: 5000n,
      source: 'plan_change',
      plan_id: big.plan.id,
      quota_strategy_id: big.strategy.id,
    });
    const snapshot = await getWorkspaceAccessQuota({ client: t.client, path: { accessId: access.id } });
    expect(snapshot.data).toMatchObject({
      planId: big.plan.id,
      quotaPeriodId: periods[1]!.id,
      grantedUnits: '5000',
      consumedUnits: '0',
      availableUnits: '5000',
      periodEnd: '2026-12-01T00:00:00.000Z',
    });

    // The same plan again changes nothing.
    const same = await changeAccessPlan({ client: t.client, path: { accessId: access.id }, body: { planId: big.plan.id } });
    expect(same.response.status).toBe(200);
    expect(await periodsOf(access.id)).toHaveLength(2);
    const audit = await t.database.db('audit_logs').where({ resource_id: access.id, action: 'access.plan_changed' });
    expect(audit).toHaveLength(1);
    expect(audit[0].changes).toMatchObject({ fromPlanId: small.plan.id, planId: big.plan.id, newPeriodGrantedUnits: '5000' });
  });

  it('takes effect at a future effectiveAt: the old plan runs until then with its prorated share', async () => {
    const ws = await newWorkspace();
    const a = await activePlan(ws.id, 'a', '3000');
    const b = await activePlan(ws.id, 'b', '300');
    const { access } = await provision(ws.id, a.plan.id);
    const at = new Date(START.getTime() + 20 * DAY).toISOString();
    const res = await changeAccessPlan({ client: t.client, path: { accessId: access.id }, body: { planId: b.plan.id, effectiveAt: at } });
    expect(res.response.status).toBe(200);
    const periods = await periodsOf(access.id);
    expect(periods.map((p) => [p.period_start.toISOString(), p.period_end.toISOString(), p.granted_units])).toEqual([
      [START.toISOString(), at, 2000n],
      [at, '2026-12-01T00:00:00.000Z', 100n],
    ]);
    expect((await getWorkspaceAccessQuota({ client: t.client, path: { accessId: access.id } })).data).toMatchObject({
      planId: a.plan.id,
      grantedUnits: '2000',
    });
  });

  it('refuses a plan that is not ACTIVE, an ended period and a revoked access', async () => {
    const ws = await newWorkspace();
    const a = await activePlan(ws.id, 'a');
    const b = await activePlan(ws.id, 'b');
    const { access } = await provision(ws.id, a.plan.id);
    const draft = await createPlan({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { key: 'draft', name: 'd', billingInterval: 'MONTH' },
    });
    const inactive = await changeAccessPlan({ client: t.client, path: { accessId: access.id }, body: { planId: draft.data!.id } });
    expect(inactive.response.status).toBe(409);
    expect((inactive.error as any).error).toMatchObject({ code: 'plan_not_active', current_status: 'DRAFT' });
    const bad = await changeAccessPlan({ client: t.client, path: { accessId: access.id }, body: { planId: 'x' } });
    expect(bad.response.status).toBe(400);
    expect((await changeAccessPlan({ client: t.client, path: { accessId: MISSING }, body: { planId: b.plan.id } })).response.status).toBe(
      404,
    );
    // A renewed period follows; the first one has ended by Dec 2.
    await renewWorkspaceAccess({
      client: t.client,
      path: { accessId: access.id },
      body: { planId: a.plan.id, periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-01-01T00:00:00Z' },
    });
    current = new Date('2026-12-02T00:00:00Z');
    const ended = await changeAccessPlan({
      client: t.client,
      path: { accessId: access.id },
      body: { planId: b.plan.id, effectiveAt: '2026-11-15T00:00:00Z' },
    });
    expect(ended.response.status).toBe(400);
    expect((ended.error as any).error.param).toBe('effectiveAt');
    await t.nexus.db.transaction((tx) => t.nexus.services.accesses.transitionInTx(actor, access.id, 'REVOKED', undefined, tx));
    const revoked = await changeAccessPlan({ client: t.client, path: { accessId: access.id }, body: { planId: b.plan.id } });
    expect(revoked.response.status).toBe(409);
    expect((revoked.error as any).error).toMatchObject({ code: 'illegal_transition', current_status: 'REVOKED' });
  });
});

describe('changeAccessPlan: when effectiveAt may lie', () => {
  const change = (accessId: string, planId: string, effectiveAt?: string) =>
    changeAccessPlan({ client: t.client, path: { accessId }, body: { planId, ...(effectiveAt ? { effectiveAt } : {}) } });

  it('refuses an effectiveAt before the access starts with 400, changing nothing', async () => {
    const ws = await newWorkspace();
    const a = await activePlan(ws.id, 'a', '3000');
    const b = await activePlan(ws.id, 'b', '9000');
    const { access } = await provision(ws.id, b.plan.id); // starts Nov 1, 2026
    const res = await change(access.id, a.plan.id, '2020-06-01T00:00:00Z');
    expect(res.response.status).toBe(400);
    expect((res.error as any).error).toMatchObject({ code: 'invalid_parameter', param: 'effectiveAt' });
    expect((res.error as any).error.message).toContain('before the access starts');
    // Just before the start is refused too; the start itself is the whole period moving.
    expect((await change(access.id, a.plan.id, new Date(START.getTime() - 1).toISOString())).response.status).toBe(400);
    expect((await getWorkspaceAccess({ client: t.client, path: { accessId: access.id } })).data!.planId).toBe(b.plan.id);
    expect((await getWorkspaceAccessQuota({ client: t.client, path: { accessId: access.id } })).data!.planId).toBe(b.plan.id);
    expect(await periodsOf(access.id)).toHaveLength(1);
    expect(await t.database.db('audit_logs').where({ resource_id: access.id, action: 'access.plan_changed' })).toHaveLength(0);
  });

  it('outside every period: a gap that is over is refused; one still running or to come changes only the plan', async () => {
    const ws = await newWorkspace();
    const a = await activePlan(ws.id, 'a', '3000');
    const b = await activePlan(ws.id, 'b', '9000');
    const { access } = await provision(ws.id, a.plan.id); // [Nov 1, Dec 1)
    // A gap [Dec 1, Dec 15), then [Dec 15, Jan 15).
    const renewed = await renewWorkspaceAccess({
      client: t.client,
      path: { accessId: access.id },
      body: { planId: a.plan.id, periodStart: '2026-12-15T00:00:00Z', periodEnd: '2027-01-15T00:00:00Z' },
    });
    expect(renewed.response.status).toBe(200);
    // Nov 20: the gap is still to come.
    current = new Date('2026-11-20T00:00:00Z');
    const ahead = await change(access.id, b.plan.id, '2026-12-05T00:00:00Z');
    expect(ahead.response.status).toBe(200);
    expect(ahead.data!.planId).toBe(b.plan.id);
    expect((await periodsOf(access.id)).map((p) => p.plan_id)).toEqual([a.plan.id, a.plan.id]);
    // Dec 3: the gap is running; an instant of it already past changes only the plan too.
    current = new Date('2026-12-03T00:00:00Z');
    const running = await change(access.id, a.plan.id, '2026-12-02T00:00:00Z');
    expect(running.response.status).toBe(200);
    expect(running.data!.planId).toBe(a.plan.id);
    // Dec 20: the gap is over (the period after it has started): refused, nothing changes.
    current = new Date('2026-12-20T00:00:00Z');
    const over = await change(access.id, b.plan.id, '2026-12-05T00:00:00Z');
    expect(over.response.status).toBe(400);
    expect((over.error as any).error).toMatchObject({ code: 'invalid_parameter', param: 'effectiveAt' });
    expect((over.error as any).error.message).toContain('2026-12-15T00:00:00.000Z');
    // So is the period before it, which has ended.
    expect((await change(access.id, b.plan.id, '2026-11-20T00:00:00Z')).response.status).toBe(400);
    expect((await getWorkspaceAccess({ client: t.client, path: { accessId: access.id } })).data!.planId).toBe(a.plan.id);
    expect((await getWorkspaceAccessQuota({ client: t.client, path: { accessId: access.id } })).data!.planId).toBe(a.plan.id);
    expect(await periodsOf(access.id)).toHaveLength(2);
  });
});

describe('getWorkspaceAccessQuota', () => {
  it('shows granted, reserved, consumed and available as decimal strings', async () => {
    const ws = await newWorkspace();
    const { plan, strategy } = await activePlan(ws.id, 'huge', '9223372036854775807');
    const { access } = await provision(ws.id, plan.id);
    const [period] = await periodsOf(access.id);
    await leaseUnits(t.database.db, period, 1000n, { now: START, expiresAt: new Date(START.getTime() + 60_000) });
    const res = await getWorkspaceAccessQuota({ client: t.client, path: { accessId: access.id } });
    expect(res.data).toEqual({
      workspaceAccessId: access.id,
      planId: plan.id,
      quotaStrategyId: strategy.id,
      quotaPeriodId: period!.id,
      grantedUnits: '9223372036854775807',
      reservedUnits: '1000',
      consumedUnits: '0',
      availableUnits: '9223372036854774807',
      periodStart: START.toISOString(),
      periodEnd: '2026-12-01T00:00:00.000Z',
      toppedUpUnits: '0',
      grantSource: 'provision',
    });
    expect((await getWorkspaceAccessQuota({ client: t.client, path: { accessId: MISSING } })).response.status).toBe(404);
  });
});

describe('inference keys', () => {
  it('issues (plaintext once), lists without plaintext, revokes idempotently without touching plan or quota', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const { access } = await provision(ws.id, plan.id);
    const issued = await issueInferenceKey({
      client: t.client,
      path: { accessId: access.id },
      body: { name: 'laptop', expiresAt: '2027-01-01T00:00:00Z' },
    });
    expect(issued.response.status).toBe(201);
    expect(issued.data).toMatchObject({ name: 'laptop', expiresAt: '2027-01-01T00:00:00.000Z', enabled: true });
    expect(issued.data!.apiKey).toMatch(/^nx-test-[A-Za-z0-9_-]{43}$/);
    expect(issued.data!.prefix).toBe(issued.data!.apiKey.slice(0, 14));
    const defaulted = await issueInferenceKey({ client: t.client, path: { accessId: access.id } });
    expect(defaulted.response.status).toBe(201);
    expect(defaulted.data).toMatchObject({ name: 'default', expiresAt: new Date(START.getTime() + 365 * DAY).toISOString() });
    expect(defaulted.data!.apiKey).not.toBe(issued.data!.apiKey);

    const listed = await listInferenceKeys({ client: t.client, path: { accessId: access.id } });
    expect(listed.data!.map((k) => k.id)).toEqual([defaulted.data!.id, issued.data!.id]);
    expect(listed.data!.every((k) => !('apiKey' in k) && k.workspaceAccessId === access.id)).toBe(true);
    // A key by its id alone (a usage summary's key), with its access: what the list shows, never the plaintext.
    const byId = await getInferenceKey({ client: t.client, path: { keyId: issued.data!.id } });
    expect(byId.response.status).toBe(200);
    expect(byId.data).toEqual(listed.data![1]);
    expect(byId.data).toMatchObject({ workspaceAccessId: access.id, name: 'laptop', prefix: issued.data!.prefix });

    const revoked = await revokeInferenceKey({ client: t.client, path: { accessId: access.id, keyId: issued.data!.id } });
    expect(revoked.response.status).toBe(204);
    expect((await revokeInferenceKey({ client: t.client, path: { accessId: access.id, keyId: issued.data!.id } })).response.status).toBe(
      204,
    );
    const after = await listInferenceKeys({ client: t.client, path: { accessId: access.id } });
    expect(after.data![1]).toMatchObject({ id: issued.data!.id, enabled: false, revokedAt: START.toISOString() });
    expect(after.data![0]!.enabled).toBe(true);
    expect((await getInferenceKey({ client: t.client, path: { keyId: issued.data!.id } })).data).toEqual(after.data![1]);
    expect((await getWorkspaceAccess({ client: t.client, path: { accessId: access.id } })).data).toMatchObject({
      status: 'ACTIVE',
      planId: plan.id,
    });
    expect((await getWorkspaceAccessQuota({ client: t.client, path: { accessId: access.id } })).data!.grantedUnits).toBe('3000');

    // Expired keys show as disabled.
    current = new Date('2027-01-02T00:00:00Z');
    const later = await listInferenceKeys({ client: t.client, path: { accessId: access.id } });
    expect(later.data!.map((k) => k.enabled)).toEqual([true, false]);
  });

  it('keeps lastRequestAt at most once a minute', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const res = await provision(ws.id, plan.id, 'touch', true);
    const keys = t.hooks.inferenceKeys;
    expect(await keys.touchLastRequest(res.apiKeyId!, new Date(START.getTime() + 1000))).toBe(true);
    expect(await keys.touchLastRequest(res.apiKeyId!, new Date(START.getTime() + 30_000))).toBe(false);
    expect(await keys.touchLastRequest(res.apiKeyId!, new Date(START.getTime() + 61_000))).toBe(true);
    const listed = await listInferenceKeys({ client: t.client, path: { accessId: res.access.id } });
    expect(listed.data![0]!.lastRequestAt).toBe(new Date(START.getTime() + 61_000).toISOString());
  });

  it('refuses bad input and keys of another access', async () => {
    const ws = await newWorkspace();
    const { plan } = await activePlan(ws.id);
    const one = await provision(ws.id, plan.id, 'one', true);
    const two = await provision(ws.id, plan.id, 'two');
    const past = await issueInferenceKey({
      client: t.client,
      path: { accessId: two.access.id },
      body: { expiresAt: '2020-01-01T00:00:00Z' },
    });
    expect(past.response.status).toBe(400);
    expect((past.error as any).error.param).toBe('expiresAt');
    const unknown = await rawPost(`/admin/v1/workspace-accesses/${two.access.id}/api-keys`, JSON.stringify({ scopes: ['all'] }));
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.param).toBe('scopes');
    const foreign = await revokeInferenceKey({ client: t.client, path: { accessId: two.access.id, keyId: one.apiKeyId! } });
    expect(foreign.response.status).toBe(404);
    expect((foreign.error as any).error.code).toBe('inference_key_not_found');
    expect((await issueInferenceKey({ client: t.client, path: { accessId: MISSING }, body: {} })).response.status).toBe(404);
    expect((await listInferenceKeys({ client: t.client, path: { accessId: MISSING } })).response.status).toBe(404);
    const missing = await getInferenceKey({ client: t.client, path: { keyId: MISSING } });
    expect(missing.response.status).toBe(404);
    expect((missing.error as any).error.code).toBe('inference_key_not_found');
    const notAnId = await t.fetch(`${t.url}/admin/v1/inference-keys/laptop`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
    expect(notAnId.status).toBe(400);
    expect((await notAnId.json()).error.param).toBe('keyId');
  });
});

describe('tenancy and archived workspaces', () => {
  it('a scoped key without the workspace gets 404 everywhere', async () => {
    const theirs = await newWorkspace('theirs');
    const { plan } = await activePlan(theirs.id);
    const res = await provision(theirs.id, plan.id, 'victim', true);
    const accessId = res.access.id;
    const mine = await newWorkspace('mine');
    const { key } = await t.nexus.services.managementKeys.createScoped(actor, { name: 'scoped-accesses', workspaceIds: [mine.id] });
    const c = t.clientWith(key);
    const period = { planId: plan.id, periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-01-01T00:00:00Z' };
    const statuses = [
      (
        await provisionWorkspaceUser({
          client: c,
          path: { workspaceId: theirs.id },
          body: { externalUserId: 'x', email: 'x@example.com', planId: plan.id },
        })
      ).response.status,
      (await listWorkspaceUsers({ client: c, path: { workspaceId: theirs.id } })).response.status,
      (await getWorkspaceAccess({ client: c, path: { accessId } })).response.status,
      (await activateWorkspaceAccess({ client: c, path: { accessId } })).response.status,
      (await suspendWorkspaceAccess({ client: c, path: { accessId } })).response.status,
      (await renewWorkspaceAccess({ client: c, path: { accessId }, body: period })).response.status,
      (await changeAccessPlan({ client: c, path: { accessId }, body: { planId: plan.id } })).response.status,
      (await issueInferenceKey({ client: c, path: { accessId }, body: {} })).response.status,
      (await listInferenceKeys({ client: c, path: { accessId } })).response.status,
      (await revokeInferenceKey({ client: c, path: { accessId, keyId: res.apiKeyId! } })).response.status,
      (await getWorkspaceAccessQuota({ client: c, path: { accessId } })).response.status,
      (await getInferenceKey({ client: c, path: { keyId: res.apiKeyId! } })).response.status,
    ];
    expect(statuses).toEqual(Array(12).fill(404));
    expect((await getWorkspaceAccess({ client: t.client, path: { accessId } })).data!.status).toBe('ACTIVE');
  });

  it('an archived workspace answers 409 workspace_archived to every change, and stays readable', async () => {
    const ws = await newWorkspace('archived');
    const { plan } = await activePlan(ws.id);
    const res = await provision(ws.id, plan.id, 'frozen', true);
    const accessId = res.access.id;
    await archiveWorkspace({ client: t.client, path: { workspaceId: ws.id } });
    const results = [
      await provisionWorkspaceUser({
        client: t.client,
        path: { workspaceId: ws.id },
        body: { externalUserId: 'new', email: 'n@example.com', planId: plan.id },
      }),
      await suspendWorkspaceAccess({ client: t.client, path: { accessId } }),
      await activateWorkspaceAccess({ client: t.client, path: { accessId } }),
      await renewWorkspaceAccess({
        client: t.client,
        path: { accessId },
        body: { planId: plan.id, periodStart: '2026-12-01T00:00:00Z', periodEnd: '2027-01-01T00:00:00Z' },
      }),
      await changeAccessPlan({ client: t.client, path: { accessId }, body: { planId: plan.id } }),
      await issueInferenceKey({ client: t.client, path: { accessId }, body: {} }),
      await revokeInferenceKey({ client: t.client, path: { accessId, keyId: res.apiKeyId! } }),
    ];
    for (const r of results) {
      expect(r.response.status).toBe(409);
      expect((r.error as any).error.code).toBe('workspace_archived');
    }
    expect((await getWorkspaceAccess({ client: t.client, path: { accessId } })).response.status).toBe(200);
    expect((await listWorkspaceUsers({ client: t.client, path: { workspaceId: ws.id } })).data).toHaveLength(1);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  archiveWorkspace,
  bindPlanStrategy,
  closePlanStrategyBinding,
  createPlan,
  createQuotaStrategy,
  createWorkspace,
  getPlan,
  getPlanStrategy,
  listPlans,
  listPlanStrategies,
  listPlanStrategyBindings,
  publishPlan,
  publishPlanStrategy,
  updatePlan,
} from '../support/sdk.js';
import type { CreateQuotaStrategyDto } from '../../generated/client/types.gen.js';
import { systemActor } from '../../src/domain/actor.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

const MISSING = '01a20000-0000-7000-8000-000000000000';
const PAST = '2020-01-01T00:00:00Z';

async function newWorkspace(name = 'plans') {
  const res = await createWorkspace({ client: t.client, body: { name } });
  return res.data!;
}

const strategyBody = (over: Partial<CreateQuotaStrategyDto> = {}): CreateQuotaStrategyDto => ({
  key: 'std',
  resetInterval: 'MONTH',
  quotaUnits: '1000000',
  inputMultiplierPpm: '1000000',
  outputMultiplierPpm: '3000000',
  cachedInputMultiplierPpm: '100000',
  maxOutputTokens: 4096,
  ...over,
});

async function newStrategy(workspaceId: string, over: Partial<CreateQuotaStrategyDto> = {}, publish = true) {
  const res = await createQuotaStrategy({ client: t.client, path: { workspaceId }, body: strategyBody(over) });
  expect(res.response.status).toBe(201);
  if (!publish) return res.data!;
  const published = await publishPlanStrategy({ client: t.client, path: { strategyId: res.data!.id } });
  expect(published.response.status).toBe(200);
  return published.data!;
}

async function newPlan(workspaceId: string, key = 'pro') {
  const res = await createPlan({
    client: t.client,
    path: { workspaceId },
    body: { key, name: key.toUpperCase(), billingInterval: 'MONTH' },
  });
  expect(res.response.status).toBe(201);
  return res.data!;
}

async function raw(method: string, path: string, body?: string) {
  const res = await t.fetch(`${t.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body } : {}),
  });
  return { status: res.status, body: await res.json() };
}

describe('plans', () => {
  it('creates a DRAFT plan, reads it, lists it and filters by status and key', async () => {
    const ws = await newWorkspace();
    const res = await createPlan({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { key: 'basic', name: 'Basic', billingInterval: 'YEAR', metadata: { a: 1 } },
    });
    expect(res.response.status).toBe(201);
    expect(res.data).toMatchObject({
      workspaceId: ws.id,
      key: 'basic',
      name: 'Basic',
      billingInterval: 'YEAR',
      status: 'DRAFT',
      metadata: { a: 1 },
      passthroughClasses: [],
    });
    const got = await getPlan({ client: t.client, path: { planId: res.data!.id } });
    expect(got.data).toMatchObject({ id: res.data!.id, status: 'DRAFT', strategyBindings: [] });
    await newPlan(ws.id, 'other');
    const all = await listPlans({ client: t.client, path: { workspaceId: ws.id } });
    expect(all.data!.map((p) => p.key)).toEqual(['other', 'basic']);
    const byKey = await listPlans({ client: t.client, path: { workspaceId: ws.id }, query: { key: 'basic' } });
    expect(byKey.data!.map((p) => p.id)).toEqual([res.data!.id]);
    const active = await listPlans({ client: t.client, path: { workspaceId: ws.id }, query: { status: 'ACTIVE' } });
    expect(active.data).toEqual([]);
  });

  it('takes passthrough classes on create and on a DRAFT update, kept in the contract order; a bad one is 400 and changes nothing', async () => {
    const ws = await newWorkspace();
    const res = await createPlan({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { key: 'pass', name: 'Pass', billingInterval: 'MONTH', passthroughClasses: ['fine_tuning', 'files'] },
    });
    expect(res.data).toMatchObject({ status: 'DRAFT', passthroughClasses: ['files', 'fine_tuning'] });
    const planId = res.data!.id;
    const updated = await updatePlan({ client: t.client, path: { planId }, body: { passthroughClasses: ['batches'] } });
    expect(updated.data).toMatchObject({ passthroughClasses: ['batches'] });
    for (const passthroughClasses of [['batch'], ['files', 'files']]) {
      const bad = await updatePlan({ client: t.client, path: { planId }, body: { passthroughClasses: passthroughClasses as never } });
      expect(bad.response.status).toBe(400);
      expect((bad.error as any).error.code).toBe('invalid_parameter');
      const refused = await createPlan({
        client: t.client,
        path: { workspaceId: ws.id },
        body: { key: 'bad', name: 'Bad', billingInterval: 'MONTH', passthroughClasses: passthroughClasses as never },
      });
      expect(refused.response.status).toBe(400);
    }
    expect((await getPlan({ client: t.client, path: { planId } })).data).toMatchObject({ passthroughClasses: ['batches'] });
    expect((await listPlans({ client: t.client, path: { workspaceId: ws.id } })).data!.map((p) => p.key)).toEqual(['pass']);
  });

  it('pages plans with a cursor', async () => {
    const ws = await newWorkspace();
    for (let i = 0; i < 5; i++) await newPlan(ws.id, `p${i}`);
    const first = await listPlans({ client: t.client, path: { workspaceId: ws.id }, query: { limit: 3 } });
    expect(first.data!.map((p) => p.key)).toEqual(['p4', 'p3', 'p2']);
    const cursor = first.response.headers.get('x-next-cursor')!;
    expect(first.response.headers.get('link')).toContain('rel="next"');
    const second = await listPlans({ client: t.client, path: { workspaceId: ws.id }, query: { limit: 3, cursor } });
    expect(second.data!.map((p) => p.key)).toEqual(['p1', 'p0']);
    expect(second.response.headers.get('x-next-cursor')).toBeNull();
  });

  it('refuses a duplicate key in the workspace, allows it in another', async () => {
    const ws = await newWorkspace();
    await newPlan(ws.id, 'dup');
    const again = await createPlan({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { key: 'dup', name: 'x', billingInterval: 'MONTH' },
    });
    expect(again.response.status).toBe(409);
    expect((again.error as any).error).toMatchObject({ code: 'plan_key_exists', param: 'key' });
    const other = await newWorkspace();
    expect(
      (await createPlan({ client: t.client, path: { workspaceId: other.id }, body: { key: 'dup', name: 'x', billingInterval: 'MONTH' } }))
        .response.status,
    ).toBe(201);
  });

  describe.each([
    ['missing key', '{"name":"a","billingInterval":"MONTH"}', 'key'],
    ['a key with capitals', '{"key":"Pro","name":"a","billingInterval":"MONTH"}', 'key'],
    ['an unknown interval', '{"key":"k","name":"a","billingInterval":"WEEK"}', 'billingInterval'],
    ['an empty name', '{"key":"k","name":"","billingInterval":"MONTH"}', 'name'],
    ['an unknown field', '{"key":"k","name":"a","billingInterval":"MONTH","price":5}', 'price'],
  ])('createPlan rejects %s', (_label, body, param) => {
    it('with 400 naming the field', async () => {
      const ws = await newWorkspace();
      const res = await raw('POST', `/admin/v1/workspaces/${ws.id}/plans`, body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_parameter', param });
    });
  });

  it('updates a DRAFT plan (an empty object changes nothing) and refuses once it is ACTIVE', async () => {
    const ws = await newWorkspace();
    const plan = await newPlan(ws.id, 'draft');
    const updated = await updatePlan({ client: t.client, path: { planId: plan.id }, body: { name: 'Renamed', billingInterval: 'YEAR' } });
    expect(updated.response.status).toBe(200);
    expect(updated.data).toMatchObject({ name: 'Renamed', billingInterval: 'YEAR', key: 'draft', status: 'DRAFT' });
    const empty = await updatePlan({ client: t.client, path: { planId: plan.id }, body: {} });
    expect(empty.response.status).toBe(200);
    expect(empty.data).toMatchObject({ name: 'Renamed' });
    await newPlan(ws.id, 'taken');
    const clash = await updatePlan({ client: t.client, path: { planId: plan.id }, body: { key: 'taken' } });
    expect(clash.response.status).toBe(409);
    expect((clash.error as any).error.code).toBe('plan_key_exists');

    const s = await newStrategy(ws.id);
    await bindPlanStrategy({ client: t.client, path: { planId: plan.id }, body: { strategyId: s.id, effectiveFrom: PAST } });
    expect((await publishPlan({ client: t.client, path: { planId: plan.id } })).data!.status).toBe('ACTIVE');
    const refused = await updatePlan({ client: t.client, path: { planId: plan.id }, body: { name: 'Too late' } });
    expect(refused.response.status).toBe(409);
    expect((refused.error as any).error).toMatchObject({ code: 'plan_not_draft', current_status: 'ACTIVE' });
  });

  it('publishes only with a published strategy bound and in force', async () => {
    const ws = await newWorkspace();
    const plan = await newPlan(ws.id);
    const none = await publishPlan({ client: t.client, path: { planId: plan.id } });
    expect(none.response.status).toBe(409);
    expect((none.error as any).error).toMatchObject({ code: 'plan_not_publishable', current_status: 'DRAFT' });
    expect((none.error as any).error.message).toMatch(/no published quota strategy/);

    const s = await newStrategy(ws.id);
    const future = new Date(Date.now() + 86_400_000).toISOString();
    await bindPlanStrategy({ client: t.client, path: { planId: plan.id }, body: { strategyId: s.id, effectiveFrom: future } });
    const notYet = await publishPlan({ client: t.client, path: { planId: plan.id } });
    expect(notYet.response.status).toBe(409);
    expect((notYet.error as any).error.message).toMatch(/not in force yet/);

    const plan2 = await newPlan(ws.id, 'now');
    await bindPlanStrategy({ client: t.client, path: { planId: plan2.id }, body: { strategyId: s.id, effectiveFrom: PAST } });
    const published = await publishPlan({ client: t.client, path: { planId: plan2.id } });
    expect(published.response.status).toBe(200);
    expect(published.data).toMatchObject({ status: 'ACTIVE' });
    expect(published.data!.publishedAt).toBeTruthy();
    const again = await publishPlan({ client: t.client, path: { planId: plan2.id } });
    expect(again.response.status).toBe(200);
    expect(again.data!.status).toBe('ACTIVE');
  });

  it('answers 404 for unknown plans and 400 for malformed ids', async () => {
    const missing = await getPlan({ client: t.client, path: { planId: MISSING } });
    expect(missing.response.status).toBe(404);
    expect((missing.error as any).error.code).toBe('plan_not_found');
    expect((await updatePlan({ client: t.client, path: { planId: MISSING }, body: {} })).response.status).toBe(404);
    expect((await publishPlan({ client: t.client, path: { planId: MISSING } })).response.status).toBe(404);
    expect((await getPlan({ client: t.client, path: { planId: 'nope' } })).response.status).toBe(400);
    expect((await listPlans({ client: t.client, path: { workspaceId: MISSING } })).response.status).toBe(404);
  });
});

describe('quota strategies', () => {
  it('versions by key, DRAFT until published, immutable after', async () => {
    const ws = await newWorkspace();
    const v1 = await newStrategy(ws.id, { key: 'fam' }, false);
    expect(v1).toMatchObject({
      key: 'fam',
      version: 1,
      status: 'DRAFT',
      type: 'QUOTA',
      quotaUnits: '1000000',
      inputMultiplierPpm: '1000000',
      outputMultiplierPpm: '3000000',
      cachedInputMultiplierPpm: '100000',
      maxOutputTokens: 4096,
      resetInterval: 'MONTH',
    });
    const v2 = await newStrategy(ws.id, { key: 'fam', quotaUnits: '2000000' }, false);
    expect(v2).toMatchObject({ version: 2, quotaUnits: '2000000' });
    const other = await newStrategy(ws.id, { key: 'solo' }, false);
    expect(other.version).toBe(1);

    const published = await publishPlanStrategy({ client: t.client, path: { strategyId: v1.id } });
    expect(published.data).toMatchObject({ status: 'PUBLISHED', version: 1 });
    expect(published.data!.publishedAt).toBeTruthy();
    const again = await publishPlanStrategy({ client: t.client, path: { strategyId: v1.id } });
    expect(again.response.status).toBe(409);
    expect((again.error as any).error).toMatchObject({ code: 'strategy_published', current_status: 'PUBLISHED' });

    const got = await getPlanStrategy({ client: t.client, path: { strategyId: v2.id } });
    expect(got.data).toEqual(v2);
    const fam = await listPlanStrategies({ client: t.client, path: { workspaceId: ws.id }, query: { key: 'fam' } });
    expect(fam.data!.map((s) => s.version)).toEqual([2, 1]);
    const drafts = await listPlanStrategies({ client: t.client, path: { workspaceId: ws.id }, query: { status: 'DRAFT' } });
    expect(drafts.data!.map((s) => s.id).sort()).toEqual([v2.id, other.id].sort());
    expect((await getPlanStrategy({ client: t.client, path: { strategyId: MISSING } })).response.status).toBe(404);
  });

  it('concurrent creates of one key get distinct consecutive versions', async () => {
    const ws = await newWorkspace();
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        createQuotaStrategy({ client: t.client, path: { workspaceId: ws.id }, body: strategyBody({ key: 'race' }) }),
      ),
    );
    expect(results.every((r) => r.response.status === 201)).toBe(true);
    expect(results.map((r) => r.data!.version).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('accepts 2^63-1 and zero multipliers', async () => {
    const ws = await newWorkspace();
    const s = await newStrategy(ws.id, { quotaUnits: '9223372036854775807', cachedInputMultiplierPpm: '0' }, false);
    expect(s).toMatchObject({ quotaUnits: '9223372036854775807', cachedInputMultiplierPpm: '0' });
  });

  describe.each([
    ['a negative quota', { quotaUnits: '-1' }, 'quotaUnits'],
    ['a fraction', { inputMultiplierPpm: '1.5' }, 'inputMultiplierPpm'],
    ['2^63', { quotaUnits: '9223372036854775808' }, 'quotaUnits'],
    ['9999999999999999999', { outputMultiplierPpm: '9999999999999999999' }, 'outputMultiplierPpm'],
    ['20 digits', { cachedInputMultiplierPpm: '10000000000000000000' }, 'cachedInputMultiplierPpm'],
    ['a leading zero', { quotaUnits: '0100' }, 'quotaUnits'],
    ['a number instead of a string', { quotaUnits: 1000 }, 'quotaUnits'],
    ['hex', { quotaUnits: '0x10' }, 'quotaUnits'],
    ['maxOutputTokens 0', { maxOutputTokens: 0 }, 'maxOutputTokens'],
    ['maxOutputTokens 1.5', { maxOutputTokens: 1.5 }, 'maxOutputTokens'],
    ['maxOutputTokens as a string', { maxOutputTokens: '10' }, 'maxOutputTokens'],
    ['an unknown interval', { resetInterval: 'DAY' }, 'resetInterval'],
    ['a missing multiplier', { inputMultiplierPpm: undefined }, 'inputMultiplierPpm'],
    ['an unknown field', { status: 'PUBLISHED' }, 'status'],
  ])('createQuotaStrategy rejects %s', (_label, over, param) => {
    it('with 400 naming the field, creating nothing', async () => {
      const ws = await newWorkspace();
      const res = await raw('POST', `/admin/v1/workspaces/${ws.id}/plan-strategies/quota`, JSON.stringify({ ...strategyBody(), ...over }));
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_parameter', param });
      expect(await t.database.db('quota_strategies').where({ workspace_id: ws.id })).toEqual([]);
    });
  });
});

describe('strategy bindings', () => {
  it('binds a version, upgrades to the next from T (ending the first at T), and keeps the history', async () => {
    const ws = await newWorkspace();
    const plan = await newPlan(ws.id);
    const v1 = await newStrategy(ws.id, { key: 'fam' });
    const v2 = await newStrategy(ws.id, { key: 'fam', quotaUnits: '5' });
    const b1 = await bindPlanStrategy({ client: t.client, path: { planId: plan.id }, body: { strategyId: v1.id, effectiveFrom: PAST } });
    expect(b1.response.status).toBe(201);
    expect(b1.data).toMatchObject({ planId: plan.id, strategyId: v1.id, strategyType: 'QUOTA', effectiveFrom: '2020-01-01T00:00:00.000Z' });
    expect(b1.data!.effectiveTo).toBeUndefined();

    const t1 = new Date(Date.now() - 60_000).toISOString();
    const b2 = await bindPlanStrategy({ client: t.client, path: { planId: plan.id }, body: { strategyId: v2.id, effectiveFrom: t1 } });
    expect(b2.response.status).toBe(201);
    const history = await listPlanStrategyBindings({ client: t.client, path: { planId: plan.id } });
    expect(history.data!.map((b) => b.id)).toEqual([b2.data!.id, b1.data!.id]);
    expect(history.data![1]!.effectiveTo).toBe(t1);
    expect(history.data![0]!.effectiveTo).toBeUndefined();

    const detail = await getPlan({ client: t.client, path: { planId: plan.id } });
    expect(detail.data!.strategyBindings.map((b) => b.id)).toEqual([b2.data!.id]);

    // Binding from before the latest start would overlap it.
    const overlap = await bindPlanStrategy({
      client: t.client,
      path: { planId: plan.id },
      body: { strategyId: v1.id, effectiveFrom: PAST },
    });
    expect(overlap.response.status).toBe(409);
    expect((overlap.error as any).error).toMatchObject({ code: 'binding_overlap', param: 'effectiveFrom' });
  });

  it('binds only a published strategy of the same workspace', async () => {
    const ws = await newWorkspace();
    const plan = await newPlan(ws.id);
    const draft = await newStrategy(ws.id, {}, false);
    const refused = await bindPlanStrategy({
      client: t.client,
      path: { planId: plan.id },
      body: { strategyId: draft.id, effectiveFrom: PAST },
    });
    expect(refused.response.status).toBe(409);
    expect((refused.error as any).error).toMatchObject({ code: 'strategy_not_published', current_status: 'DRAFT' });
    const elsewhere = await newStrategy((await newWorkspace()).id);
    const foreign = await bindPlanStrategy({
      client: t.client,
      path: { planId: plan.id },
      body: { strategyId: elsewhere.id, effectiveFrom: PAST },
    });
    expect(foreign.response.status).toBe(404);
    expect((foreign.error as any).error.code).toBe('strategy_not_found');
    const badTime = await raw(
      'POST',
      `/admin/v1/plans/${plan.id}/strategy-bindings`,
      JSON.stringify({ strategyId: draft.id, effectiveFrom: '2026-13-01' }),
    );
    expect(badTime.status).toBe(400);
    expect(badTime.body.error.param).toBe('effectiveFrom');
    const missing = await bindPlanStrategy({
      client: t.client,
      path: { planId: MISSING },
      body: { strategyId: draft.id, effectiveFrom: PAST },
    });
    expect(missing.response.status).toBe(404);
  });

  it('closes a binding at the requested time (now by default); closing an ended one is 409', async () => {
    const ws = await newWorkspace();
    const plan = await newPlan(ws.id);
    const s = await newStrategy(ws.id);
    const b = (await bindPlanStrategy({ client: t.client, path: { planId: plan.id }, body: { strategyId: s.id, effectiveFrom: PAST } }))
      .data!;
    const early = await closePlanStrategyBinding({
      client: t.client,
      path: { bindingId: b.id },
      query: { effectiveAt: '2019-01-01T00:00:00Z' },
    });
    expect(early.response.status).toBe(400);
    expect((early.error as any).error.param).toBe('effectiveAt');

    const at = new Date(Date.now() + 3_600_000).toISOString();
    const closed = await closePlanStrategyBinding({ client: t.client, path: { bindingId: b.id }, query: { effectiveAt: at } });
    expect(closed.response.status).toBe(200);
    expect(closed.data).toEqual({ accepted: true });
    expect((await listPlanStrategyBindings({ client: t.client, path: { planId: plan.id } })).data![0]!.effectiveTo).toBe(at);
    // Still in force until then; closing again now shortens it.
    expect((await getPlan({ client: t.client, path: { planId: plan.id } })).data!.strategyBindings).toHaveLength(1);
    expect((await closePlanStrategyBinding({ client: t.client, path: { bindingId: b.id } })).response.status).toBe(200);
    expect((await getPlan({ client: t.client, path: { planId: plan.id } })).data!.strategyBindings).toHaveLength(0);
    const again = await closePlanStrategyBinding({ client: t.client, path: { bindingId: b.id } });
    expect(again.response.status).toBe(409);
    expect((again.error as any).error.code).toBe('binding_closed');
    expect((await closePlanStrategyBinding({ client: t.client, path: { bindingId: MISSING } })).response.status).toBe(404);
    const badTime = await t.fetch(`${t.url}/admin/v1/plan-strategy-bindings/${b.id}?effectiveAt=yesterday`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}` },
    });
    expect(badTime.status).toBe(400);
  });

  it('a plain close withdraws a binding that has not started (closed at its start, never in force)', async () => {
    const ws = await newWorkspace();
    const plan = await newPlan(ws.id);
    const s = await newStrategy(ws.id);
    const later = '2031-01-01T00:00:00.000Z';
    const b = (await bindPlanStrategy({ client: t.client, path: { planId: plan.id }, body: { strategyId: s.id, effectiveFrom: later } }))
      .data!;
    const closed = await closePlanStrategyBinding({ client: t.client, path: { bindingId: b.id } });
    expect(closed.response.status).toBe(200);
    expect((await listPlanStrategyBindings({ client: t.client, path: { planId: plan.id } })).data![0]).toMatchObject({
      effectiveFrom: later,
      effectiveTo: later,
    });
    // No longer in the way of an earlier binding.
    const earlier = await bindPlanStrategy({
      client: t.client,
      path: { planId: plan.id },
      body: { strategyId: s.id, effectiveFrom: PAST },
    });
    expect(earlier.response.status).toBe(201);
  });

  it('writes an audit entry per change', async () => {
    const ws = await newWorkspace();
    const plan = await newPlan(ws.id);
    const s = await newStrategy(ws.id);
    const b = (await bindPlanStrategy({ client: t.client, path: { planId: plan.id }, body: { strategyId: s.id, effectiveFrom: PAST } }))
      .data!;
    await publishPlan({ client: t.client, path: { planId: plan.id } });
    await closePlanStrategyBinding({ client: t.client, path: { bindingId: b.id } });
    const rows = await t.database.db('audit_logs').where({ workspace_id: ws.id }).orderBy('id');
    expect(rows.map((r) => r.action)).toEqual([
      'workspace.created',
      'plan.created',
      'quota_strategy.created',
      'quota_strategy.published',
      'plan.strategy_bound',
      'plan.published',
      'plan.strategy_binding_closed',
    ]);
  });
});

describe('tenancy and archived workspaces', () => {
  it('a scoped key without the workspace sees 404 everywhere', async () => {
    const theirs = await newWorkspace('theirs');
    const plan = await newPlan(theirs.id);
    const s = await newStrategy(theirs.id);
    const b = (await bindPlanStrategy({ client: t.client, path: { planId: plan.id }, body: { strategyId: s.id, effectiveFrom: PAST } }))
      .data!;
    const mine = await newWorkspace('mine');
    const { key } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
      name: 'scoped-plans',
      workspaceIds: [mine.id],
    });
    const c = t.clientWith(key);
    const statuses = [
      (await createPlan({ client: c, path: { workspaceId: theirs.id }, body: { key: 'x', name: 'x', billingInterval: 'MONTH' } })).response
        .status,
      (await listPlans({ client: c, path: { workspaceId: theirs.id } })).response.status,
      (await getPlan({ client: c, path: { planId: plan.id } })).response.status,
      (await updatePlan({ client: c, path: { planId: plan.id }, body: { name: 'x' } })).response.status,
      (await publishPlan({ client: c, path: { planId: plan.id } })).response.status,
      (await createQuotaStrategy({ client: c, path: { workspaceId: theirs.id }, body: strategyBody() })).response.status,
      (await listPlanStrategies({ client: c, path: { workspaceId: theirs.id } })).response.status,
      (await getPlanStrategy({ client: c, path: { strategyId: s.id } })).response.status,
      (await publishPlanStrategy({ client: c, path: { strategyId: s.id } })).response.status,
      (await bindPlanStrategy({ client: c, path: { planId: plan.id }, body: { strategyId: s.id, effectiveFrom: PAST } })).response.status,
      (await listPlanStrategyBindings({ client: c, path: { planId: plan.id } })).response.status,
      (await closePlanStrategyBinding({ client: c, path: { bindingId: b.id } })).response.status,
    ];
    expect(statuses).toEqual(Array(12).fill(404));
    expect(
      (await createPlan({ client: c, path: { workspaceId: mine.id }, body: { key: 'x', name: 'x', billingInterval: 'MONTH' } })).response
        .status,
    ).toBe(201);
  });

  it('refuses a missing or unknown Management Key with 401', async () => {
    const ws = await newWorkspace('unauth');
    for (const token of [undefined, 'nx-mgmt-unknown-key-000000000000']) {
      const c = t.clientWith(token);
      expect(
        (await createPlan({ client: c, path: { workspaceId: ws.id }, body: { key: 'x', name: 'x', billingInterval: 'MONTH' } })).response
          .status,
      ).toBe(401);
      expect((await listPlanStrategies({ client: c, path: { workspaceId: ws.id } })).response.status).toBe(401);
      expect((await closePlanStrategyBinding({ client: c, path: { bindingId: MISSING } })).response.status).toBe(401);
    }
  });

  it('an archived workspace is read-only: 409 workspace_archived on every change', async () => {
    const ws = await newWorkspace('archived');
    const plan = await newPlan(ws.id);
    const s = await newStrategy(ws.id);
    const draft = await newStrategy(ws.id, { key: 'd' }, false);
    await archiveWorkspace({ client: t.client, path: { workspaceId: ws.id } });
    const results = [
      await createPlan({ client: t.client, path: { workspaceId: ws.id }, body: { key: 'x', name: 'x', billingInterval: 'MONTH' } }),
      await updatePlan({ client: t.client, path: { planId: plan.id }, body: { name: 'x' } }),
      await publishPlan({ client: t.client, path: { planId: plan.id } }),
      await createQuotaStrategy({ client: t.client, path: { workspaceId: ws.id }, body: strategyBody() }),
      await publishPlanStrategy({ client: t.client, path: { strategyId: draft.id } }),
      await bindPlanStrategy({ client: t.client, path: { planId: plan.id }, body: { strategyId: s.id, effectiveFrom: PAST } }),
    ];
    for (const r of results) {
      expect(r.response.status).toBe(409);
      expect((r.error as any).error.code).toBe('workspace_archived');
    }
    expect((await getPlan({ client: t.client, path: { planId: plan.id } })).response.status).toBe(200);
  });
});

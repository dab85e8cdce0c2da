/**
 * A quota strategy's model rules, allow-list and output cap policy through the Admin
 * API: created, read, listed, immutable once published; bad input is a 400 naming the
 * field, creating nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQuotaStrategy, createWorkspace, getPlanStrategy, listPlanStrategies, publishPlanStrategy } from '../support/sdk.js';
import type { CreateQuotaStrategyDto } from '../../generated/client/types.gen.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

const body = (over: Record<string, unknown> = {}): CreateQuotaStrategyDto => ({
  key: 'priced',
  resetInterval: 'MONTH',
  quotaUnits: '1000000',
  inputMultiplierPpm: '1000000',
  outputMultiplierPpm: '2000000',
  cachedInputMultiplierPpm: '500000',
  maxOutputTokens: 4096,
  ...over,
});

const rule = (pattern: string, ppm = '3000000') => ({
  pattern,
  inputMultiplierPpm: ppm,
  cachedInputMultiplierPpm: ppm,
  outputMultiplierPpm: ppm,
});

async function newWorkspace() {
  return (await createWorkspace({ client: t.client, body: { name: 'pricing' } })).data!;
}

async function raw(path: string, payload: unknown) {
  const res = await t.fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  return { status: res.status, body: await res.json() };
}

describe('model rules, allow-list and output cap policy on quota strategies', () => {
  it('are created, read, listed and published as given, in order', async () => {
    const ws = await newWorkspace();
    const modelRules = [rule('gpt-4o-mini*', '150000'), rule('gpt-4o*', '2500000'), rule('claude-3-5-haiku-20241022')];
    const created = await createQuotaStrategy({
      client: t.client,
      path: { workspaceId: ws.id },
      body: body({ modelRules, allowedModels: ['gpt-4o*', 'claude-*'], outputCapPolicy: 'refuse' }),
    });
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ modelRules, allowedModels: ['gpt-4o*', 'claude-*'], outputCapPolicy: 'refuse', status: 'DRAFT' });
    const published = await publishPlanStrategy({ client: t.client, path: { strategyId: created.data!.id } });
    expect(published.data).toMatchObject({
      modelRules,
      allowedModels: ['gpt-4o*', 'claude-*'],
      outputCapPolicy: 'refuse',
      status: 'PUBLISHED',
    });
    const got = await getPlanStrategy({ client: t.client, path: { strategyId: created.data!.id } });
    expect(got.data).toEqual(published.data);
    const listed = await listPlanStrategies({ client: t.client, path: { workspaceId: ws.id } });
    expect(listed.data).toEqual([published.data]);
  });

  it('default to no rules, every model and clamp; null allowedModels is every model', async () => {
    const ws = await newWorkspace();
    const plain = await createQuotaStrategy({ client: t.client, path: { workspaceId: ws.id }, body: body() });
    expect(plain.response.status).toBe(201);
    expect(plain.data).toMatchObject({ modelRules: [], outputCapPolicy: 'clamp' });
    expect(plain.data!.allowedModels).toBeUndefined();
    const open = await createQuotaStrategy({
      client: t.client,
      path: { workspaceId: ws.id },
      body: body({ key: 'open', allowedModels: null }),
    });
    expect(open.response.status).toBe(201);
    expect(open.data!.allowedModels).toBeUndefined();
  });

  it('a published version keeps its rules: a new version carries new ones', async () => {
    const ws = await newWorkspace();
    const v1 = await createQuotaStrategy({ client: t.client, path: { workspaceId: ws.id }, body: body({ modelRules: [rule('a*')] }) });
    await publishPlanStrategy({ client: t.client, path: { strategyId: v1.data!.id } });
    const v2 = await createQuotaStrategy({ client: t.client, path: { workspaceId: ws.id }, body: body({ modelRules: [rule('b*')] }) });
    expect(v2.data).toMatchObject({ version: 2, modelRules: [rule('b*')] });
    expect((await getPlanStrategy({ client: t.client, path: { strategyId: v1.data!.id } })).data!.modelRules).toEqual([rule('a*')]);
    // The database refuses a change to a published row, whoever writes.
    await expect(t.database.db('quota_strategies').where({ id: v1.data!.id }).update({ output_cap_policy: 'refuse' })).rejects.toThrow(
      /immutable/,
    );
  });

  describe.each([
    ['an unknown field in a rule', { modelRules: [{ ...rule('gpt-4o'), note: 'x' }] }, 'modelRules.0.note'],
    [
      'a rule without its output multiplier',
      { modelRules: [{ pattern: 'x', inputMultiplierPpm: '1', cachedInputMultiplierPpm: '1' }] },
      'modelRules.0.outputMultiplierPpm',
    ],
    ['an empty pattern', { modelRules: [rule('')] }, 'modelRules.0.pattern'],
    ['a ? wildcard', { modelRules: [rule('gpt-4?')] }, 'modelRules.0.pattern'],
    ['a character class', { modelRules: [rule('gpt-[34]o')] }, 'modelRules.0.pattern'],
    ['an alternative', { modelRules: [rule('{gpt,claude}-*')] }, 'modelRules.0.pattern'],
    ['an escape', { modelRules: [rule('gpt\\*')] }, 'modelRules.0.pattern'],
    ['a space', { modelRules: [rule('gpt 4o')] }, 'modelRules.0.pattern'],
    ['a pattern of 257 characters', { modelRules: [rule('m'.repeat(257))] }, 'modelRules.0.pattern'],
    ['a pattern listed twice', { modelRules: [rule('gpt-4o*'), rule('claude-*'), rule('gpt-4o*', '1')] }, 'modelRules.2.pattern'],
    ['a negative multiplier', { modelRules: [{ ...rule('x'), inputMultiplierPpm: '-1' }] }, 'modelRules.0.inputMultiplierPpm'],
    [
      'a multiplier of 2^63',
      { modelRules: [{ ...rule('x'), outputMultiplierPpm: '9223372036854775808' }] },
      'modelRules.0.outputMultiplierPpm',
    ],
    ['a multiplier as a number', { modelRules: [{ ...rule('x'), cachedInputMultiplierPpm: 5 }] }, 'modelRules.0.cachedInputMultiplierPpm'],
    ['101 rules', { modelRules: Array.from({ length: 101 }, (_, i) => rule(`m-${i}`)) }, 'modelRules'],
    ['an empty allow-list', { allowedModels: [] }, 'allowedModels'],
    ['an allow-list glob with ?', { allowedModels: ['gpt-4o', 'claude-?'] }, 'allowedModels.1'],
    ['an allow-list entry listed twice', { allowedModels: ['gpt-4o', 'gpt-4o'] }, 'allowedModels.1'],
    ['an allow-list that is a string', { allowedModels: 'gpt-4o' }, 'allowedModels'],
    ['an unknown cap policy', { outputCapPolicy: 'truncate' }, 'outputCapPolicy'],
  ])('createQuotaStrategy rejects %s', (_label, over, param) => {
    it('with 400 naming the field, creating nothing', async () => {
      const ws = await newWorkspace();
      const res = await raw(`/admin/v1/workspaces/${ws.id}/plan-strategies/quota`, body(over));
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_parameter', param });
      expect(await t.database.db('quota_strategies').where({ workspace_id: ws.id })).toEqual([]);
    });
  });
});

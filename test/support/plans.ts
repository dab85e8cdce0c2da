/**
 * An ACTIVE plan through the Admin API: a quota strategy, published, bound to a
 * new plan from `effectiveFrom`, and the plan published. Each step is checked,
 * so a fixture that fails says which step did.
 */
import { expect } from 'vitest';
import type { Client } from '../../generated/client/client/index.js';
import { bindPlanStrategy, createPlan, createQuotaStrategy, publishPlan, publishPlanStrategy } from './sdk.js';
import type { Int64String, ModelRule, OutputCapPolicy, QuotaStrategyDto, RateLimits, WorkspacePlanDto } from '../../generated/client/types.gen.js';

export interface ActivePlanOptions {
  /** The plan's key; its strategy's is `strategyKey` or `${key}-q`. */
  key: string;
  strategyKey?: string;
  quotaUnits?: Int64String;
  resetInterval?: 'MONTH' | 'YEAR';
  inputMultiplierPpm?: Int64String;
  outputMultiplierPpm?: Int64String;
  cachedInputMultiplierPpm?: Int64String;
  maxOutputTokens?: number;
  modelRules?: ModelRule[];
  allowedModels?: string[] | null;
  outputCapPolicy?: OutputCapPolicy;
  /** Default: long ago, so the binding is in force whatever the test's clock says. */
  effectiveFrom?: string;
  /** The plan's rate limits (none by default). */
  rateLimits?: RateLimits;
}

export async function activePlanThrough(
  client: Client,
  workspaceId: string,
  o: ActivePlanOptions,
): Promise<{ plan: WorkspacePlanDto; strategy: QuotaStrategyDto }> {
  const strategy = await createQuotaStrategy({
    client,
    path: { workspaceId },
    body: {
      key: o.strategyKey ?? `${o.key}-q`,
      resetInterval: o.resetInterval ?? 'MONTH',
      quotaUnits: o.quotaUnits ?? '1000',
      inputMultiplierPpm: o.inputMultiplierPpm ?? '1000000',
      outputMultiplierPpm: o.outputMultiplierPpm ?? '1000000',
      cachedInputMultiplierPpm: o.cachedInputMultiplierPpm ?? '1000000',
      maxOutputTokens: o.maxOutputTokens ?? 100,
      ...(o.modelRules ? { modelRules: o.modelRules } : {}),
      ...(o.allowedModels !== undefined ? { allowedModels: o.allowedModels } : {}),
      ...(o.outputCapPolicy ? { outputCapPolicy: o.outputCapPolicy } : {}),
    },
  });
  expect(strategy.response.status, JSON.stringify(strategy.error)).toBe(201);
  const published = await publishPlanStrategy({ client, path: { strategyId: strategy.data!.id } });
  expect(published.response.status, JSON.stringify(published.error)).toBe(200);
  const plan = await createPlan({ client, path: { workspaceId }, body: { key: o.key, name: o.key, billingInterval: 'MONTH', ...(o.rateLimits ? { rateLimits: o.rateLimits } : {}) } });
  expect(plan.response.status, JSON.stringify(plan.error)).toBe(201);
  const bound = await bindPlanStrategy({
    client,
    path: { planId: plan.data!.id },
    body: { strategyId: strategy.data!.id, effectiveFrom: o.effectiveFrom ?? '2020-01-01T00:00:00Z' },
  });
  expect(bound.response.status, JSON.stringify(bound.error)).toBe(201);
  const active = await publishPlan({ client, path: { planId: plan.data!.id } });
  expect(active.response.status, JSON.stringify(active.error)).toBe(200);
  return { plan: active.data!, strategy: published.data! };
}

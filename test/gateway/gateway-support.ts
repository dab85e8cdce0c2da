/**
 * Gateway test support: tenant fixtures made through the Admin API with the
 * generated client (workspace, provider connection, plan, strategy, binding,
 * publish, user with key), and the contract-checking fetch for gateway calls.
 */
import {
  createProviderConnection,
  createWorkspace,
  provisionWorkspaceUser,
} from '../support/sdk.js';
import { expect } from 'vitest';
import type { RateLimits } from '../../generated/client/types.gen.js';
import { contractFetch } from '../support/contract.js';
import { activePlanThrough } from '../support/plans.js';
import type { TestApp } from '../support/test-app.js';
import type { ModelRule, OutputCapPolicy } from '../../generated/client/types.gen.js';

/** fetch for gateway calls (and SDKs): every answer is checked against the contract's proxyProvider* operations. */
export const gatewayFetch = contractFetch;

export interface Tenant {
  workspaceId: string;
  connectionId: string;
  gatewayBaseUrl: string;
  planId: string;
  strategyId: string;
  accessId: string;
  apiKey: string;
  apiKeyId: string;
}

export interface TenantOptions {
  profile?: 'openai' | 'anthropic';
  baseUrl: string;
  providerKey: string;
  quotaUnits?: bigint;
  inputPpm?: bigint;
  outputPpm?: bigint;
  cachedPpm?: bigint;
  maxOutputTokens?: number;
  modelRules?: ModelRule[];
  allowedModels?: string[] | null;
  outputCapPolicy?: OutputCapPolicy;
  allowUnmeteredPassthrough?: boolean;
  upstreamTimeoutMs?: number;
  /** The plan's rate limits (none by default). */
  rateLimits?: RateLimits;
}

let seq = 0;

/** A workspace with one connection and one user on a published plan, all through the Admin API. */
export async function createTenant(t: TestApp, o: TenantOptions): Promise<Tenant> {
  const n = ++seq;
  const ws = await createWorkspace({ client: t.client, body: { name: `gw-${n}`, allowUnmeteredPassthrough: o.allowUnmeteredPassthrough ?? false } });
  expect(ws.response.status).toBe(201);
  const workspaceId = ws.data!.id;
  const conn = await createProviderConnection({
    client: t.client,
    path: { workspaceId },
    body: {
      name: `upstream-${n}`,
      protocolProfile: o.profile ?? 'openai',
      baseUrl: o.baseUrl,
      apiKey: o.providerKey,
      ...(o.upstreamTimeoutMs ? { upstreamTimeoutMs: o.upstreamTimeoutMs } : {}),
    },
  });
  expect(conn.response.status, JSON.stringify(conn.error)).toBe(201);
  const { plan, strategy } = await activePlanThrough(t.client, workspaceId, {
    key: `plan-${n}`,
    strategyKey: `quota-${n}`,
    quotaUnits: `${o.quotaUnits ?? 1_000_000n}`,
    inputMultiplierPpm: `${o.inputPpm ?? 1_000_000n}`,
    outputMultiplierPpm: `${o.outputPpm ?? 2_000_000n}`,
    cachedInputMultiplierPpm: `${o.cachedPpm ?? 500_000n}`,
    maxOutputTokens: o.maxOutputTokens ?? 1000,
    modelRules: o.modelRules,
    allowedModels: o.allowedModels,
    outputCapPolicy: o.outputCapPolicy,
    effectiveFrom: new Date(Date.now() - 86_400_000).toISOString(),
    ...(o.rateLimits ? { rateLimits: o.rateLimits } : {}),
  });
  const user = await provisionWorkspaceUser({
    client: t.client,
    path: { workspaceId },
    body: { externalUserId: `user-${n}`, email: `user${n}@example.com`, planId: plan.id, issueInferenceKey: true },
  });
  expect(user.response.status, JSON.stringify(user.error)).toBe(201);
  return {
    workspaceId,
    connectionId: conn.data!.id,
    gatewayBaseUrl: conn.data!.gatewayBaseUrl,
    planId: plan.id,
    strategyId: strategy.id,
    accessId: user.data!.access.id,
    apiKey: user.data!.apiKey!,
    apiKeyId: user.data!.apiKeyId!,
  };
}

/** The access's current period numbers, straight from the database. */
export async function periodOf(t: TestApp, accessId: string) {
  const row = await t.database.db('quota_periods').where({ workspace_access_id: accessId }).orderBy('period_start', 'desc').first();
  return { granted: BigInt(row.granted_units), reserved: BigInt(row.reserved_units), consumed: BigInt(row.consumed_units) };
}

/** Waits until `check` holds, asking every 25 ms; fails after `ms`. */
export async function until(check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

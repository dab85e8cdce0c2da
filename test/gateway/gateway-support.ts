/**
 * Gateway test support: tenant fixtures made through the Admin API with the
 * generated client (workspace, provider connection, plan, strategy, binding,
 * publish, user with key), and a fetch that checks every gateway answer against
 * the contract's proxyProvider* operations (openapi-backend's router cannot
 * match a greedy providerPath, so the generic check in test/support/contract.ts
 * does not see these).
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { OpenAPIBackend } from 'openapi-backend';
import addFormatsPkg from 'ajv-formats';
import { Ajv } from 'ajv';
import { expect } from 'vitest';
import {
  bindPlanStrategy,
  createPlan,
  createProviderConnection,
  createQuotaStrategy,
  createWorkspace,
  provisionWorkspaceUser,
  publishPlan,
  publishPlanStrategy,
} from '../../generated/client/sdk.gen.js';
import { loadContract } from '../../src/app.js';
import { ContractViolation } from '../support/contract.js';
import { runDir } from '../support/paths.js';
import type { TestApp } from '../support/test-app.js';

const addFormats = addFormatsPkg as unknown as (ajv: unknown) => unknown;
let backend: OpenAPIBackend | undefined;
const headerAjv = new Ajv({ strict: false });
addFormats(headerAjv);

function contract(): OpenAPIBackend {
  if (!backend) {
    backend = new OpenAPIBackend({ definition: loadContract(), quick: true, validate: true, ajvOpts: { strict: false }, customizeAjv: (ajv) => (addFormats(ajv), ajv) });
    backend.validateDefinition = () => backend!.document;
    backend.init();
  }
  return backend;
}

const OPS: Record<string, string> = {
  GET: 'proxyProviderGet',
  POST: 'proxyProviderPost',
  PUT: 'proxyProviderPut',
  PATCH: 'proxyProviderPatch',
  DELETE: 'proxyProviderDelete',
};

/** Checks one gateway answer: declared status, Error body on errors, the x-nexus-* headers. */
export function checkGatewayResponse(method: string, status: number, headers: Headers, body: unknown): void {
  const api = contract();
  const id = OPS[method];
  if (!id) throw new ContractViolation(`${method}: not a gateway method`);
  const operation = api.getOperation(id)!;
  // Any status the provider sends is passed through as it is (documented under 200).
  const declared = (operation.responses as Record<string, any>)[String(status)] ?? (status < 400 || status >= 500 ? operation.responses!['200'] : undefined);
  const nexusError = headers.get('x-nexus-request-id') && body && typeof body === 'object' && 'error' in (body as object) && typeof (body as any).error?.code === 'string' && typeof (body as any).error?.request_id === 'string';
  if (!declared && nexusError) throw new ContractViolation(`${id}: status ${status} is not declared`);
  const spec = (declared ?? operation.responses!['200']) as { headers?: Record<string, { required?: boolean; schema?: object }> };
  for (const [name, h] of Object.entries(spec.headers ?? {})) {
    const value = headers.get(name);
    if (value === null) {
      if (h.required) throw new ContractViolation(`${id} ${status}: header ${name} is missing`);
      continue;
    }
    if (h.schema && !headerAjv.validate(h.schema, value)) throw new ContractViolation(`${id} ${status}: header ${name}='${value}' does not match`);
  }
  if (nexusError) {
    const result = api.validateResponse(body, operation, status);
    if (result.errors?.length) throw new ContractViolation(`${id} ${status}: ${JSON.stringify(result.errors)}`);
  }
  mkdirSync(runDir, { recursive: true });
  appendFileSync(join(runDir, `contract-${process.pid}.jsonl`), JSON.stringify({ operationId: id, method, status }) + '\n');
}

/** fetch for gateway calls (and SDKs): every answer's status and headers are checked against the contract. */
export function gatewayFetch(inner: typeof fetch = fetch): typeof fetch {
  return async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    const response = await inner(request);
    let body: unknown;
    if ((response.headers.get('content-type') ?? '').includes('application/json')) {
      const text = await response.clone().text();
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    }
    checkGatewayResponse(request.method, response.status, response.headers, body);
    return response;
  };
}

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
  allowUnmeteredPassthrough?: boolean;
  upstreamTimeoutMs?: number;
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
    } as never,
  });
  expect(conn.response.status, JSON.stringify(conn.error)).toBe(201);
  const plan = await createPlan({ client: t.client, path: { workspaceId }, body: { key: `plan-${n}`, name: 'Plan', billingInterval: 'MONTH' } });
  expect(plan.response.status, JSON.stringify(plan.error)).toBe(201);
  const strategy = await createQuotaStrategy({
    client: t.client,
    path: { workspaceId },
    body: {
      key: `quota-${n}`,
      resetInterval: 'MONTH',
      quotaUnits: String(o.quotaUnits ?? 1_000_000n),
      inputMultiplierPpm: String(o.inputPpm ?? 1_000_000n),
      outputMultiplierPpm: String(o.outputPpm ?? 2_000_000n),
      cachedInputMultiplierPpm: String(o.cachedPpm ?? 500_000n),
      maxOutputTokens: o.maxOutputTokens ?? 1000,
    },
  });
  expect(strategy.response.status, JSON.stringify(strategy.error)).toBe(201);
  const strategyId = strategy.data!.id;
  const published = await publishPlanStrategy({ client: t.client, path: { strategyId } });
  expect(published.response.status, JSON.stringify(published.error)).toBe(200);
  const bound = await bindPlanStrategy({
    client: t.client,
    path: { planId: plan.data!.id },
    body: { strategyId, effectiveFrom: new Date(Date.now() - 86_400_000).toISOString() },
  });
  expect(bound.response.status, JSON.stringify(bound.error)).toBe(201);
  const pub = await publishPlan({ client: t.client, path: { planId: plan.data!.id } });
  expect(pub.response.status, JSON.stringify(pub.error)).toBe(200);
  const user = await provisionWorkspaceUser({
    client: t.client,
    path: { workspaceId },
    body: { externalUserId: `user-${n}`, email: `user${n}@example.com`, planId: plan.data!.id, issueInferenceKey: true },
  });
  expect(user.response.status, JSON.stringify(user.error)).toBe(201);
  return {
    workspaceId,
    connectionId: conn.data!.id,
    gatewayBaseUrl: conn.data!.gatewayBaseUrl,
    planId: plan.data!.id,
    strategyId,
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

/**
 * A tenant for the scripts that drive a live Nexus (bench, scale, faults), made through the Admin API: a
 * workspace, an upstream connection, a published quota strategy bound to a published plan, and end users
 * with an inference key each.
 */

/** One Admin API call with the root key: the parsed answer, or an Error naming the call and its answer. */
export type AdminCall = <T = unknown>(method: string, path: string, body?: unknown) => Promise<T>;

export function adminApi(baseUrl: string, rootKey: string): AdminCall {
  return async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${baseUrl}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${rootKey}`, 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  };
}

export interface TenantSpec {
  /** Names the workspace, and keys the plan, the strategy and the users. */
  name: string;
  upstreamUrl: string;
  providerKey: string;
  users: number;
  quotaUnits: string;
  /** Per million: input, output, cached input. */
  multipliers?: { input: string; output: string; cached: string };
  maxOutputTokens?: number;
  allowUnmeteredPassthrough?: boolean;
  /** More fields of the plan and of the strategy (rate limits, model rules...). */
  plan?: Record<string, unknown>;
  strategy?: Record<string, unknown>;
}

export interface Tenant {
  workspaceId: string;
  connectionId: string;
  gatewayBaseUrl: string;
  users: { apiKey: string; accessId: string }[];
}

export async function provisionTenant(admin: AdminCall, spec: TenantSpec): Promise<Tenant> {
  const { name } = spec;
  const m = spec.multipliers ?? { input: '1000000', output: '2000000', cached: '500000' };
  const ws = await admin<{ id: string }>('POST', '/workspaces', { name, allowUnmeteredPassthrough: spec.allowUnmeteredPassthrough ?? false });
  const conn = await admin<{ id: string; gatewayBaseUrl: string }>('POST', `/workspaces/${ws.id}/provider-connections`, {
    name: `${name} upstream`,
    protocolProfile: 'openai',
    baseUrl: spec.upstreamUrl,
    apiKey: spec.providerKey,
  });
  const strategy = await admin<{ id: string }>('POST', `/workspaces/${ws.id}/plan-strategies/quota`, {
    key: name,
    resetInterval: 'MONTH',
    quotaUnits: spec.quotaUnits,
    inputMultiplierPpm: m.input,
    outputMultiplierPpm: m.output,
    cachedInputMultiplierPpm: m.cached,
    maxOutputTokens: spec.maxOutputTokens ?? 4096,
    ...spec.strategy,
  });
  await admin('POST', `/plan-strategies/${strategy.id}/publish`);
  const plan = await admin<{ id: string }>('POST', `/workspaces/${ws.id}/plans`, { key: name, name, billingInterval: 'MONTH', ...spec.plan });
  await admin('POST', `/plans/${plan.id}/strategy-bindings`, { strategyId: strategy.id, effectiveFrom: new Date(Date.now() - 86_400_000).toISOString() });
  await admin('POST', `/plans/${plan.id}/publish`);
  const users: Tenant['users'] = [];
  for (let i = 0; i < spec.users; i++) {
    const user = await admin<{ apiKey: string; access: { id: string } }>('POST', `/workspaces/${ws.id}/users`, {
      externalUserId: `${name}-user-${i}`,
      email: `${name}-${i}@example.com`,
      planId: plan.id,
      issueInferenceKey: true,
    });
    users.push({ apiKey: user.apiKey, accessId: user.access.id });
  }
  return { workspaceId: ws.id, connectionId: conn.id, gatewayBaseUrl: conn.gatewayBaseUrl, users };
}

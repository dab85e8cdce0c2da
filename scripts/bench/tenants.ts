/** The tenants `npm run bench` provisions through the Admin API: the plain one, with rules and limits, with events, and a route. */
import { activePlan, adminClient, provisionTenant, type TenantSpec } from '../../test/support/tenant.js';
import { createModelPrice, createRoute, createWebhookEndpoint, provisionWorkspaceUser } from '../../test/support/sdk.js';
import { PROVIDER_KEY, ROOT_KEY, USERS } from './config.js';

/** BENCH_EVENTS: the plans the events tenant's users are spread over, their thresholds, and the smallest grant. */
const EVENT_PLANS = 16;
const EVENT_THRESHOLDS = [1, 2, 3, 4, 5];
const EVENT_SMALLEST_GRANT = 4_000_000;
/** The largest grant, as a multiple of the smallest; the plans' grants grow geometrically between them. */
const EVENT_GRANT_SPREAD = 20;
/** Limits no bench load reaches: what admitting against them costs, not a refusal. */
const GENEROUS_LIMITS = { requestsPerMinute: 100_000_000, tokensPerMinute: 2_000_000_000, concurrentCalls: 100_000 };

/** BENCH_FEATURES: rules and an allow-list that the benchmark's model (`bench-model`) matches last. */
function modelPricing(): Pick<TenantSpec, 'modelRules' | 'allowedModels' | 'outputCapPolicy'> {
  const families = [
    'gpt-4o-mini',
    'gpt-4o',
    'gpt-4.1-nano',
    'gpt-4.1-mini',
    'gpt-4.1',
    'o1',
    'o3-mini',
    'o4-mini',
    'claude-3-5-haiku',
    'claude-3-7-sonnet',
    'claude-sonnet-4',
    'claude-opus-4',
  ];
  const ppm = (n: number) => `${BigInt(n * 250_000)}` as const;
  const modelRules = families.flatMap((f, i) => [
    { pattern: f, inputMultiplierPpm: ppm(i + 1), cachedInputMultiplierPpm: ppm(1), outputMultiplierPpm: ppm(4 * (i + 1)) },
    { pattern: `${f}-*`, inputMultiplierPpm: ppm(i + 1), cachedInputMultiplierPpm: ppm(1), outputMultiplierPpm: ppm(4 * (i + 1)) },
  ]);
  modelRules[modelRules.length - 1] = {
    pattern: 'bench-*',
    inputMultiplierPpm: '1000000',
    cachedInputMultiplierPpm: '500000',
    outputMultiplierPpm: '2000000',
  };
  return { modelRules, allowedModels: [...families.slice(0, 11).map((f) => `${f}*`), 'bench-model'], outputCapPolicy: 'clamp' };
}

/**
 * A tenant with USERS end users on a plan with a huge quota, through the Admin API; with `features`, its
 * strategy prices per model and its plan has rate limits (BENCH_FEATURES).
 */
export async function provision(
  nexusUrl: string,
  upstreamUrl: string,
  features = false,
): Promise<{ gatewayBaseUrl: string; apiKeys: string[]; workspaceId: string; connectionId: string }> {
  const tenant = await provisionTenant(adminClient(nexusUrl, ROOT_KEY), {
    name: features ? 'bench-rules-and-limits' : 'bench',
    baseUrl: upstreamUrl,
    providerKey: PROVIDER_KEY,
    users: USERS,
    quotaUnits: 1_000_000_000_000_000n,
    maxOutputTokens: 4096,
    allowUnmeteredPassthrough: true,
    ...(features ? { rateLimits: GENEROUS_LIMITS, ...modelPricing() } : {}),
  });
  if (features) {
    // Cost: every call of this tenant is priced (docs/pricing.md), the plain one's are not.
    const price = await createModelPrice({
      client: adminClient(nexusUrl, ROOT_KEY),
      path: { workspaceId: tenant.workspaceId },
      body: {
        modelPattern: '*',
        inputPerMillion: '2.50',
        cachedInputPerMillion: '1.25',
        outputPerMillion: '10',
        effectiveFrom: new Date(Date.now() - 60_000).toISOString(),
      },
    });
    if (price.response.status !== 201) throw new Error(`createModelPrice: ${price.response.status}`);
  }
  return {
    gatewayBaseUrl: tenant.gatewayBaseUrl,
    apiKeys: tenant.users.map((u) => u.apiKey),
    workspaceId: tenant.workspaceId,
    connectionId: tenant.connectionId,
  };
}

/**
 * BENCH_EVENTS: a tenant whose USERS end users are spread over EVENT_PLANS plans (thresholds at EVENT_THRESHOLDS,
 * grants growing geometrically from EVENT_SMALLEST_GRANT), and whose workspace has a webhook endpoint subscribed to
 * quota.threshold_crossed at the receiver.
 */
export async function provisionEvents(
  nexusUrl: string,
  upstreamUrl: string,
  receiverUrl: string,
): Promise<{ gatewayBaseUrl: string; apiKeys: string[] }> {
  const client = adminClient(nexusUrl, ROOT_KEY);
  const tenant = await provisionTenant(client, {
    name: 'bench-events',
    baseUrl: upstreamUrl,
    providerKey: PROVIDER_KEY,
    users: 0,
    allowUnmeteredPassthrough: true,
  });
  const plans: string[] = [];
  for (let j = 0; j < EVENT_PLANS; j++) {
    const grant = Math.round(EVENT_SMALLEST_GRANT * EVENT_GRANT_SPREAD ** (j / (EVENT_PLANS - 1)));
    const { plan } = await activePlan(client, tenant.workspaceId, {
      key: `bench-events-${j}`,
      quotaUnits: `${BigInt(grant)}`,
      inputMultiplierPpm: '1000000',
      outputMultiplierPpm: '2000000',
      cachedInputMultiplierPpm: '500000',
      maxOutputTokens: 4096,
      eventThresholds: EVENT_THRESHOLDS,
    });
    plans.push(plan.id);
  }
  const apiKeys: string[] = [];
  for (let i = 0; i < USERS; i++) {
    const user = await provisionWorkspaceUser({
      client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        externalUserId: `bench-events-user-${i}`,
        email: `bench-events-${i}@example.com`,
        planId: plans[i % EVENT_PLANS]!,
        issueInferenceKey: true,
      },
    });
    if (user.response.status !== 201) throw new Error(`provisionWorkspaceUser: ${user.response.status} ${JSON.stringify(user.error)}`);
    apiKeys.push(user.data!.apiKey!);
  }
  const endpoint = await createWebhookEndpoint({
    client,
    path: { workspaceId: tenant.workspaceId },
    body: { url: `${receiverUrl}/hooks`, description: 'bench receiver', eventTypes: ['quota.threshold_crossed'] },
  });
  if (endpoint.response.status !== 201)
    throw new Error(`createWebhookEndpoint: ${endpoint.response.status} ${JSON.stringify(endpoint.error)}`);
  return { gatewayBaseUrl: tenant.gatewayBaseUrl, apiKeys };
}

/** BENCH_ROUTE: a route whose one target is the tenant's connection; its base URL (called as the connection's is). */
export async function routeOver(
  nexusUrl: string,
  tenant: { workspaceId: string; connectionId: string; gatewayBaseUrl: string },
): Promise<string> {
  const made = await createRoute({
    client: adminClient(nexusUrl, ROOT_KEY),
    path: { workspaceId: tenant.workspaceId },
    body: { name: 'bench', targets: [{ providerConnectionId: tenant.connectionId }] },
  });
  if (made.response.status !== 201) throw new Error(`createRoute: ${made.response.status} ${JSON.stringify(made.error)}`);
  // The process reads its routes every 250 ms.
  await new Promise((r) => setTimeout(r, 500));
  return made.data!.gatewayBaseUrl;
}

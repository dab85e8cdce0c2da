import { expect, it } from 'vitest';
import { loadContract } from '../../src/app.js';
import { createApi, operationIdsOf } from '../../src/http/api.js';
import type { HandlerMap } from '../../src/http/handler.js';
import { createPublicUrl } from '../../src/http/public-url.js';

const contract = loadContract();

/** The specification's 55 admin operations (docs/decisions.md), with the operationIds chosen for its unnamed rows. */
const SPEC_OPERATIONS: [string, string, string][] = [
  ['createWorkspace', 'POST', '/admin/v1/workspaces'],
  ['listWorkspaces', 'GET', '/admin/v1/workspaces'],
  ['getWorkspace', 'GET', '/admin/v1/workspaces/{workspaceId}'],
  ['updateWorkspace', 'PATCH', '/admin/v1/workspaces/{workspaceId}'],
  ['archiveWorkspace', 'DELETE', '/admin/v1/workspaces/{workspaceId}'],
  ['createProviderConnection', 'POST', '/admin/v1/workspaces/{workspaceId}/provider-connections'],
  ['listProviderConnections', 'GET', '/admin/v1/workspaces/{workspaceId}/provider-connections'],
  ['testProviderConnection', 'POST', '/admin/v1/workspaces/{workspaceId}/provider-connections/test'],
  ['getProviderConnection', 'GET', '/admin/v1/provider-connections/{providerConnectionId}'],
  ['updateProviderConnection', 'PATCH', '/admin/v1/provider-connections/{providerConnectionId}'],
  ['archiveProviderConnection', 'DELETE', '/admin/v1/provider-connections/{providerConnectionId}'],
  ['verifyProviderConnection', 'POST', '/admin/v1/provider-connections/{providerConnectionId}/verify'],
  ['rotateProviderSecret', 'POST', '/admin/v1/provider-connections/{providerConnectionId}/rotate-secret'],
  ['configureBillingWebhookSecret', 'PUT', '/admin/v1/billing-connections/{connectionId}/webhook-secret'],
  ['replayBillingWebhookEvent', 'POST', '/admin/v1/webhook-events/{eventId}/replay'],
  ['createBillingProductMapping', 'POST', '/admin/v1/billing-connections/{connectionId}/product-mappings'],
  ['listBillingProductMappings', 'GET', '/admin/v1/billing-connections/{connectionId}/product-mappings'],
  ['provisionWorkspaceUser', 'POST', '/admin/v1/workspaces/{workspaceId}/users'],
  ['renewWorkspaceAccess', 'POST', '/admin/v1/workspace-accesses/{accessId}/renew'],
  ['changeAccessPlan', 'PATCH', '/admin/v1/workspace-accesses/{accessId}/plan'],
  ['getWorkspaceAccess', 'GET', '/admin/v1/workspace-accesses/{accessId}'],
  ['bindPlanStrategy', 'POST', '/admin/v1/plans/{planId}/strategy-bindings'],
  ['closePlanStrategyBinding', 'DELETE', '/admin/v1/plan-strategy-bindings/{bindingId}'],
  ['updatePlan', 'PATCH', '/admin/v1/plans/{planId}'],
  ['publishPlan', 'POST', '/admin/v1/plans/{planId}/publish'],
  ['getPlanStrategy', 'GET', '/admin/v1/plan-strategies/{strategyId}'],
  ['listInferenceKeys', 'GET', '/admin/v1/workspace-accesses/{accessId}/api-keys'],
  ['getWorkspaceAccessQuota', 'GET', '/admin/v1/workspace-accesses/{accessId}/quota'],
  ['listInvocations', 'GET', '/admin/v1/workspaces/{workspaceId}/invocations'],
  ['createPlan', 'POST', '/admin/v1/workspaces/{workspaceId}/plans'],
  ['listPlans', 'GET', '/admin/v1/workspaces/{workspaceId}/plans'],
  ['getPlan', 'GET', '/admin/v1/plans/{planId}'],
  ['createQuotaStrategy', 'POST', '/admin/v1/workspaces/{workspaceId}/plan-strategies/quota'],
  ['listPlanStrategies', 'GET', '/admin/v1/workspaces/{workspaceId}/plan-strategies'],
  ['listPlanStrategyBindings', 'GET', '/admin/v1/plans/{planId}/strategy-bindings'],
  ['publishPlanStrategy', 'POST', '/admin/v1/plan-strategies/{strategyId}/publish'],
  ['activateWorkspaceAccess', 'POST', '/admin/v1/workspace-accesses/{accessId}/activate'],
  ['suspendWorkspaceAccess', 'POST', '/admin/v1/workspace-accesses/{accessId}/suspend'],
  ['listWorkspaceUsers', 'GET', '/admin/v1/workspaces/{workspaceId}/users'],
  ['issueInferenceKey', 'POST', '/admin/v1/workspace-accesses/{accessId}/api-keys'],
  ['revokeInferenceKey', 'DELETE', '/admin/v1/workspace-accesses/{accessId}/api-keys/{keyId}'],
  ['getInvocation', 'GET', '/admin/v1/invocations/{invocationId}'],
  ['listAuditLogs', 'GET', '/admin/v1/workspaces/{workspaceId}/audit-logs'],
  ['listUsageEvents', 'GET', '/admin/v1/workspaces/{workspaceId}/usage-events'],
  ['configureBillingProviderCredential', 'PUT', '/admin/v1/billing-connections/{connectionId}/provider-credential'],
  ['createBillingConnection', 'POST', '/admin/v1/workspaces/{workspaceId}/billing-connections'],
  ['createCheckout', 'POST', '/admin/v1/workspace-accesses/{accessId}/billing-checkouts'],
  ['deleteBillingProductMapping', 'DELETE', '/admin/v1/billing-product-mappings/{mappingId}'],
  ['disableBillingConnection', 'DELETE', '/admin/v1/billing-connections/{connectionId}'],
  ['listBillingConnections', 'GET', '/admin/v1/workspaces/{workspaceId}/billing-connections'],
  ['listBillingWebhookEvents', 'GET', '/admin/v1/billing-connections/{connectionId}/webhook-events'],
  ['listExternalSubscriptions', 'GET', '/admin/v1/workspace-accesses/{accessId}/external-subscriptions'],
  ['reconcileBillingConnection', 'POST', '/admin/v1/billing-connections/{connectionId}/reconcile'],
  ['syncWorkspaceAccessBillingPeriod', 'POST', '/admin/v1/workspace-accesses/{accessId}/billing-periods/sync'],
  ['verifyBillingConnection', 'POST', '/admin/v1/billing-connections/{connectionId}/verify'],
];

it('has every admin operation of the specification with its exact method, path and operationId', () => {
  const paths = contract.paths as Record<string, Record<string, { operationId?: string }>>;
  for (const [operationId, method, path] of SPEC_OPERATIONS) {
    expect(paths[path]?.[method.toLowerCase()]?.operationId, `${method} ${path}`).toBe(operationId);
  }
  expect(new Set(SPEC_OPERATIONS.map(([id]) => id)).size).toBe(55);
});

/** The admin operations beyond the specification's, by the document that gives their rules. */
const BEYOND_SPEC: Record<string, string[]> = {
  'the console (docs/performance.md)': ['getUsageSummary'],
  "the console (README, 'The console'): a usage summary's keys by name": ['getInferenceKey'],
  'docs/rate-limits.md': ['setPlanRateLimits'],
  'docs/operations.md "Retention"': ['getRetentionPolicy', 'updateRetentionPolicy'],
  'docs/decisions.md "Passthrough classes"': ['setPlanPassthroughClasses'],
  'docs/request-logs.md': ['getInvocationLog', 'setPlanRequestLog'],
  'docs/decisions.md "Management keys"': ['listManagementKeys', 'createManagementKey', 'updateManagementKey', 'revokeManagementKey'],
  'docs/decisions.md "Top-ups"': ['grantAccessUnits'],
  'docs/observability.md "Connection health"': ['getProviderConnectionHealth'],
  'docs/people.md': [
    'listSessions',
    'revokeSession',
    'listMembers',
    'addMember',
    'removeMember',
    'listInvitations',
    'createInvitation',
    'revokeInvitation',
    'listOwners',
    'addOwner',
    'removeOwner',
    'getCaller',
  ],
  'docs/routes.md': ['createRoute', 'listRoutes', 'getRoute', 'updateRoute', 'archiveRoute', 'getRouteHealth'],
  'docs/pricing.md': [
    'createModelPrice',
    'listModelPrices',
    'importModelPrices',
    'closeModelPrice',
    'getWorkspaceBudget',
    'setWorkspaceBudget',
    'exportInvocations',
    'exportUsageSummary',
  ],
  'docs/events.md': [
    'createWebhookEndpoint',
    'listWebhookEndpoints',
    'getWebhookEndpoint',
    'updateWebhookEndpoint',
    'deleteWebhookEndpoint',
    'disableWebhookEndpoint',
    'rotateWebhookEndpointSecret',
    'sendTestWebhookEvent',
    'listWebhookMessages',
    'getWebhookMessage',
    'replayWebhookMessage',
    'replayFailedWebhookMessages',
  ],
};

it("the contract holds the specification's 55 admin operations and those beyond it, the five gateway methods, the webhook receiver and health", () => {
  const ids = operationIdsOf(contract);
  expect(new Set(ids).size).toBe(ids.length);
  const admin = Object.entries(contract.paths ?? {})
    .filter(([path]) => path.startsWith('/admin/v1/'))
    .flatMap(([, item]) =>
      Object.values(item as Record<string, { operationId?: string }>)
        .map((op) => op?.operationId)
        .filter(Boolean),
    );
  const spec = new Set(SPEC_OPERATIONS.map(([id]) => id));
  expect(admin.filter((id) => !spec.has(id!)).sort()).toEqual(Object.values(BEYOND_SPEC).flat().sort());
  for (const id of [
    'proxyProviderGet',
    'proxyProviderPost',
    'proxyProviderPut',
    'proxyProviderPatch',
    'proxyProviderDelete',
    'receiveBillingWebhook',
    'getHealth',
    'getReadiness',
  ]) {
    expect(ids).toContain(id);
  }
});

it('refuses to start when an operation of the contract has no handler, naming it', () => {
  const ids = operationIdsOf(contract);
  const handlers: HandlerMap = Object.fromEntries(ids.filter((id) => id !== 'getPlan').map((id) => [id, async () => ({ status: 204 })]));
  const deps = {
    definition: contract,
    handlers,
    authentication: {} as never,
    idempotency: {} as never,
    publicUrl: createPublicUrl({ publicUrl: undefined, host: '127.0.0.1', port: 8080, trustProxy: false }),
  };
  expect(() => createApi(deps)).toThrow(/operations without a handler: getPlan\b/);
});

it("compiles an operation's request validators on its first request, not at the start, and validates it then", async () => {
  const ids = operationIdsOf(contract);
  const handlers: HandlerMap = Object.fromEntries(ids.map((id) => [id, async () => ({ status: 204 })]));
  // The apps of a process share one contract's validators (api.ts): a contract of its own, as a process's first app has.
  const own = { ...contract, info: { ...contract.info, description: `${contract.info.description ?? ''} (this test's own)` } };
  const api = createApi({
    definition: own,
    handlers,
    authentication: {} as never,
    idempotency: {} as never,
    publicUrl: createPublicUrl({ publicUrl: undefined, host: '127.0.0.1', port: 8080, trustProxy: false }),
  });
  await api.init();
  const compiled = api.api.validator.requestValidators;
  expect(Object.keys(compiled)).toEqual([]);
  const result = api.api.validator.validateRequest(
    { method: 'POST', path: '/admin/v1/workspaces', headers: { 'content-type': 'application/json' }, query: {}, body: { name: 42 } },
    'createWorkspace',
  );
  expect(result.valid).toBe(false);
  expect(result.errors?.[0]?.instancePath).toBe('/requestBody/name');
  expect(Object.keys(compiled)).toEqual(['createWorkspace']);
});

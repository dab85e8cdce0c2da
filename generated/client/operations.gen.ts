// Generated from the contract by scripts/client-resources.ts (npm run generate): do not edit.

/** The operations that take an Idempotency-Key (`METHOD /path/{template}`): a call of one gets a key when it has none. */
export const idempotentOperations: ReadonlySet<string> = new Set([
  'POST /admin/v1/billing-connections/{connectionId}/product-mappings',
  'POST /admin/v1/billing-connections/{connectionId}/reconcile',
  'POST /admin/v1/billing-connections/{connectionId}/verify',
  'POST /admin/v1/model-prices/{priceId}/close',
  'POST /admin/v1/plan-strategies/{strategyId}/publish',
  'POST /admin/v1/plans/{planId}/publish',
  'POST /admin/v1/plans/{planId}/strategy-bindings',
  'POST /admin/v1/provider-connections/{providerConnectionId}/rotate-secret',
  'POST /admin/v1/provider-connections/{providerConnectionId}/verify',
  'POST /admin/v1/webhook-endpoints/{webhookEndpointId}/disable',
  'POST /admin/v1/webhook-endpoints/{webhookEndpointId}/messages/{messageId}/replay',
  'POST /admin/v1/webhook-endpoints/{webhookEndpointId}/replay-failed',
  'POST /admin/v1/webhook-endpoints/{webhookEndpointId}/rotate-secret',
  'POST /admin/v1/webhook-endpoints/{webhookEndpointId}/test',
  'POST /admin/v1/webhook-events/{eventId}/replay',
  'POST /admin/v1/workspace-accesses/{accessId}/activate',
  'POST /admin/v1/workspace-accesses/{accessId}/api-keys',
  'POST /admin/v1/workspace-accesses/{accessId}/billing-checkouts',
  'POST /admin/v1/workspace-accesses/{accessId}/billing-periods/sync',
  'POST /admin/v1/workspace-accesses/{accessId}/renew',
  'POST /admin/v1/workspace-accesses/{accessId}/suspend',
  'POST /admin/v1/workspaces',
  'POST /admin/v1/workspaces/{workspaceId}/billing-connections',
  'POST /admin/v1/workspaces/{workspaceId}/invitations',
  'POST /admin/v1/workspaces/{workspaceId}/members',
  'POST /admin/v1/workspaces/{workspaceId}/plan-strategies/quota',
  'POST /admin/v1/workspaces/{workspaceId}/plans',
  'POST /admin/v1/workspaces/{workspaceId}/prices',
  'POST /admin/v1/workspaces/{workspaceId}/prices/import',
  'POST /admin/v1/workspaces/{workspaceId}/provider-connections',
  'POST /admin/v1/workspaces/{workspaceId}/provider-connections/test',
  'POST /admin/v1/workspaces/{workspaceId}/routes',
  'POST /admin/v1/workspaces/{workspaceId}/users',
  'POST /admin/v1/workspaces/{workspaceId}/webhook-endpoints',
]);

/** The path parameter of an operation whose `/` are sent as they are (the contract's `x-greedy`), by operation. */
export const greedyPathParameters: ReadonlyMap<string, string> = new Map([
  ['DELETE /providers/{providerConnectionId}/{providerPath}', 'providerPath'],
  ['GET /providers/{providerConnectionId}/{providerPath}', 'providerPath'],
  ['PATCH /providers/{providerConnectionId}/{providerPath}', 'providerPath'],
  ['POST /providers/{providerConnectionId}/{providerPath}', 'providerPath'],
  ['PUT /providers/{providerConnectionId}/{providerPath}', 'providerPath'],
]);

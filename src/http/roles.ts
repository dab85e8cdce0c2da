/**
 * The one table of who may call what (docs/people.md, "Members and roles"): each Admin operation, by operationId,
 * and the workspace roles that may call it. An owner (a member of the installation) may call every operation;
 * an operation with no role is the owners' alone. A request of a person's session is checked against it on every
 * operation (src/http/session-auth.ts), and so is one of a Management Key with a role; a key without one is held to
 * its scope alone. The contract's `x-roles` and docs/people.md's table are written from this one (scripts/role-table.ts).
 *
 *   admin      everything in the workspace
 *   developer  connections, routes, plans, prices, users and their keys; no billing, no members
 *   billing    billing, budgets, prices, spend; read-only elsewhere
 *   support    reads everything; suspends and resumes accesses, revokes inference keys, replays webhooks
 *   viewer     reads everything
 */
import type { WorkspaceRole } from '../domain/people/member-service.js';

const EVERYONE: readonly WorkspaceRole[] = ['admin', 'developer', 'billing', 'support', 'viewer'];
const BUILD: readonly WorkspaceRole[] = ['admin', 'developer'];
const MONEY: readonly WorkspaceRole[] = ['admin', 'billing'];
const PRICES: readonly WorkspaceRole[] = ['admin', 'developer', 'billing'];
const SUPPORT: readonly WorkspaceRole[] = ['admin', 'developer', 'support'];
const SUPPORT_BILLING: readonly WorkspaceRole[] = ['admin', 'billing', 'support'];
const ADMIN: readonly WorkspaceRole[] = ['admin'];
const OWNERS: readonly WorkspaceRole[] = [];

export const OPERATION_ROLES: Readonly<Record<string, readonly WorkspaceRole[]>> = {
  // The installation
  getCaller: EVERYONE,
  listWorkspaces: EVERYONE,
  createWorkspace: OWNERS,
  listOwners: OWNERS,
  addOwner: OWNERS,
  removeOwner: OWNERS,
  listSessions: OWNERS,
  revokeSession: OWNERS,
  listManagementKeys: OWNERS,
  createManagementKey: OWNERS,
  updateManagementKey: OWNERS,
  revokeManagementKey: OWNERS,
  // The workspace itself and its members
  getWorkspace: EVERYONE,
  updateWorkspace: ADMIN,
  archiveWorkspace: ADMIN,
  getRetentionPolicy: EVERYONE,
  updateRetentionPolicy: ADMIN,
  listMembers: EVERYONE,
  addMember: ADMIN,
  removeMember: ADMIN,
  listInvitations: EVERYONE,
  createInvitation: ADMIN,
  revokeInvitation: ADMIN,
  listAuditLogs: EVERYONE,
  // Provider connections and routes
  listProviderConnections: EVERYONE,
  getProviderConnection: EVERYONE,
  createProviderConnection: BUILD,
  testProviderConnection: BUILD,
  updateProviderConnection: BUILD,
  archiveProviderConnection: BUILD,
  verifyProviderConnection: BUILD,
  rotateProviderSecret: BUILD,
  listRoutes: EVERYONE,
  getRoute: EVERYONE,
  getRouteHealth: EVERYONE,
  getProviderConnectionHealth: EVERYONE,
  createRoute: BUILD,
  updateRoute: BUILD,
  archiveRoute: BUILD,
  // Plans and their strategies
  listPlans: EVERYONE,
  getPlan: EVERYONE,
  createPlan: BUILD,
  updatePlan: BUILD,
  publishPlan: BUILD,
  setPlanRateLimits: BUILD,
  setPlanRequestLog: BUILD,
  setPlanPassthroughClasses: BUILD,
  listPlanStrategies: EVERYONE,
  getPlanStrategy: EVERYONE,
  createQuotaStrategy: BUILD,
  publishPlanStrategy: BUILD,
  listPlanStrategyBindings: EVERYONE,
  bindPlanStrategy: BUILD,
  closePlanStrategyBinding: BUILD,
  // Users, their accesses and inference keys
  listWorkspaceUsers: EVERYONE,
  provisionWorkspaceUser: BUILD,
  getWorkspaceAccess: EVERYONE,
  getWorkspaceAccessQuota: EVERYONE,
  activateWorkspaceAccess: SUPPORT,
  suspendWorkspaceAccess: SUPPORT,
  renewWorkspaceAccess: BUILD,
  changeAccessPlan: BUILD,
  grantAccessUnits: MONEY,
  listInferenceKeys: EVERYONE,
  getInferenceKey: EVERYONE,
  issueInferenceKey: BUILD,
  revokeInferenceKey: SUPPORT,
  // Calls, usage and spend
  listInvocations: EVERYONE,
  getInvocation: EVERYONE,
  // Bodies may hold what end users wrote: those who build and support, not every reader.
  getInvocationLog: SUPPORT,
  exportInvocations: EVERYONE,
  listUsageEvents: EVERYONE,
  getUsageSummary: EVERYONE,
  exportUsageSummary: EVERYONE,
  // The price book and the budget
  listModelPrices: EVERYONE,
  createModelPrice: PRICES,
  importModelPrices: PRICES,
  closeModelPrice: PRICES,
  getWorkspaceBudget: EVERYONE,
  setWorkspaceBudget: MONEY,
  // Billing
  listBillingConnections: EVERYONE,
  createBillingConnection: MONEY,
  disableBillingConnection: MONEY,
  configureBillingProviderCredential: MONEY,
  configureBillingWebhookSecret: MONEY,
  verifyBillingConnection: MONEY,
  reconcileBillingConnection: MONEY,
  listBillingProductMappings: EVERYONE,
  createBillingProductMapping: MONEY,
  deleteBillingProductMapping: MONEY,
  createCheckout: MONEY,
  listExternalSubscriptions: EVERYONE,
  syncWorkspaceAccessBillingPeriod: MONEY,
  listBillingWebhookEvents: EVERYONE,
  replayBillingWebhookEvent: SUPPORT_BILLING,
  // Outbound webhooks
  listWebhookEndpoints: EVERYONE,
  getWebhookEndpoint: EVERYONE,
  createWebhookEndpoint: BUILD,
  updateWebhookEndpoint: BUILD,
  deleteWebhookEndpoint: BUILD,
  disableWebhookEndpoint: SUPPORT,
  rotateWebhookEndpointSecret: BUILD,
  sendTestWebhookEvent: BUILD,
  listWebhookMessages: EVERYONE,
  getWebhookMessage: EVERYONE,
  replayWebhookMessage: SUPPORT,
  replayFailedWebhookMessages: SUPPORT,
};

/** The roles that may call an operation; an operation not in the table is the owners' alone. */
export function rolesFor(operationId: string | undefined): readonly WorkspaceRole[] {
  return (operationId && OPERATION_ROLES[operationId]) || OWNERS;
}

/** What a refusal says: the roles that would have been allowed. */
export function neededRoles(roles: readonly WorkspaceRole[]): string {
  return roles.length ? `one of: owner, ${roles.join(', ')}` : 'owner';
}

/** The operations a role may call (null: a key without a role, held to its scope alone: every one but the owners'). */
export function operationsOf(role: string | null): string[] {
  return Object.keys(OPERATION_ROLES).filter((operationId) => {
    const roles = rolesFor(operationId);
    return role === null ? roles.length > 0 : roles.includes(role as WorkspaceRole);
  });
}

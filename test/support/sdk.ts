/**
 * The generated SDK's functions as the tests call them: each answer returned, not thrown. The package's
 * functions throw a NexusError on an error answer (generated with throwOnError); the tests read each
 * answer's status and Error body instead, so here each function is instantiated non-throwing. The tests'
 * clients (test-app.ts) leave throwOnError unset, which does the same at run time.
 */
import * as sdk from '../../generated/client/sdk.gen.js';

export const activateWorkspaceAccess = sdk.activateWorkspaceAccess<false>;
export const archiveProviderConnection = sdk.archiveProviderConnection<false>;
export const archiveWorkspace = sdk.archiveWorkspace<false>;
export const bindPlanStrategy = sdk.bindPlanStrategy<false>;
export const changeAccessPlan = sdk.changeAccessPlan<false>;
export const closePlanStrategyBinding = sdk.closePlanStrategyBinding<false>;
export const configureBillingProviderCredential = sdk.configureBillingProviderCredential<false>;
export const configureBillingWebhookSecret = sdk.configureBillingWebhookSecret<false>;
export const createBillingConnection = sdk.createBillingConnection<false>;
export const createBillingProductMapping = sdk.createBillingProductMapping<false>;
export const createCheckout = sdk.createCheckout<false>;
export const createPlan = sdk.createPlan<false>;
export const createProviderConnection = sdk.createProviderConnection<false>;
export const createQuotaStrategy = sdk.createQuotaStrategy<false>;
export const createWorkspace = sdk.createWorkspace<false>;
export const deleteBillingProductMapping = sdk.deleteBillingProductMapping<false>;
export const disableBillingConnection = sdk.disableBillingConnection<false>;
export const getHealth = sdk.getHealth<false>;
export const getMe = sdk.getMe<false>;
export const getInvocation = sdk.getInvocation<false>;
export const getPlan = sdk.getPlan<false>;
export const getPlanStrategy = sdk.getPlanStrategy<false>;
export const getProviderConnection = sdk.getProviderConnection<false>;
export const getReadiness = sdk.getReadiness<false>;
export const getUsageSummary = sdk.getUsageSummary<false>;
export const getWorkspace = sdk.getWorkspace<false>;
export const getWorkspaceAccess = sdk.getWorkspaceAccess<false>;
export const getWorkspaceAccessQuota = sdk.getWorkspaceAccessQuota<false>;
export const issueInferenceKey = sdk.issueInferenceKey<false>;
export const listAuditLogs = sdk.listAuditLogs<false>;
export const listBillingConnections = sdk.listBillingConnections<false>;
export const listBillingProductMappings = sdk.listBillingProductMappings<false>;
export const listBillingWebhookEvents = sdk.listBillingWebhookEvents<false>;
export const listExternalSubscriptions = sdk.listExternalSubscriptions<false>;
export const listInferenceKeys = sdk.listInferenceKeys<false>;
export const listInvocations = sdk.listInvocations<false>;
export const listPlanStrategies = sdk.listPlanStrategies<false>;
export const listPlanStrategyBindings = sdk.listPlanStrategyBindings<false>;
export const listPlans = sdk.listPlans<false>;
export const listProviderConnections = sdk.listProviderConnections<false>;
export const listUsageEvents = sdk.listUsageEvents<false>;
export const listWorkspaceUsers = sdk.listWorkspaceUsers<false>;
export const listWorkspaces = sdk.listWorkspaces<false>;
export const provisionWorkspaceUser = sdk.provisionWorkspaceUser<false>;
export const proxyProviderDelete = sdk.proxyProviderDelete<false>;
export const proxyProviderGet = sdk.proxyProviderGet<false>;
export const proxyProviderPatch = sdk.proxyProviderPatch<false>;
export const proxyProviderPost = sdk.proxyProviderPost<false>;
export const proxyProviderPut = sdk.proxyProviderPut<false>;
export const publishPlan = sdk.publishPlan<false>;
export const publishPlanStrategy = sdk.publishPlanStrategy<false>;
export const receiveBillingWebhook = sdk.receiveBillingWebhook<false>;
export const reconcileBillingConnection = sdk.reconcileBillingConnection<false>;
export const renewWorkspaceAccess = sdk.renewWorkspaceAccess<false>;
export const replayBillingWebhookEvent = sdk.replayBillingWebhookEvent<false>;
export const revokeInferenceKey = sdk.revokeInferenceKey<false>;
export const rotateProviderSecret = sdk.rotateProviderSecret<false>;
export const setPlanRateLimits = sdk.setPlanRateLimits<false>;
export const suspendWorkspaceAccess = sdk.suspendWorkspaceAccess<false>;
export const syncWorkspaceAccessBillingPeriod = sdk.syncWorkspaceAccessBillingPeriod<false>;
export const testProviderConnection = sdk.testProviderConnection<false>;
export const updatePlan = sdk.updatePlan<false>;
export const updateProviderConnection = sdk.updateProviderConnection<false>;
export const updateWorkspace = sdk.updateWorkspace<false>;
export const verifyBillingConnection = sdk.verifyBillingConnection<false>;
export const verifyProviderConnection = sdk.verifyProviderConnection<false>;

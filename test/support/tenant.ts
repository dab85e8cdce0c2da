/**
 * A tenant made through the Admin API with the generated client, for the tests
 * (test/gateway/gateway-support.ts and the plans of many API tests) and for the scripts
 * that drive a live Nexus (scripts/bench.ts, scripts/faults.ts, scripts/scale.ts):
 * a workspace, a provider connection, a published quota strategy bound to a
 * published plan, and end users with an inference key each.
 *
 * Every step checks its answer's status and throws an Error naming the step and
 * the answer, so a fixture that fails says which step did. It imports nothing of
 * vitest: the scripts run it outside a test.
 */
import { createClient, type Client } from '../../generated/client/client/index.js';
import type {
  CreateProviderConnectionDtoWritable,
  CreateQuotaStrategyDto,
  Int64String,
  ModelRule,
  OutputCapPolicy,
  PassthroughClass,
  QuotaStrategyDto,
  RateLimits,
  WorkspacePlanDto,
} from '../../generated/client/types.gen.js';
import {
  bindPlanStrategy,
  createPlan,
  createProviderConnection,
  createQuotaStrategy,
  createWorkspace,
  provisionWorkspaceUser,
  publishPlan,
  publishPlanStrategy,
} from './sdk.js';

/** A generated client sending this bearer token (the scripts' root Management Key). */
export function adminClient(baseUrl: string, token: string): Client {
  return createClient({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
}

/** The answer's data when its status is `status`; else an Error naming the step, the status and the error body. */
async function expectStatus<T>(
  step: string,
  status: number,
  answer: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  const { data, error, response } = await answer;
  if (response.status !== status) throw new Error(`${step}: ${response.status} ${JSON.stringify(error)}`);
  return data as T;
}

export interface PlanSpec {
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
  /** Default: long ago, so the binding is in force whatever the clock says. */
  effectiveFrom?: string;
  /** The plan's rate limits (none by default). */
  rateLimits?: RateLimits;
  /** The plan's quota.threshold_crossed percentages (default: none set, so 80 and 100). */
  eventThresholds?: number[];
  /** The classes of unmetered paths the plan lets through (default none). */
  passthroughClasses?: PassthroughClass[];
  /** The strategy's multipliers of the kinds beyond text tokens (default none: each kind at its default). */
  kindMultipliers?: KindMultipliersSpec;
}

/** A strategy's optional multipliers of the kinds beyond text tokens (docs/pricing.md, "Kinds"). */
type KindMultipliersSpec = Pick<
  CreateQuotaStrategyDto,
  | 'audioInputMultiplierPpm'
  | 'audioOutputMultiplierPpm'
  | 'imageInputMultiplierPpm'
  | 'imageOutputMultiplierPpm'
  | 'imageMultiplierPpm'
  | 'imageTierMultipliersPpm'
  | 'secondMultiplierPpm'
  | 'characterMultiplierPpm'
>;

/** An ACTIVE plan: a quota strategy, published, bound to a new plan from `effectiveFrom`, and the plan published. */
export async function activePlan(
  client: Client,
  workspaceId: string,
  o: PlanSpec,
): Promise<{ plan: WorkspacePlanDto; strategy: QuotaStrategyDto }> {
  const strategy = await expectStatus(
    'createQuotaStrategy',
    201,
    createQuotaStrategy({
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
        ...o.kindMultipliers,
      },
    }),
  );
  const published = await expectStatus('publishPlanStrategy', 200, publishPlanStrategy({ client, path: { strategyId: strategy.id } }));
  const plan = await expectStatus(
    'createPlan',
    201,
    createPlan({
      client,
      path: { workspaceId },
      body: {
        key: o.key,
        name: o.key,
        billingInterval: 'MONTH',
        ...(o.rateLimits ? { rateLimits: o.rateLimits } : {}),
        ...(o.eventThresholds ? { eventThresholds: o.eventThresholds } : {}),
        ...(o.passthroughClasses ? { passthroughClasses: o.passthroughClasses } : {}),
      },
    }),
  );
  await expectStatus(
    'bindPlanStrategy',
    201,
    bindPlanStrategy({
      client,
      path: { planId: plan.id },
      body: { strategyId: strategy.id, effectiveFrom: o.effectiveFrom ?? '2020-01-01T00:00:00Z' },
    }),
  );
  const active = await expectStatus('publishPlan', 200, publishPlan({ client, path: { planId: plan.id } }));
  return { plan: active, strategy: published };
}

export interface TenantSpec {
  /** Names the workspace, and keys its plan, strategy and users; default `gw-<n>`, n counting in this process. */
  name?: string;
  profile?: 'openai' | 'anthropic' | 'azure-openai' | 'gemini' | 'bedrock';
  /** A bedrock connection's AWS fields (its region; an access key id to sign with SigV4). */
  aws?: Pick<CreateProviderConnectionDtoWritable, 'awsRegion' | 'awsAccessKeyId' | 'awsSessionToken'>;
  /** The upstream's base URL and the key it accepts. */
  baseUrl: string;
  providerKey: string;
  upstreamTimeoutMs?: number;
  /** Deprecated: every passthrough class. */
  allowUnmeteredPassthrough?: boolean;
  /** The classes of unmetered paths the workspace lets through (default none). */
  passthroughClasses?: PassthroughClass[];
  /** The classes of unmetered paths its plan lets through (default none). */
  planPassthroughClasses?: PassthroughClass[];
  /** End users, each with an inference key (1). */
  users?: number;
  quotaUnits?: bigint;
  /** Per million: input (1000000), output (2000000), cached input (500000). */
  inputPpm?: bigint;
  outputPpm?: bigint;
  cachedPpm?: bigint;
  maxOutputTokens?: number;
  modelRules?: ModelRule[];
  allowedModels?: string[] | null;
  outputCapPolicy?: OutputCapPolicy;
  /** The plan's rate limits (none by default). */
  rateLimits?: RateLimits;
  /** The plan's quota.threshold_crossed percentages (default: none set, so 80 and 100). */
  eventThresholds?: number[];
  /** The strategy's multipliers of the kinds beyond text tokens (default none). */
  kindMultipliers?: KindMultipliersSpec;
}

interface TenantUser {
  accessId: string;
  apiKey: string;
  apiKeyId: string;
}

/** The tenant's ids; its first user's are also at the top (most callers make one). */
export interface Tenant extends TenantUser {
  workspaceId: string;
  connectionId: string;
  gatewayBaseUrl: string;
  planId: string;
  strategyId: string;
  users: TenantUser[];
}

let made = 0;

/** A workspace with one connection and `users` end users on a published plan, all through the Admin API. */
export async function provisionTenant(client: Client, o: TenantSpec): Promise<Tenant> {
  const name = o.name ?? `gw-${++made}`;
  const workspace = await expectStatus(
    'createWorkspace',
    201,
    createWorkspace({
      client,
      body: {
        name,
        allowUnmeteredPassthrough: o.allowUnmeteredPassthrough ?? false,
        ...(o.passthroughClasses ? { passthroughClasses: o.passthroughClasses } : {}),
      },
    }),
  );
  const connection = await expectStatus(
    'createProviderConnection',
    201,
    createProviderConnection({
      client,
      path: { workspaceId: workspace.id },
      body: {
        name: `${name} upstream`,
        protocolProfile: o.profile ?? 'openai',
        baseUrl: o.baseUrl,
        apiKey: o.providerKey,
        ...o.aws,
        ...(o.upstreamTimeoutMs ? { upstreamTimeoutMs: o.upstreamTimeoutMs } : {}),
      },
    }),
  );
  const { plan, strategy } = await activePlan(client, workspace.id, {
    key: name,
    quotaUnits: `${o.quotaUnits ?? 1_000_000n}`,
    inputMultiplierPpm: `${o.inputPpm ?? 1_000_000n}`,
    outputMultiplierPpm: `${o.outputPpm ?? 2_000_000n}`,
    cachedInputMultiplierPpm: `${o.cachedPpm ?? 500_000n}`,
    maxOutputTokens: o.maxOutputTokens ?? 1000,
    modelRules: o.modelRules,
    allowedModels: o.allowedModels,
    outputCapPolicy: o.outputCapPolicy,
    effectiveFrom: new Date(Date.now() - 86_400_000).toISOString(),
    rateLimits: o.rateLimits,
    eventThresholds: o.eventThresholds,
    passthroughClasses: o.planPassthroughClasses,
    kindMultipliers: o.kindMultipliers,
  });
  const users: TenantUser[] = [];
  for (let i = 0; i < (o.users ?? 1); i++) {
    const user = await expectStatus(
      'provisionWorkspaceUser',
      201,
      provisionWorkspaceUser({
        client,
        path: { workspaceId: workspace.id },
        body: { externalUserId: `${name}-user-${i}`, email: `${name}-${i}@example.com`, planId: plan.id, issueInferenceKey: true },
      }),
    );
    users.push({ accessId: user.access.id, apiKey: user.apiKey!, apiKeyId: user.apiKeyId! });
  }
  return {
    ...users[0]!,
    workspaceId: workspace.id,
    connectionId: connection.id,
    gatewayBaseUrl: connection.gatewayBaseUrl,
    planId: plan.id,
    strategyId: strategy.id,
    users,
  };
}

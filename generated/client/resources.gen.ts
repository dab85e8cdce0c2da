// Generated from the contract by scripts/client-resources.ts (npm run generate): do not edit.

import * as sdk from './sdk.gen.js';
import type * as types from './types.gen.js';
import { NexusCore, NexusResource, type NexusPromise, type PagePromise, type Params, type RequestOptions } from './runtime.js';
import { WebhookVerifier } from './webhooks.js';

/**
 * Workspaces: list, create, get, archive, update, getRetentionPolicy, updateRetentionPolicy.
 *
 * Tenants. Everything else belongs to one.
 */
export class WorkspacesResource extends NexusResource {
  /**
   * List workspaces
   *
   * The workspaces visible to the calling Management Key, newest first.
   *
   * `GET /admin/v1/workspaces` (`listWorkspaces` in the function API)
   */
  list(query?: Params<types.ListWorkspacesData['query']>, options?: RequestOptions): PagePromise<types.ListWorkspacesResponses[200][number]> {
    return this._core._list<types.ListWorkspacesResponses[200][number]>(sdk.listWorkspaces, { query }, options);
  }

  /**
   * Create a workspace
   *
   * Root Management Key only; a scoped key gets 403 `root_key_required`.
   *
   * `POST /admin/v1/workspaces` (`createWorkspace` in the function API)
   */
  create(body: Params<NonNullable<types.CreateWorkspaceData['body']>>, options?: RequestOptions): NexusPromise<types.CreateWorkspaceResponses[keyof types.CreateWorkspaceResponses]> {
    return this._core._call<types.CreateWorkspaceResponses[keyof types.CreateWorkspaceResponses]>(sdk.createWorkspace, { body }, options);
  }

  /**
   * Get a workspace
   *
   * `GET /admin/v1/workspaces/{workspaceId}` (`getWorkspace` in the function API)
   */
  get(workspaceId: string, options?: RequestOptions): NexusPromise<types.GetWorkspaceResponses[keyof types.GetWorkspaceResponses]> {
    return this._core._call<types.GetWorkspaceResponses[keyof types.GetWorkspaceResponses]>(sdk.getWorkspace, { path: { workspaceId } }, options);
  }

  /**
   * Archive a workspace
   *
   * Makes the workspace ARCHIVED: it stays readable, every change under it is refused
   * with 409 `workspace_archived`, and its gateway traffic stops. Archiving twice is a no-op.
   * Root Management Key only.
   *
   * `DELETE /admin/v1/workspaces/{workspaceId}` (`archiveWorkspace` in the function API)
   */
  archive(workspaceId: string, options?: RequestOptions): NexusPromise<types.ArchiveWorkspaceResponses[keyof types.ArchiveWorkspaceResponses]> {
    return this._core._call<types.ArchiveWorkspaceResponses[keyof types.ArchiveWorkspaceResponses]>(sdk.archiveWorkspace, { path: { workspaceId } }, options);
  }

  /**
   * Update a workspace
   *
   * An archived workspace is read-only (409 `workspace_archived`). A change of `passthroughClasses` or
   * `allowUnmeteredPassthrough` applies to the next gateway call on every gateway process.
   *
   * `PATCH /admin/v1/workspaces/{workspaceId}` (`updateWorkspace` in the function API)
   */
  update(workspaceId: string, body: Params<NonNullable<types.UpdateWorkspaceData['body']>>, options?: RequestOptions): NexusPromise<types.UpdateWorkspaceResponses[keyof types.UpdateWorkspaceResponses]> {
    return this._core._call<types.UpdateWorkspaceResponses[keyof types.UpdateWorkspaceResponses]>(sdk.updateWorkspace, { path: { workspaceId }, body }, options);
  }

  /**
   * Get the workspace's retention policy
   *
   * How long the workspace's history is kept: its detail (invocations with their attempts, usage events, webhook
   * attempts) and its usage rollups, which the usage summaries read. Defaults: 90 days of detail, 730 days of rollups.
   * docs/operations.md ("Retention") says how expired history leaves.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/retention` (`getRetentionPolicy` in the function API)
   */
  getRetentionPolicy(workspaceId: string, options?: RequestOptions): NexusPromise<types.GetRetentionPolicyResponses[keyof types.GetRetentionPolicyResponses]> {
    return this._core._call<types.GetRetentionPolicyResponses[keyof types.GetRetentionPolicyResponses]>(sdk.getRetentionPolicy, { path: { workspaceId } }, options);
  }

  /**
   * Change the workspace's retention policy
   *
   * A field left out keeps its value. Rollups are kept at least as long as detail (400 otherwise). The history job
   * applies it within the hour: detail older than `detailDays` leaves, except usage events of a quota period not yet
   * settled (or, with a billing connection, not yet reconciled); rollups older than `rollupDays` leave. The change is
   * audited (`workspace.retention_updated`). An archived workspace is read-only (409 `workspace_archived`).
   *
   * `PATCH /admin/v1/workspaces/{workspaceId}/retention` (`updateRetentionPolicy` in the function API)
   */
  updateRetentionPolicy(workspaceId: string, body: Params<NonNullable<types.UpdateRetentionPolicyData['body']>>, options?: RequestOptions): NexusPromise<types.UpdateRetentionPolicyResponses[keyof types.UpdateRetentionPolicyResponses]> {
    return this._core._call<types.UpdateRetentionPolicyResponses[keyof types.UpdateRetentionPolicyResponses]>(sdk.updateRetentionPolicy, { path: { workspaceId }, body }, options);
  }
}

/**
 * Provider connections: list, create, test, get, archive, update, verify, getHealth, rotateProviderSecret.
 *
 * Upstream model providers with encrypted keys.
 */
export class ProviderConnectionsResource extends NexusResource {
  /**
   * List provider connections
   *
   * The workspace's connections, archived ones included, newest first.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/provider-connections` (`listProviderConnections` in the function API)
   */
  list(workspaceId: string, query?: Params<types.ListProviderConnectionsData['query']>, options?: RequestOptions): PagePromise<types.ListProviderConnectionsResponses[200][number]> {
    return this._core._list<types.ListProviderConnectionsResponses[200][number]>(sdk.listProviderConnections, { path: { workspaceId }, query }, options);
  }

  /**
   * Create a provider connection
   *
   * Saves the connection with its API key encrypted at rest. The key is never returned:
   * reads show `secretPreview` only. `baseUrl` is the upstream origin (plus an optional
   * path prefix) **without** `/v1`: the gateway appends the caller's path to it, and the
   * official SDKs send `/v1/...` themselves (`new OpenAI({ baseURL: gatewayBaseUrl + '/v1' })`,
   * `new Anthropic({ baseURL: gatewayBaseUrl })`). It must be http(s), without credentials,
   * query or fragment; a host name must resolve, and not to a loopback, private, link-local
   * or metadata address unless the deployment sets `NEXUS_ALLOW_PRIVATE_UPSTREAMS=true`
   * (400 `invalid_base_url` / `private_upstream_refused`). The upstream is not called:
   * use `testProviderConnection` before and `verifyProviderConnection` after saving. `retry` makes the
   * gateway retry a call that fails before any byte of its answer, with a bounded wait (`ConnectionRetryDto`);
   * without it a call makes one attempt. `enforcesOutputCap: false` says the upstream may answer past the
   * output cap it is sent (`EnforcesOutputCap`).
   *
   * `POST /admin/v1/workspaces/{workspaceId}/provider-connections` (`createProviderConnection` in the function API)
   */
  create(workspaceId: string, body: Params<NonNullable<types.CreateProviderConnectionData['body']>>, options?: RequestOptions): NexusPromise<types.CreateProviderConnectionResponses[keyof types.CreateProviderConnectionResponses]> {
    return this._core._call<types.CreateProviderConnectionResponses[keyof types.CreateProviderConnectionResponses]>(sdk.createProviderConnection, { path: { workspaceId }, body }, options);
  }

  /**
   * Test a provider connection before saving it
   *
   * Calls the upstream with the given key and the profile's authentication and reports
   * what happened; nothing is saved. The probe is `GET {baseUrl}/v1/models` with
   * `Authorization: Bearer` (openai) or with `x-api-key` and `anthropic-version: 2023-06-01`
   * (anthropic), `GET {baseUrl}/openai/v1/models` with `api-key` (azure-openai), or
   * `GET {baseUrl}/v1beta/models` with `x-goog-api-key` (gemini), bounded by a
   * short timeout (5 s by default, `NEXUS_PROVIDER_PROBE_TIMEOUT_MS`).
   * An upstream that answers with an error is still a 200 here: `outcome` says which case it is.
   *
   * `POST /admin/v1/workspaces/{workspaceId}/provider-connections/test` (`testProviderConnection` in the function API)
   */
  test(workspaceId: string, body: Params<NonNullable<types.TestProviderConnectionData['body']>>, options?: RequestOptions): NexusPromise<types.TestProviderConnectionResponses[keyof types.TestProviderConnectionResponses]> {
    return this._core._call<types.TestProviderConnectionResponses[keyof types.TestProviderConnectionResponses]>(sdk.testProviderConnection, { path: { workspaceId }, body }, options);
  }

  /**
   * Get a provider connection
   *
   * Archived connections stay readable. The key is never returned.
   *
   * `GET /admin/v1/provider-connections/{providerConnectionId}` (`getProviderConnection` in the function API)
   */
  get(providerConnectionId: string, options?: RequestOptions): NexusPromise<types.GetProviderConnectionResponses[keyof types.GetProviderConnectionResponses]> {
    return this._core._call<types.GetProviderConnectionResponses[keyof types.GetProviderConnectionResponses]>(sdk.getProviderConnection, { path: { providerConnectionId } }, options);
  }

  /**
   * Archive a provider connection
   *
   * Makes the connection ARCHIVED: the gateway answers 404 for it from then on, and it
   * stays readable here for history. Archiving twice is a no-op.
   *
   * `DELETE /admin/v1/provider-connections/{providerConnectionId}` (`archiveProviderConnection` in the function API)
   */
  archive(providerConnectionId: string, options?: RequestOptions): NexusPromise<types.ArchiveProviderConnectionResponses[keyof types.ArchiveProviderConnectionResponses]> {
    return this._core._call<types.ArchiveProviderConnectionResponses[keyof types.ArchiveProviderConnectionResponses]>(sdk.archiveProviderConnection, { path: { providerConnectionId } }, options);
  }

  /**
   * Update a provider connection
   *
   * Changes the given fields only. `status` SUSPENDED stops the connection's gateway
   * traffic (403 `connection_suspended`) until it is set ACTIVE again. A new `baseUrl` is
   * checked like at creation and clears `lastVerifiedAt`. An archived connection is
   * read-only (409 `connection_archived`). `apiKey` replaces the key, as `rotateProviderSecret`
   * does. The stored key is only ever sent to the origin it was given for: a `baseUrl` on
   * another origin (scheme, host or port) needs the key for it in the same request (400
   * `api_key_required`, param `apiKey`, and nothing changes); a new path on the same origin
   * keeps the key.
   *
   * `PATCH /admin/v1/provider-connections/{providerConnectionId}` (`updateProviderConnection` in the function API)
   */
  update(providerConnectionId: string, body: Params<NonNullable<types.UpdateProviderConnectionData['body']>>, options?: RequestOptions): NexusPromise<types.UpdateProviderConnectionResponses[keyof types.UpdateProviderConnectionResponses]> {
    return this._core._call<types.UpdateProviderConnectionResponses[keyof types.UpdateProviderConnectionResponses]>(sdk.updateProviderConnection, { path: { providerConnectionId }, body }, options);
  }

  /**
   * Verify a saved provider connection
   *
   * Probes the upstream with the stored key, like `testProviderConnection`. On success
   * (`outcome` `reachable`) the connection's `lastVerifiedAt` is set. Every verification is
   * recorded in the audit trail with its outcome. An archived connection answers 409
   * `connection_archived`.
   *
   * `POST /admin/v1/provider-connections/{providerConnectionId}/verify` (`verifyProviderConnection` in the function API)
   */
  verify(providerConnectionId: string, options?: RequestOptions): NexusPromise<types.VerifyProviderConnectionResponses[keyof types.VerifyProviderConnectionResponses]> {
    return this._core._call<types.VerifyProviderConnectionResponses[keyof types.VerifyProviderConnectionResponses]>(sdk.verifyProviderConnection, { path: { providerConnectionId } }, options);
  }

  /**
   * Read a provider connection's health
   *
   * Every attempt that reached the connection's provider, direct or through a route (a route's attempts that
   * failed before another target answered included; refused calls, which reach no provider, left out), over the
   * last 5 minutes, hour and day: the attempts, the errors among them (`UPSTREAM_ERROR`: the provider answered an
   * error; `FAILED`: it could not be reached or timed out; a client that left is neither), the latency's p50, p95
   * and p99, and the time to first token's (streamed attempts). `verify` is the last verification's outcome: a
   * failed one makes `status` `failing` whatever the traffic. `status`: `failing` when the last verification
   * failed or at least half the last 5 minutes' attempts (5 or more) erred, `degraded` when 5 % or more did,
   * `idle` without attempts in the last 5 minutes, else `healthy`.
   *
   * `GET /admin/v1/provider-connections/{providerConnectionId}/health` (`getProviderConnectionHealth` in the function API)
   */
  getHealth(providerConnectionId: string, options?: RequestOptions): NexusPromise<types.GetProviderConnectionHealthResponses[keyof types.GetProviderConnectionHealthResponses]> {
    return this._core._call<types.GetProviderConnectionHealthResponses[keyof types.GetProviderConnectionHealthResponses]>(sdk.getProviderConnectionHealth, { path: { providerConnectionId } }, options);
  }

  /**
   * Rotate a provider connection's API key
   *
   * Replaces the stored key atomically: gateway calls use the new key within the gateway's
   * auth cache bound (`NEXUS_AUTH_CACHE_TTL_MS`, 1 s by default). The answer
   * carries the new `secretPreview`; `lastVerifiedAt` is cleared until the new key is verified.
   *
   * `POST /admin/v1/provider-connections/{providerConnectionId}/rotate-secret` (`rotateProviderSecret` in the function API)
   */
  rotateProviderSecret(providerConnectionId: string, body: Params<NonNullable<types.RotateProviderSecretData['body']>>, options?: RequestOptions): NexusPromise<types.RotateProviderSecretResponses[keyof types.RotateProviderSecretResponses]> {
    return this._core._call<types.RotateProviderSecretResponses[keyof types.RotateProviderSecretResponses]>(sdk.rotateProviderSecret, { path: { providerConnectionId }, body }, options);
  }
}

/**
 * Routes: list, create, get, archive, update, getHealth.
 *
 * One gateway URL over several connections, with fallbacks, retries, load balancing and circuit breaking.
 */
export class RoutesResource extends NexusResource {
  /**
   * List routes
   *
   * The workspace's routes, archived ones included, newest first.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/routes` (`listRoutes` in the function API)
   */
  list(workspaceId: string, query?: Params<types.ListRoutesData['query']>, options?: RequestOptions): PagePromise<types.ListRoutesResponses[200][number]> {
    return this._core._list<types.ListRoutesResponses[200][number]>(sdk.listRoutes, { path: { workspaceId }, query }, options);
  }

  /**
   * Create a route
   *
   * A route is called like a connection: its `gatewayBaseUrl` takes the same SDKs and inference keys.
   * Its targets are ACTIVE connections of the workspace whose request bodies share a shape
   * (`openai` with `azure-openai`; otherwise one protocol). A target in another workspace, or a route
   * given as a target, is 404 `provider_connection_not_found`; an archived one is 409 `connection_archived`;
   * targets of two shapes are 400 `route_targets_incompatible`. An `azure-openai` target names a deployment
   * for each model the route maps (`modelMap`): a model another target maps that it does not is 400
   * `route_model_unserved`.
   *
   * `POST /admin/v1/workspaces/{workspaceId}/routes` (`createRoute` in the function API)
   */
  create(workspaceId: string, body: Params<NonNullable<types.CreateRouteData['body']>>, options?: RequestOptions): NexusPromise<types.CreateRouteResponses[keyof types.CreateRouteResponses]> {
    return this._core._call<types.CreateRouteResponses[keyof types.CreateRouteResponses]>(sdk.createRoute, { path: { workspaceId }, body }, options);
  }

  /**
   * Get a route
   *
   * Archived routes stay readable.
   *
   * `GET /admin/v1/routes/{routeId}` (`getRoute` in the function API)
   */
  get(routeId: string, options?: RequestOptions): NexusPromise<types.GetRouteResponses[keyof types.GetRouteResponses]> {
    return this._core._call<types.GetRouteResponses[keyof types.GetRouteResponses]>(sdk.getRoute, { path: { routeId } }, options);
  }

  /**
   * Archive a route
   *
   * Makes the route ARCHIVED; the gateway answers 404 under its URL from then on. Archiving twice is a no-op.
   *
   * `DELETE /admin/v1/routes/{routeId}` (`archiveRoute` in the function API)
   */
  archive(routeId: string, options?: RequestOptions): NexusPromise<types.ArchiveRouteResponses[keyof types.ArchiveRouteResponses]> {
    return this._core._call<types.ArchiveRouteResponses[keyof types.ArchiveRouteResponses]>(sdk.archiveRoute, { path: { routeId } }, options);
  }

  /**
   * Update a route
   *
   * Changes the given fields only; `targets` replaces the whole list and is checked as on create.
   * Gateway processes apply the change within a second. An archived route is 409 `route_archived`.
   *
   * `PATCH /admin/v1/routes/{routeId}` (`updateRoute` in the function API)
   */
  update(routeId: string, body: Params<NonNullable<types.UpdateRouteData['body']>>, options?: RequestOptions): NexusPromise<types.UpdateRouteResponses[keyof types.UpdateRouteResponses]> {
    return this._core._call<types.UpdateRouteResponses[keyof types.UpdateRouteResponses]>(sdk.updateRoute, { path: { routeId }, body }, options);
  }

  /**
   * Read a route's health
   *
   * For each target: its breaker's state (as every gateway process reads it), its connection's status
   * (an archived or suspended connection is skipped), the attempts and errors of the last minute and
   * the last hour, the median latency of the last hour, and its last error. `windows` has the route's
   * attempts on the target over the last 5 minutes, hour and day, counted as getProviderConnectionHealth
   * counts a connection's (errors are `UPSTREAM_ERROR` and `FAILED`; latency and time to first token as
   * p50, p95 and p99), for this route's calls only.
   *
   * `GET /admin/v1/routes/{routeId}/health` (`getRouteHealth` in the function API)
   */
  getHealth(routeId: string, options?: RequestOptions): NexusPromise<types.GetRouteHealthResponses[keyof types.GetRouteHealthResponses]> {
    return this._core._call<types.GetRouteHealthResponses[keyof types.GetRouteHealthResponses]>(sdk.getRouteHealth, { path: { routeId } }, options);
  }
}

/**
 * Plans: setPassthroughClasses, list, create, get, update, publish, createQuotaStrategy, listStrategies, getStrategy, publishStrategy, listStrategyBindings, bindStrategy, closeStrategyBinding, setRateLimits, setRequestLog.
 *
 * Plans, versioned quota strategies and their bindings.
 */
export class PlansResource extends NexusResource {
  /**
   * Replace a plan's passthrough classes
   *
   * Replaces the classes of unmetered gateway paths the plan's users may call (`[]` removes them all), whatever
   * the plan's status: like its rate limits, and unlike what the plan sells (its quota strategy, its billing
   * interval), they are operational, so a class found abused can be closed on a live plan at once, and one opened
   * for its users without moving them to another plan. A call's class passes when the plan or the workspace lets
   * it through. The change is audited (`plan.passthrough_classes_changed`, with the classes before and after) and
   * applies to the next call of every access on the plan, on every gateway process. A class that is not a
   * PassthroughClass, or one listed twice, is refused with 400 and changes nothing. An archived workspace answers
   * 409 `workspace_archived`.
   *
   * `PUT /admin/v1/plans/{planId}/passthrough-classes` (`setPlanPassthroughClasses` in the function API)
   */
  setPassthroughClasses(planId: string, body: Params<NonNullable<types.SetPlanPassthroughClassesData['body']>>, options?: RequestOptions): NexusPromise<types.SetPlanPassthroughClassesResponses[keyof types.SetPlanPassthroughClassesResponses]> {
    return this._core._call<types.SetPlanPassthroughClassesResponses[keyof types.SetPlanPassthroughClassesResponses]>(sdk.setPlanPassthroughClasses, { path: { planId }, body }, options);
  }

  /**
   * List plans
   *
   * `GET /admin/v1/workspaces/{workspaceId}/plans` (`listPlans` in the function API)
   */
  list(workspaceId: string, query?: Params<types.ListPlansData['query']>, options?: RequestOptions): PagePromise<types.ListPlansResponses[200][number]> {
    return this._core._list<types.ListPlansResponses[200][number]>(sdk.listPlans, { path: { workspaceId }, query }, options);
  }

  /**
   * Create a plan
   *
   * A new plan is DRAFT. `key` is unique in the workspace (409 `plan_key_exists`). An archived workspace answers 409 `workspace_archived`.
   *
   * `POST /admin/v1/workspaces/{workspaceId}/plans` (`createPlan` in the function API)
   */
  create(workspaceId: string, body: Params<NonNullable<types.CreatePlanData['body']>>, options?: RequestOptions): NexusPromise<types.CreatePlanResponses[keyof types.CreatePlanResponses]> {
    return this._core._call<types.CreatePlanResponses[keyof types.CreatePlanResponses]>(sdk.createPlan, { path: { workspaceId }, body }, options);
  }

  /**
   * Get a plan and its bindings in force
   *
   * `GET /admin/v1/plans/{planId}` (`getPlan` in the function API)
   */
  get(planId: string, options?: RequestOptions): NexusPromise<types.GetPlanResponses[keyof types.GetPlanResponses]> {
    return this._core._call<types.GetPlanResponses[keyof types.GetPlanResponses]>(sdk.getPlan, { path: { planId } }, options);
  }

  /**
   * Update a DRAFT plan
   *
   * Only a DRAFT plan can be updated (409 `plan_not_draft` with `current_status`). An empty object changes nothing.
   *
   * `PATCH /admin/v1/plans/{planId}` (`updatePlan` in the function API)
   */
  update(planId: string, body: Params<NonNullable<types.UpdatePlanData['body']>>, options?: RequestOptions): NexusPromise<types.UpdatePlanResponses[keyof types.UpdatePlanResponses]> {
    return this._core._call<types.UpdatePlanResponses[keyof types.UpdatePlanResponses]>(sdk.updatePlan, { path: { planId }, body }, options);
  }

  /**
   * Publish a plan
   *
   * DRAFT -> ACTIVE, once a published quota strategy is bound and in force now; otherwise 409 `plan_not_publishable` saying why. Publishing an ACTIVE plan again changes nothing; an ARCHIVED one answers 409 `plan_not_draft`.
   *
   * `POST /admin/v1/plans/{planId}/publish` (`publishPlan` in the function API)
   */
  publish(planId: string, options?: RequestOptions): NexusPromise<types.PublishPlanResponses[keyof types.PublishPlanResponses]> {
    return this._core._call<types.PublishPlanResponses[keyof types.PublishPlanResponses]>(sdk.publishPlan, { path: { planId } }, options);
  }

  /**
   * Create a quota strategy version
   *
   * Creating with a `key` that exists makes its next `version`. A version is DRAFT until published, and immutable
   * after. Multipliers are parts per million (1000000 = one unit per token).
   *
   * The kinds beyond text tokens have optional multipliers of their own (docs/pricing.md, "Kinds"): audio and
   * image tokens (absent: as input or output tokens, so a strategy without them charges exactly as text), images
   * (by tier with `imageTierMultipliersPpm`), seconds of audio and characters (absent: a documented default, never
   * zero). A model rule without them takes the defaults from its own multipliers, not the strategy's.
   *
   * `modelRules` price models apart from the strategy's own multipliers (its default): the first rule, in list
   * order, whose `pattern` matches the model the request names applies, to the call's bound and to its charge.
   * `allowedModels` restricts the models a call may name (absent or null: every model); a request naming another
   * is refused with 403 `model_not_allowed` before the provider is called. A pattern is an exact model name or a
   * glob whose only wildcard is `*` (any run of characters, none included). `outputCapPolicy` decides what a
   * request asking for more output than `maxOutputTokens` gets: `clamp` (the default) lowers its cap to
   * `maxOutputTokens`, `refuse` answers 400 `max_tokens_exceeded`. See docs/pricing.md.
   *
   * `POST /admin/v1/workspaces/{workspaceId}/plan-strategies/quota` (`createQuotaStrategy` in the function API)
   */
  createQuotaStrategy(workspaceId: string, body: Params<NonNullable<types.CreateQuotaStrategyData['body']>>, options?: RequestOptions): NexusPromise<types.CreateQuotaStrategyResponses[keyof types.CreateQuotaStrategyResponses]> {
    return this._core._call<types.CreateQuotaStrategyResponses[keyof types.CreateQuotaStrategyResponses]>(sdk.createQuotaStrategy, { path: { workspaceId }, body }, options);
  }

  /**
   * List quota strategies
   *
   * `GET /admin/v1/workspaces/{workspaceId}/plan-strategies` (`listPlanStrategies` in the function API)
   */
  listStrategies(workspaceId: string, query?: Params<types.ListPlanStrategiesData['query']>, options?: RequestOptions): PagePromise<types.ListPlanStrategiesResponses[200][number]> {
    return this._core._list<types.ListPlanStrategiesResponses[200][number]>(sdk.listPlanStrategies, { path: { workspaceId }, query }, options);
  }

  /**
   * Get a quota strategy version
   *
   * `GET /admin/v1/plan-strategies/{strategyId}` (`getPlanStrategy` in the function API)
   */
  getStrategy(strategyId: string, options?: RequestOptions): NexusPromise<types.GetPlanStrategyResponses[keyof types.GetPlanStrategyResponses]> {
    return this._core._call<types.GetPlanStrategyResponses[keyof types.GetPlanStrategyResponses]>(sdk.getPlanStrategy, { path: { strategyId } }, options);
  }

  /**
   * Publish a quota strategy version
   *
   * DRAFT -> PUBLISHED. A published version is immutable: publishing it again, like any change, answers 409 `strategy_published`.
   *
   * `POST /admin/v1/plan-strategies/{strategyId}/publish` (`publishPlanStrategy` in the function API)
   */
  publishStrategy(strategyId: string, options?: RequestOptions): NexusPromise<types.PublishPlanStrategyResponses[keyof types.PublishPlanStrategyResponses]> {
    return this._core._call<types.PublishPlanStrategyResponses[keyof types.PublishPlanStrategyResponses]>(sdk.publishPlanStrategy, { path: { strategyId } }, options);
  }

  /**
   * List a plan's bindings
   *
   * `GET /admin/v1/plans/{planId}/strategy-bindings` (`listPlanStrategyBindings` in the function API)
   */
  listStrategyBindings(planId: string, query?: Params<types.ListPlanStrategyBindingsData['query']>, options?: RequestOptions): PagePromise<types.ListPlanStrategyBindingsResponses[200][number]> {
    return this._core._list<types.ListPlanStrategyBindingsResponses[200][number]>(sdk.listPlanStrategyBindings, { path: { planId }, query }, options);
  }

  /**
   * Bind a strategy version to a plan
   *
   * Only a PUBLISHED version can be bound (409 `strategy_not_published`). At most one QUOTA strategy is in force for a plan at any instant: the binding in force at `effectiveFrom` is ended there (a version upgrade). A binding that starts at or after `effectiveFrom` is refused (409 `binding_overlap`): close it first.
   *
   * `POST /admin/v1/plans/{planId}/strategy-bindings` (`bindPlanStrategy` in the function API)
   */
  bindStrategy(planId: string, body: Params<NonNullable<types.BindPlanStrategyData['body']>>, options?: RequestOptions): NexusPromise<types.BindPlanStrategyResponses[keyof types.BindPlanStrategyResponses]> {
    return this._core._call<types.BindPlanStrategyResponses[keyof types.BindPlanStrategyResponses]>(sdk.bindPlanStrategy, { path: { planId }, body }, options);
  }

  /**
   * Close a binding
   *
   * Ends the binding at `effectiveAt` (now by default; a binding that has not started yet is closed at its `effectiveFrom`). At its `effectiveFrom` it cancels a binding that has not started. A binding already ended by then answers 409 `binding_closed`.
   *
   * `DELETE /admin/v1/plan-strategy-bindings/{bindingId}` (`closePlanStrategyBinding` in the function API)
   */
  closeStrategyBinding(bindingId: string, query?: Params<types.ClosePlanStrategyBindingData['query']>, options?: RequestOptions): NexusPromise<types.ClosePlanStrategyBindingResponses[keyof types.ClosePlanStrategyBindingResponses]> {
    return this._core._call<types.ClosePlanStrategyBindingResponses[keyof types.ClosePlanStrategyBindingResponses]>(sdk.closePlanStrategyBinding, { path: { bindingId }, query }, options);
  }

  /**
   * Replace a plan's rate limits
   *
   * Replaces the plan's rate limits as a whole (`{}` removes them), whatever the plan's status:
   * unlike its other fields, which only a DRAFT plan may change (`updatePlan`), rate limits are
   * operational, not part of what the plan sells. The change is audited (`plan.rate_limits_changed`,
   * with the limits before and after) and applies to the next call of every access on the plan, on
   * every gateway process. What each access has used stays scheduled: a lower limit may refuse its
   * next calls until enough has drained, a higher one admits them at once. A value that is not an
   * integer from 1 to 2147483647, or a field not listed, is refused with 400 naming it and changes
   * nothing. An archived workspace answers 409 `workspace_archived`.
   *
   * `PUT /admin/v1/plans/{planId}/rate-limits` (`setPlanRateLimits` in the function API)
   */
  setRateLimits(planId: string, body: Params<NonNullable<types.SetPlanRateLimitsData['body']>>, options?: RequestOptions): NexusPromise<types.SetPlanRateLimitsResponses[keyof types.SetPlanRateLimitsResponses]> {
    return this._core._call<types.SetPlanRateLimitsResponses[keyof types.SetPlanRateLimitsResponses]>(sdk.setPlanRateLimits, { path: { planId }, body }, options);
  }

  /**
   * Set a plan's request log policy
   *
   * Sets (or, with null, removes) the request log policy of the plan's calls, whatever the plan's status: a
   * route's policy comes first, then the plan's, then the workspace's. The change is audited
   * (`plan.request_log_changed`, before and after) and applies to the next call on every gateway process. An
   * archived workspace answers 409 `workspace_archived`.
   *
   * `PUT /admin/v1/plans/{planId}/request-log` (`setPlanRequestLog` in the function API)
   */
  setRequestLog(planId: string, body: Params<NonNullable<types.SetPlanRequestLogData['body']>>, options?: RequestOptions): NexusPromise<types.SetPlanRequestLogResponses[keyof types.SetPlanRequestLogResponses]> {
    return this._core._call<types.SetPlanRequestLogResponses[keyof types.SetPlanRequestLogResponses]>(sdk.setPlanRequestLog, { path: { planId }, body }, options);
  }
}

/**
 * Workspace accesses: listWorkspaceUsers, provisionWorkspaceUser, get, activate, suspend, renew, changePlan, listInferenceKeys, issueInferenceKey, revokeInferenceKey, getInferenceKey, getQuota, grantUnits.
 *
 * End users, their accesses, inference keys and quota.
 */
export class WorkspaceAccessesResource extends NexusResource {
  /**
   * List users and their accesses
   *
   * `GET /admin/v1/workspaces/{workspaceId}/users` (`listWorkspaceUsers` in the function API)
   */
  listWorkspaceUsers(workspaceId: string, query?: Params<types.ListWorkspaceUsersData['query']>, options?: RequestOptions): PagePromise<types.ListWorkspaceUsersResponses[200][number]> {
    return this._core._list<types.ListWorkspaceUsersResponses[200][number]>(sdk.listWorkspaceUsers, { path: { workspaceId }, query }, options);
  }

  /**
   * Provision a user and their access
   *
   * Idempotent on (workspace, `externalUserId`): a repeat returns the same user and access, unchanged (`created: false`), and grants nothing again. A new access is ACTIVE with a first quota period [now, now + resetInterval) from the plan's strategy in force now. The plan must be ACTIVE (409 `plan_not_active`). With `issueInferenceKey: true` a new key is issued (on a repeat too) and its plaintext returned once in `apiKey`; `inferenceKeyIssued` says whether one was.
   *
   * `POST /admin/v1/workspaces/{workspaceId}/users` (`provisionWorkspaceUser` in the function API)
   */
  provisionWorkspaceUser(workspaceId: string, body: Params<NonNullable<types.ProvisionWorkspaceUserData['body']>>, options?: RequestOptions): NexusPromise<types.ProvisionWorkspaceUserResponses[keyof types.ProvisionWorkspaceUserResponses]> {
    return this._core._call<types.ProvisionWorkspaceUserResponses[keyof types.ProvisionWorkspaceUserResponses]>(sdk.provisionWorkspaceUser, { path: { workspaceId }, body }, options);
  }

  /**
   * Get a workspace access
   *
   * `GET /admin/v1/workspace-accesses/{accessId}` (`getWorkspaceAccess` in the function API)
   */
  get(accessId: string, options?: RequestOptions): NexusPromise<types.GetWorkspaceAccessResponses[keyof types.GetWorkspaceAccessResponses]> {
    return this._core._call<types.GetWorkspaceAccessResponses[keyof types.GetWorkspaceAccessResponses]>(sdk.getWorkspaceAccess, { path: { accessId } }, options);
  }

  /**
   * Activate an access
   *
   * PENDING or SUSPENDED -> ACTIVE (a PENDING access gets its first quota period); EXPIRED -> ACTIVE only while a quota period covers now (renew first). ACTIVE already: no change. Illegal transitions answer 409 `illegal_transition` with `current_status`.
   *
   * `POST /admin/v1/workspace-accesses/{accessId}/activate` (`activateWorkspaceAccess` in the function API)
   */
  activate(accessId: string, options?: RequestOptions): NexusPromise<types.ActivateWorkspaceAccessResponses[keyof types.ActivateWorkspaceAccessResponses]> {
    return this._core._call<types.ActivateWorkspaceAccessResponses[keyof types.ActivateWorkspaceAccessResponses]>(sdk.activateWorkspaceAccess, { path: { accessId } }, options);
  }

  /**
   * Suspend an access
   *
   * ACTIVE -> SUSPENDED: new gateway calls are refused (403 `access_suspended`) within the gateway's auth cache bound (`NEXUS_AUTH_CACHE_TTL_MS`, 1 s by default); calls in flight finish. SUSPENDED already: no change.
   *
   * `POST /admin/v1/workspace-accesses/{accessId}/suspend` (`suspendWorkspaceAccess` in the function API)
   */
  suspend(accessId: string, options?: RequestOptions): NexusPromise<types.SuspendWorkspaceAccessResponses[keyof types.SuspendWorkspaceAccessResponses]> {
    return this._core._call<types.SuspendWorkspaceAccessResponses[keyof types.SuspendWorkspaceAccessResponses]>(sdk.suspendWorkspaceAccess, { path: { accessId } }, options);
  }

  /**
   * Renew an access
   *
   * Creates the quota period [periodStart, periodEnd) from the strategy of `planId` in force at `periodStart`. The same period again is a no-op; an overlapping one is refused (409 `period_overlap`). An EXPIRED or PENDING access whose new period has not ended becomes ACTIVE.
   *
   * `POST /admin/v1/workspace-accesses/{accessId}/renew` (`renewWorkspaceAccess` in the function API)
   */
  renew(accessId: string, body: Params<NonNullable<types.RenewWorkspaceAccessData['body']>>, options?: RequestOptions): NexusPromise<types.RenewWorkspaceAccessResponses[keyof types.RenewWorkspaceAccessResponses]> {
    return this._core._call<types.RenewWorkspaceAccessResponses[keyof types.RenewWorkspaceAccessResponses]>(sdk.renewWorkspaceAccess, { path: { accessId }, body }, options);
  }

  /**
   * Move an access to another plan
   *
   * Takes effect at `effectiveAt` (now by default). The quota period covering it is split there: the old part keeps the old plan's time-prorated share (never less than what it already used), the new part [effectiveAt, periodEnd) gets the new plan's prorated share minus whatever was used beyond the old share. The same plan again changes nothing. See docs/decisions.md.
   *
   * `PATCH /admin/v1/workspace-accesses/{accessId}/plan` (`changeAccessPlan` in the function API)
   */
  changePlan(accessId: string, body: Params<NonNullable<types.ChangeAccessPlanData['body']>>, options?: RequestOptions): NexusPromise<types.ChangeAccessPlanResponses[keyof types.ChangeAccessPlanResponses]> {
    return this._core._call<types.ChangeAccessPlanResponses[keyof types.ChangeAccessPlanResponses]>(sdk.changeAccessPlan, { path: { accessId }, body }, options);
  }

  /**
   * List inference keys
   *
   * `GET /admin/v1/workspace-accesses/{accessId}/api-keys` (`listInferenceKeys` in the function API)
   */
  listInferenceKeys(accessId: string, query?: Params<types.ListInferenceKeysData['query']>, options?: RequestOptions): PagePromise<types.ListInferenceKeysResponses[200][number]> {
    return this._core._list<types.ListInferenceKeysResponses[200][number]>(sdk.listInferenceKeys, { path: { accessId }, query }, options);
  }

  /**
   * Issue an inference key
   *
   * `nx-<environment>-` followed by 43 random base64url characters; stored only as a keyed hash. `expiresAt` defaults to the configured lifetime.
   *
   * `POST /admin/v1/workspace-accesses/{accessId}/api-keys` (`issueInferenceKey` in the function API)
   */
  issueInferenceKey(accessId: string, body?: Params<types.IssueInferenceKeyData['body']>, options?: RequestOptions): NexusPromise<types.IssueInferenceKeyResponses[keyof types.IssueInferenceKeyResponses]> {
    return this._core._call<types.IssueInferenceKeyResponses[keyof types.IssueInferenceKeyResponses]>(sdk.issueInferenceKey, { path: { accessId }, body }, options);
  }

  /**
   * Revoke an inference key
   *
   * Gateway calls with the key are refused (401) within the gateway's auth cache bound (`NEXUS_AUTH_CACHE_TTL_MS`, 1 s by default). Plan and quota are untouched.
   *
   * `DELETE /admin/v1/workspace-accesses/{accessId}/api-keys/{keyId}` (`revokeInferenceKey` in the function API)
   */
  revokeInferenceKey(accessId: string, keyId: string, options?: RequestOptions): NexusPromise<types.RevokeInferenceKeyResponses[keyof types.RevokeInferenceKeyResponses]> {
    return this._core._call<types.RevokeInferenceKeyResponses[keyof types.RevokeInferenceKeyResponses]>(sdk.revokeInferenceKey, { path: { accessId, keyId } }, options);
  }

  /**
   * Get an inference key
   *
   * A key by its id alone (never its plaintext), with the access it belongs to; the ids that usage summaries grouped by `key` and invocations carry. A key of a workspace the Management Key cannot see is 404 `inference_key_not_found`, as an unknown one is.
   *
   * `GET /admin/v1/inference-keys/{keyId}` (`getInferenceKey` in the function API)
   */
  getInferenceKey(keyId: string, options?: RequestOptions): NexusPromise<types.GetInferenceKeyResponses[keyof types.GetInferenceKeyResponses]> {
    return this._core._call<types.GetInferenceKeyResponses[keyof types.GetInferenceKeyResponses]>(sdk.getInferenceKey, { path: { keyId } }, options);
  }

  /**
   * Get the current quota
   *
   * The quota period covering now. No such period: 404 `quota_period_not_found`.
   *
   * `GET /admin/v1/workspace-accesses/{accessId}/quota` (`getWorkspaceAccessQuota` in the function API)
   */
  getQuota(accessId: string, options?: RequestOptions): NexusPromise<types.GetWorkspaceAccessQuotaResponses[keyof types.GetWorkspaceAccessQuotaResponses]> {
    return this._core._call<types.GetWorkspaceAccessQuotaResponses[keyof types.GetWorkspaceAccessQuotaResponses]>(sdk.getWorkspaceAccessQuota, { path: { accessId } }, options);
  }

  /**
   * Grant units once (a top-up)
   *
   * Adds `units` to the grant of the quota period running now, once: the period's `grantedUnits` and
   * `toppedUpUnits` grow by them, and the audit records it (`access.units_granted`). Calls held or running are
   * untouched; the next call on any process can use the units (a refusal a process remembers lasts 250 ms at
   * most). A plan change later in the period moves what was topped up to the new part whole; a renewal or a billed
   * period does not carry it past the period's end. No period running now: 404 `quota_period_not_found`; a
   * REVOKED access: 409 `illegal_transition`; an archived workspace: 409 `workspace_archived`.
   *
   * `POST /admin/v1/workspace-accesses/{accessId}/quota/top-ups` (`grantAccessUnits` in the function API)
   */
  grantUnits(accessId: string, body: Params<NonNullable<types.GrantAccessUnitsData['body']>>, options?: RequestOptions): NexusPromise<types.GrantAccessUnitsResponses[keyof types.GrantAccessUnitsResponses]> {
    return this._core._call<types.GrantAccessUnitsResponses[keyof types.GrantAccessUnitsResponses]>(sdk.grantAccessUnits, { path: { accessId }, body }, options);
  }
}

/**
 * Usage: listAuditLogs, getInvocationLog, listInvocations, getInvocation, listEvents, getSummary.
 *
 * Invocations, usage events and the audit trail.
 */
export class UsageResource extends NexusResource {
  /**
   * List control-plane audit logs
   *
   * The workspace's audit entries, newest first. Secrets in `changes` appear as `[redacted]`.
   * Filters combine with AND; `since` is inclusive, `until` exclusive.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/audit-logs` (`listAuditLogs` in the function API)
   */
  listAuditLogs(workspaceId: string, query?: Params<types.ListAuditLogsData['query']>, options?: RequestOptions): PagePromise<types.ListAuditLogsResponses[200][number]> {
    return this._core._list<types.ListAuditLogsResponses[200][number]>(sdk.listAuditLogs, { path: { workspaceId }, query }, options);
  }

  /**
   * Get a call's request log
   *
   * The request and the answer of a gateway call, as kept by its request log policy (RequestLogPolicy): its
   * request's body and allow-listed headers, and its answer's (a stream's answer assembled: its text and tool
   * calls, not its frames). Each body is cut at the policy's `maxBodyBytes` (`truncated` says so), and neither the
   * provider's key nor the caller's inference key is ever in it. 404 `request_log_not_found` when the call kept
   * none (no policy, not sampled, a success under `failed`, dropped under pressure, or expired), or is another
   * workspace's.
   *
   * `GET /admin/v1/invocations/{invocationId}/log` (`getInvocationLog` in the function API)
   */
  getInvocationLog(invocationId: string, options?: RequestOptions): NexusPromise<types.GetInvocationLogResponses[keyof types.GetInvocationLogResponses]> {
    return this._core._call<types.GetInvocationLogResponses[keyof types.GetInvocationLogResponses]>(sdk.getInvocationLog, { path: { invocationId } }, options);
  }

  /**
   * List gateway invocations
   *
   * One invocation per gateway call of a valid inference key, newest first: the calls answered, and those
   * refused once the key's access was known (REJECTED, with their reason: a suspended or inactive access,
   * a model the plan does not allow, quota, a rate limit, the workspace's budget). A call of an unknown,
   * revoked or expired key is not recorded (it is logged and counted by reason). An invocation is written
   * when the call ends (after the response's last byte), together with its attempt and its usage events.
   * Each row names its end user (`user`), so a list needs no second request.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/invocations` (`listInvocations` in the function API)
   */
  listInvocations(workspaceId: string, query?: Params<types.ListInvocationsData['query']>, options?: RequestOptions): PagePromise<types.ListInvocationsResponses[200][number]> {
    return this._core._list<types.ListInvocationsResponses[200][number]>(sdk.listInvocations, { path: { workspaceId }, query }, options);
  }

  /**
   * Get an invocation
   *
   * The invocation with its provider attempt and its quota settlement (usage and adjustment events).
   *
   * `GET /admin/v1/invocations/{invocationId}` (`getInvocation` in the function API)
   */
  getInvocation(invocationId: string, options?: RequestOptions): NexusPromise<types.GetInvocationResponses[keyof types.GetInvocationResponses]> {
    return this._core._call<types.GetInvocationResponses[keyof types.GetInvocationResponses]>(sdk.getInvocation, { path: { invocationId } }, options);
  }

  /**
   * List usage and adjustment events
   *
   * Immutable records of quota consumption, newest first.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/usage-events` (`listUsageEvents` in the function API)
   */
  listEvents(workspaceId: string, query?: Params<types.ListUsageEventsData['query']>, options?: RequestOptions): PagePromise<types.ListUsageEventsResponses[200][number]> {
    return this._core._list<types.ListUsageEventsResponses[200][number]>(sdk.listUsageEvents, { path: { workspaceId }, query }, options);
  }

  /**
   * Usage over time
   *
   * The workspace's usage and adjustment events summed per time bucket (hours, or days in `timeZone`)
   * and per model, access, provider connection, inference key or plan: the units charged, the tokens
   * counted, the provider cost, and the calls made, failed and refused.
   * The range is whole UTC hours: `since` is rounded down to its hour and `until` up to the end
   * of its hour (the answer says the range summed). Buckets are aligned to the hour, or to the day in
   * `timeZone` (from its local midnight; a day's first bucket may start before `since`); a bucket without
   * events or calls is absent. Events are summed per UTC hour first: in a zone whose offset is not a whole
   * hour (`Asia/Kolkata`), an hour counts in the local day its start falls in. The range holds at most 1000
   * buckets (about 41 days by hour, 1000 days by day). Default range: the last 24 hours by hour, the last
   * 30 days by day. The answer is streamed, written as its buckets are summed: a failure after it has begun
   * cuts the connection, so a partial answer is never taken for a whole one.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/usage-summary` (`getUsageSummary` in the function API)
   */
  getSummary(workspaceId: string, query?: Params<types.GetUsageSummaryData['query']>, options?: RequestOptions): NexusPromise<types.GetUsageSummaryResponses[keyof types.GetUsageSummaryResponses]> {
    return this._core._call<types.GetUsageSummaryResponses[keyof types.GetUsageSummaryResponses]>(sdk.getUsageSummary, { path: { workspaceId }, query }, options);
  }
}

/**
 * Money: listModelPrices, createModelPrice, importModelPrices, closeModelPrice, getWorkspaceBudget, setWorkspaceBudget, exportInvocations, exportUsageSummary.
 *
 * The price book, the cost of calls, spend exports and workspace budgets.
 */
export class MoneyResource extends NexusResource {
  /**
   * List the price book
   *
   * The workspace's prices, newest first; with `at`, only those in force at that time.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/prices` (`listModelPrices` in the function API)
   */
  listModelPrices(workspaceId: string, query?: Params<types.ListModelPricesData['query']>, options?: RequestOptions): PagePromise<types.ListModelPricesResponses[200][number]> {
    return this._core._list<types.ListModelPricesResponses[200][number]>(sdk.listModelPrices, { path: { workspaceId }, query }, options);
  }

  /**
   * Add a price to the price book
   *
   * A provider's price for a model pattern, per million tokens (and, where the model is priced so, per million
   * audio or image tokens, per image and image tier, per second of audio, per million characters, and per call:
   * docs/pricing.md "Kinds"), in the workspace's currency, in force from
   * `effectiveFrom` until it is closed. Scope: one provider connection (`providerConnectionId`), every
   * connection of one protocol (`protocolProfile`), or every connection (neither). Two prices of the same
   * pattern and scope may not overlap in time (409 `price_overlap`): close the old one at the new one's start.
   * A call is charged under the price in force when it started; a price added or closed later never changes the
   * cost of a call already recorded.
   *
   * `POST /admin/v1/workspaces/{workspaceId}/prices` (`createModelPrice` in the function API)
   */
  createModelPrice(workspaceId: string, body: Params<NonNullable<types.CreateModelPriceData['body']>>, options?: RequestOptions): NexusPromise<types.CreateModelPriceResponses[keyof types.CreateModelPriceResponses]> {
    return this._core._call<types.CreateModelPriceResponses[keyof types.CreateModelPriceResponses]>(sdk.createModelPrice, { path: { workspaceId }, body }, options);
  }

  /**
   * Import prices in LiteLLM's format
   *
   * Loads a `model_prices_and_context_window.json` (LiteLLM's map of model id to USD per token) into the price
   * book in one call: one price per entry that has `input_cost_per_token` and `output_cost_per_token`, its
   * pattern the entry's key, converted to per million tokens exactly (`cache_read_input_token_cost`,
   * `cache_creation_input_token_cost` and `output_cost_per_reasoning_token` too). Entries priced otherwise
   * (per image, per second, per character) and `sample_spec` are skipped and listed. The file's prices are in
   * USD: the workspace's currency must be USD. All or nothing: an entry that is not in the format refuses the
   * whole import with 400 naming its key (`prices.<model>.<field>`); an entry whose pattern and scope already
   * has a price in force at `effectiveFrom` refuses it with 409.
   *
   * `POST /admin/v1/workspaces/{workspaceId}/prices/import` (`importModelPrices` in the function API)
   */
  importModelPrices(workspaceId: string, body: Params<NonNullable<types.ImportModelPricesData['body']>>, options?: RequestOptions): NexusPromise<types.ImportModelPricesResponses[keyof types.ImportModelPricesResponses]> {
    return this._core._call<types.ImportModelPricesResponses[keyof types.ImportModelPricesResponses]>(sdk.importModelPrices, { path: { workspaceId }, body }, options);
  }

  /**
   * Close a price
   *
   * Ends the price at `effectiveTo` (default now): calls that start from then are not charged under it. Calls
   * already recorded keep their cost. A price closed already: 409 `price_closed`.
   *
   * `POST /admin/v1/model-prices/{priceId}/close` (`closeModelPrice` in the function API)
   */
  closeModelPrice(priceId: string, body?: Params<types.CloseModelPriceData['body']>, options?: RequestOptions): NexusPromise<types.CloseModelPriceResponses[keyof types.CloseModelPriceResponses]> {
    return this._core._call<types.CloseModelPriceResponses[keyof types.CloseModelPriceResponses]>(sdk.closeModelPrice, { path: { priceId }, body }, options);
  }

  /**
   * Get the workspace's spend budget
   *
   * The budget, what was spent in its current window, and whether each level is crossed. 404 `budget_not_found` when none is set.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/budget` (`getWorkspaceBudget` in the function API)
   */
  getWorkspaceBudget(workspaceId: string, options?: RequestOptions): NexusPromise<types.GetWorkspaceBudgetResponses[keyof types.GetWorkspaceBudgetResponses]> {
    return this._core._call<types.GetWorkspaceBudgetResponses[keyof types.GetWorkspaceBudgetResponses]>(sdk.getWorkspaceBudget, { path: { workspaceId } }, options);
  }

  /**
   * Set the workspace's spend budget
   *
   * A daily or monthly spend budget in the workspace's currency, in micro-units; its days and months are those of
   * the workspace's `timeZone` (UTC by default). `softLimitMicros` only
   * reports (the budget shows it crossed); at `hardLimitMicros` the gateway refuses new metered calls with 402
   * `workspace_budget_exceeded` until the window ends or the budget is raised. Calls already admitted finish
   * and are charged; docs/pricing.md ("Budgets") gives the bound across processes.
   *
   * `PUT /admin/v1/workspaces/{workspaceId}/budget` (`setWorkspaceBudget` in the function API)
   */
  setWorkspaceBudget(workspaceId: string, body: Params<NonNullable<types.SetWorkspaceBudgetData['body']>>, options?: RequestOptions): NexusPromise<types.SetWorkspaceBudgetResponses[keyof types.SetWorkspaceBudgetResponses]> {
    return this._core._call<types.SetWorkspaceBudgetResponses[keyof types.SetWorkspaceBudgetResponses]>(sdk.setWorkspaceBudget, { path: { workspaceId }, body }, options);
  }

  /**
   * Export invocations as CSV
   *
   * The invocations that started in [since, until), in the order they started (their ids), as CSV (RFC 4180, a header row), streamed:
   * any number of rows, read from the database a page at a time. It takes listInvocations' filters, so an export is the list
   * an operator is looking at: without `since`, from the workspace's first call; without `until`, up to now.
   * A process streams at most `NEXUS_EXPORTS_AT_ONCE` exports at once (3 by default): past that, 503 `exports_busy`
   * with Retry-After.
   *
   * Resolves to the body as a stream, unread: pipe it, or read it with `new Response(stream).text()`. `.withResponse()` gives the Response with it.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/invocations/export` (`exportInvocations` in the function API)
   */
  exportInvocations(workspaceId: string, query?: Params<types.ExportInvocationsData['query']>, options?: RequestOptions): NexusPromise<ReadableStream<Uint8Array>> {
    return this._core._stream(sdk.exportInvocations, { path: { workspaceId }, query }, options);
  }

  /**
   * Export usage summaries as CSV
   *
   * getUsageSummary's buckets over [since, until) as CSV, streamed; days are days in `timeZone`, as there. The
   * range holds at most 8784 buckets (366 days by hour, 24 years by day; more is 400 `invalid_parameter` naming
   * `since`), and only the hours from the workspace's first usage in it to its last are read. A process streams at
   * most `NEXUS_EXPORTS_AT_ONCE` exports at once (3 by default): past that, 503 `exports_busy` with Retry-After.
   *
   * Resolves to the body as a stream, unread: pipe it, or read it with `new Response(stream).text()`. `.withResponse()` gives the Response with it.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/usage-summary/export` (`exportUsageSummary` in the function API)
   */
  exportUsageSummary(workspaceId: string, query: Params<NonNullable<types.ExportUsageSummaryData['query']>>, options?: RequestOptions): NexusPromise<ReadableStream<Uint8Array>> {
    return this._core._stream(sdk.exportUsageSummary, { path: { workspaceId }, query }, options);
  }
}

/**
 * Billing: listConnections, createConnection, disableConnection, configureProviderCredential, configureWebhookSecret, verifyConnection, listProductMappings, createProductMapping, deleteProductMapping, createCheckout, listWebhookEvents, replayWebhookEvent, listExternalSubscriptions, reconcileConnection, syncWorkspaceAccessBillingPeriod, receiveWebhook.
 *
 * Stripe and Paddle connections, product mappings, checkouts, the webhook inbox and projections.
 */
export class BillingResource extends NexusResource {
  /**
   * List billing connections
   *
   * The workspace's billing connections, newest first.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/billing-connections` (`listBillingConnections` in the function API)
   */
  listConnections(workspaceId: string, query?: Params<types.ListBillingConnectionsData['query']>, options?: RequestOptions): PagePromise<types.ListBillingConnectionsResponses[200][number]> {
    return this._core._list<types.ListBillingConnectionsResponses[200][number]>(sdk.listBillingConnections, { path: { workspaceId }, query }, options);
  }

  /**
   * Create a billing connection
   *
   * A connection to a Stripe or Paddle account. `HOSTED`: checkout is hosted by the provider
   * and state arrives by signed webhooks at `webhookUrl`. `APP_SYNC`: the customer's own
   * backend reports billing periods through `syncWorkspaceAccessBillingPeriod`.
   * The credential and webhook secret may be given here or later; both are write-only.
   *
   * `POST /admin/v1/workspaces/{workspaceId}/billing-connections` (`createBillingConnection` in the function API)
   */
  createConnection(workspaceId: string, body: Params<NonNullable<types.CreateBillingConnectionData['body']>>, options?: RequestOptions): NexusPromise<types.CreateBillingConnectionResponses[keyof types.CreateBillingConnectionResponses]> {
    return this._core._call<types.CreateBillingConnectionResponses[keyof types.CreateBillingConnectionResponses]>(sdk.createBillingConnection, { path: { workspaceId }, body }, options);
  }

  /**
   * Disable a billing connection
   *
   * Makes the connection DISABLED: its webhooks are still acknowledged but ignored, and it
   * cannot start checkouts or reconciliations. Disabling twice is a no-op.
   *
   * `DELETE /admin/v1/billing-connections/{connectionId}` (`disableBillingConnection` in the function API)
   */
  disableConnection(connectionId: string, options?: RequestOptions): NexusPromise<types.DisableBillingConnectionResponses[keyof types.DisableBillingConnectionResponses]> {
    return this._core._call<types.DisableBillingConnectionResponses[keyof types.DisableBillingConnectionResponses]>(sdk.disableBillingConnection, { path: { connectionId } }, options);
  }

  /**
   * Store or rotate the provider credential
   *
   * Stores the provider's secret API key (Stripe `sk_...`/`rk_...`, Paddle `pdl_...`), encrypted.
   * It is never returned; reads show `credentialPreview`. The verification status returns to
   * `UNVERIFIED`. A Stripe key whose mode (`_test_`/`_live_`) differs from the connection's is refused.
   *
   * `PUT /admin/v1/billing-connections/{connectionId}/provider-credential` (`configureBillingProviderCredential` in the function API)
   */
  configureProviderCredential(connectionId: string, body: Params<NonNullable<types.ConfigureBillingProviderCredentialData['body']>>, options?: RequestOptions): NexusPromise<types.ConfigureBillingProviderCredentialResponses[keyof types.ConfigureBillingProviderCredentialResponses]> {
    return this._core._call<types.ConfigureBillingProviderCredentialResponses[keyof types.ConfigureBillingProviderCredentialResponses]>(sdk.configureBillingProviderCredential, { path: { connectionId }, body }, options);
  }

  /**
   * Store or rotate the webhook signing secret
   *
   * Stores the signing secret of the provider's webhook endpoint (Stripe `whsec_...`, Paddle
   * `pdl_ntfset_...`), encrypted and write-only. On rotation the previous secret keeps
   * verifying signatures for a bounded overlap (`NEXUS_WEBHOOK_SECRET_OVERLAP_HOURS`, 24 h by default).
   *
   * `PUT /admin/v1/billing-connections/{connectionId}/webhook-secret` (`configureBillingWebhookSecret` in the function API)
   */
  configureWebhookSecret(connectionId: string, body: Params<NonNullable<types.ConfigureBillingWebhookSecretData['body']>>, options?: RequestOptions): NexusPromise<types.ConfigureBillingWebhookSecretResponses[keyof types.ConfigureBillingWebhookSecretResponses]> {
    return this._core._call<types.ConfigureBillingWebhookSecretResponses[keyof types.ConfigureBillingWebhookSecretResponses]>(sdk.configureBillingWebhookSecret, { path: { connectionId }, body }, options);
  }

  /**
   * Verify the provider credential
   *
   * Calls the provider's API with the stored credential and records the outcome in
   * `credentialVerificationStatus` (`VERIFIED` or `FAILED`) and `lastVerifiedAt`. A rejected
   * credential is an outcome, not an error: the answer is 200 with `FAILED`.
   * No credential stored: 409 `billing_not_configured`.
   *
   * `POST /admin/v1/billing-connections/{connectionId}/verify` (`verifyBillingConnection` in the function API)
   */
  verifyConnection(connectionId: string, options?: RequestOptions): NexusPromise<types.VerifyBillingConnectionResponses[keyof types.VerifyBillingConnectionResponses]> {
    return this._core._call<types.VerifyBillingConnectionResponses[keyof types.VerifyBillingConnectionResponses]>(sdk.verifyBillingConnection, { path: { connectionId } }, options);
  }

  /**
   * List product mappings
   *
   * The connection's product mappings, newest first (disabled ones included unless filtered).
   *
   * `GET /admin/v1/billing-connections/{connectionId}/product-mappings` (`listBillingProductMappings` in the function API)
   */
  listProductMappings(connectionId: string, query?: Params<types.ListBillingProductMappingsData['query']>, options?: RequestOptions): PagePromise<types.ListBillingProductMappingsResponses[200][number]> {
    return this._core._list<types.ListBillingProductMappingsResponses[200][number]>(sdk.listBillingProductMappings, { path: { connectionId }, query }, options);
  }

  /**
   * Map an external product or price to a plan
   *
   * Subscriptions to `externalPriceId` (or, without one, to any price of `externalProductId`)
   * give the mapped plan. A price mapping wins over a product-only mapping. `checkoutEnabled`
   * needs `externalPriceId` (checkouts are created for a price). One active mapping per
   * product/price pair: a second one is 409 `billing_mapping_exists`.
   *
   * `POST /admin/v1/billing-connections/{connectionId}/product-mappings` (`createBillingProductMapping` in the function API)
   */
  createProductMapping(connectionId: string, body: Params<NonNullable<types.CreateBillingProductMappingData['body']>>, options?: RequestOptions): NexusPromise<types.CreateBillingProductMappingResponses[keyof types.CreateBillingProductMappingResponses]> {
    return this._core._call<types.CreateBillingProductMappingResponses[keyof types.CreateBillingProductMappingResponses]>(sdk.createBillingProductMapping, { path: { connectionId }, body }, options);
  }

  /**
   * Disable a product mapping
   *
   * The mapping becomes DISABLED: no new checkout uses it and it no longer maps subscriptions
   * to a plan (existing projections keep the plan they have). Disabling twice is a no-op.
   *
   * `DELETE /admin/v1/billing-product-mappings/{mappingId}` (`deleteBillingProductMapping` in the function API)
   */
  deleteProductMapping(mappingId: string, options?: RequestOptions): NexusPromise<types.DeleteBillingProductMappingResponses[keyof types.DeleteBillingProductMappingResponses]> {
    return this._core._call<types.DeleteBillingProductMappingResponses[keyof types.DeleteBillingProductMappingResponses]>(sdk.deleteBillingProductMapping, { path: { mappingId } }, options);
  }

  /**
   * Create a hosted subscription checkout
   *
   * For a HOSTED connection and a checkout-enabled mapping: a Stripe Checkout Session
   * (`mode: subscription`, the access id in `client_reference_id` and in the subscription's
   * metadata `nexus_workspace_access_id`) or a Paddle transaction (the access id in
   * `custom_data.nexus_workspace_access_id`). The caller redirects its user to `url`.
   * The `Idempotency-Key` is passed on to the provider.
   *
   * `POST /admin/v1/workspace-accesses/{accessId}/billing-checkouts` (`createCheckout` in the function API)
   */
  createCheckout(accessId: string, body: Params<NonNullable<types.CreateCheckoutData['body']>>, options?: RequestOptions): NexusPromise<types.CreateCheckoutResponses[keyof types.CreateCheckoutResponses]> {
    return this._core._call<types.CreateCheckoutResponses[keyof types.CreateCheckoutResponses]>(sdk.createCheckout, { path: { accessId }, body }, options);
  }

  /**
   * List webhook inbox events
   *
   * The connection's verified webhook events, newest first. Bodies are not returned.
   *
   * `GET /admin/v1/billing-connections/{connectionId}/webhook-events` (`listBillingWebhookEvents` in the function API)
   */
  listWebhookEvents(connectionId: string, query?: Params<types.ListBillingWebhookEventsData['query']>, options?: RequestOptions): PagePromise<types.ListBillingWebhookEventsResponses[200][number]> {
    return this._core._list<types.ListBillingWebhookEventsResponses[200][number]>(sdk.listBillingWebhookEvents, { path: { connectionId }, query }, options);
  }

  /**
   * Replay a failed webhook event
   *
   * Reprocesses a FAILED inbox event from its stored body (the signature was checked on
   * receipt; no new check and no freshness window). `operationId` is the event's id: its
   * status and `attempts` show the outcome. An event that is not FAILED: 409 `event_not_replayable`.
   *
   * `POST /admin/v1/webhook-events/{eventId}/replay` (`replayBillingWebhookEvent` in the function API)
   */
  replayWebhookEvent(eventId: string, options?: RequestOptions): NexusPromise<types.ReplayBillingWebhookEventResponses[keyof types.ReplayBillingWebhookEventResponses]> {
    return this._core._call<types.ReplayBillingWebhookEventResponses[keyof types.ReplayBillingWebhookEventResponses]>(sdk.replayBillingWebhookEvent, { path: { eventId } }, options);
  }

  /**
   * List external subscription projections
   *
   * What Nexus knows of the access's subscriptions at Stripe or Paddle (and app-reported periods), newest first.
   *
   * `GET /admin/v1/workspace-accesses/{accessId}/external-subscriptions` (`listExternalSubscriptions` in the function API)
   */
  listExternalSubscriptions(accessId: string, query?: Params<types.ListExternalSubscriptionsData['query']>, options?: RequestOptions): PagePromise<types.ListExternalSubscriptionsResponses[200][number]> {
    return this._core._list<types.ListExternalSubscriptionsResponses[200][number]>(sdk.listExternalSubscriptions, { path: { accessId }, query }, options);
  }

  /**
   * Reconcile subscriptions with the provider
   *
   * Lists the provider's subscriptions, repairs projections (and the accesses they drive) that
   * drifted, for instance after missed webhooks, and records a reconciliation run with what it
   * changed. `operationId` is the run's id. A second run right after changes nothing.
   * Needs a HOSTED, ACTIVE connection with a credential (409 otherwise).
   *
   * `POST /admin/v1/billing-connections/{connectionId}/reconcile` (`reconcileBillingConnection` in the function API)
   */
  reconcileConnection(connectionId: string, options?: RequestOptions): NexusPromise<types.ReconcileBillingConnectionResponses[keyof types.ReconcileBillingConnectionResponses]> {
    return this._core._call<types.ReconcileBillingConnectionResponses[keyof types.ReconcileBillingConnectionResponses]>(sdk.reconcileBillingConnection, { path: { connectionId } }, options);
  }

  /**
   * Report a billing period (APP_SYNC)
   *
   * The customer's backend reports a billing period of its own billing system through an
   * APP_SYNC connection. The period's quota is granted once; the access follows `status` like
   * a provider subscription's. Repeating a report is a no-op (`applied: false`); a report whose
   * `sourceUpdatedAt` is older than the one already applied never overwrites it.
   *
   * `POST /admin/v1/workspace-accesses/{accessId}/billing-periods/sync` (`syncWorkspaceAccessBillingPeriod` in the function API)
   */
  syncWorkspaceAccessBillingPeriod(accessId: string, body: Params<NonNullable<types.SyncWorkspaceAccessBillingPeriodData['body']>>, options?: RequestOptions): NexusPromise<types.SyncWorkspaceAccessBillingPeriodResponses[keyof types.SyncWorkspaceAccessBillingPeriodResponses]> {
    return this._core._call<types.SyncWorkspaceAccessBillingPeriodResponses[keyof types.SyncWorkspaceAccessBillingPeriodResponses]>(sdk.syncWorkspaceAccessBillingPeriod, { path: { accessId }, body }, options);
  }

  /**
   * Receive a provider webhook
   *
   * The public endpoint behind each connection's `webhookUrl`; no Management Key. The signature is
   * checked on the raw body: Stripe `Stripe-Signature` (`t=`, any `v1=`, HMAC-SHA256 of `t.body`,
   * 300 s tolerance), Paddle `Paddle-Signature` (`ts=`, any `h1=`, HMAC-SHA256 of `ts:body`).
   * A missing or invalid signature is 400 and nothing is stored or processed. A verified event is
   * stored in the inbox first, deduplicated by the provider's event id, answered 200 and then
   * processed; a duplicate is answered 200 and changes nothing. Event types Nexus does not use
   * and events for unknown customers are acknowledged with 200 and recorded as IGNORED.
   *
   * `POST /webhooks/billing/{connectionId}` (`receiveBillingWebhook` in the function API)
   */
  receiveWebhook(connectionId: string, body: Params<NonNullable<types.ReceiveBillingWebhookData['body']>>, options?: RequestOptions): NexusPromise<types.ReceiveBillingWebhookResponses[keyof types.ReceiveBillingWebhookResponses]> {
    return this._core._call<types.ReceiveBillingWebhookResponses[keyof types.ReceiveBillingWebhookResponses]>(sdk.receiveBillingWebhook, { path: { connectionId }, body }, options);
  }
}

/**
 * Webhooks: verify, listEndpoints, createEndpoint, getEndpoint, deleteEndpoint, updateEndpoint, disableEndpoint, rotateEndpointSecret, sendTestWebhookEvent, listMessages, getMessage, replayMessage, replayFailedWebhookMessages.
 *
 * Signed outbound events (Standard Webhooks) to the application's endpoints, their deliveries and replays.
 */
export class WebhooksResource extends WebhookVerifier {
  /**
   * List webhook endpoints
   *
   * The workspace's endpoints (not the deleted ones), newest first.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/webhook-endpoints` (`listWebhookEndpoints` in the function API)
   */
  listEndpoints(workspaceId: string, query?: Params<types.ListWebhookEndpointsData['query']>, options?: RequestOptions): PagePromise<types.ListWebhookEndpointsResponses[200][number]> {
    return this._core._list<types.ListWebhookEndpointsResponses[200][number]>(sdk.listWebhookEndpoints, { path: { workspaceId }, query }, options);
  }

  /**
   * Create a webhook endpoint
   *
   * Registers a receiver of the workspace's events. The answer carries the signing secret
   * (`whsec_...`), shown this once; reads never return it. `url` passes the same guard as a
   * provider connection's `baseUrl`: https (plain http only where the deployment sets
   * `NEXUS_ALLOW_PRIVATE_UPSTREAMS=true`), without credentials, query or fragment, and not
   * resolving to a loopback, private, link-local or metadata address unless that is allowed
   * (400 `invalid_webhook_url` / `private_upstream_refused`, param `url`). `eventTypes` filters
   * the types sent (unset or null: all of them); an unknown type is 400 `unknown_event_type`.
   *
   * `POST /admin/v1/workspaces/{workspaceId}/webhook-endpoints` (`createWebhookEndpoint` in the function API)
   */
  createEndpoint(workspaceId: string, body: Params<NonNullable<types.CreateWebhookEndpointData['body']>>, options?: RequestOptions): NexusPromise<types.CreateWebhookEndpointResponses[keyof types.CreateWebhookEndpointResponses]> {
    return this._core._call<types.CreateWebhookEndpointResponses[keyof types.CreateWebhookEndpointResponses]>(sdk.createWebhookEndpoint, { path: { workspaceId }, body }, options);
  }

  /**
   * Get a webhook endpoint
   *
   * The secret is never returned.
   *
   * `GET /admin/v1/webhook-endpoints/{webhookEndpointId}` (`getWebhookEndpoint` in the function API)
   */
  getEndpoint(webhookEndpointId: string, options?: RequestOptions): NexusPromise<types.GetWebhookEndpointResponses[keyof types.GetWebhookEndpointResponses]> {
    return this._core._call<types.GetWebhookEndpointResponses[keyof types.GetWebhookEndpointResponses]>(sdk.getWebhookEndpoint, { path: { webhookEndpointId } }, options);
  }

  /**
   * Delete a webhook endpoint
   *
   * Nothing more is queued or sent to it; its queued messages fail. It disappears from the lists.
   *
   * `DELETE /admin/v1/webhook-endpoints/{webhookEndpointId}` (`deleteWebhookEndpoint` in the function API)
   */
  deleteEndpoint(webhookEndpointId: string, options?: RequestOptions): NexusPromise<types.DeleteWebhookEndpointResponses[keyof types.DeleteWebhookEndpointResponses]> {
    return this._core._call<types.DeleteWebhookEndpointResponses[keyof types.DeleteWebhookEndpointResponses]>(sdk.deleteWebhookEndpoint, { path: { webhookEndpointId } }, options);
  }

  /**
   * Update a webhook endpoint
   *
   * Changes the given fields only; `url` and `eventTypes` are checked as at creation. `status`
   * ACTIVE enables a disabled endpoint again (its failure window starts afresh; replay what it
   * missed with `replayFailedWebhookMessages`); DISABLED stops its deliveries.
   *
   * `PATCH /admin/v1/webhook-endpoints/{webhookEndpointId}` (`updateWebhookEndpoint` in the function API)
   */
  updateEndpoint(webhookEndpointId: string, body: Params<NonNullable<types.UpdateWebhookEndpointData['body']>>, options?: RequestOptions): NexusPromise<types.UpdateWebhookEndpointResponses[keyof types.UpdateWebhookEndpointResponses]> {
    return this._core._call<types.UpdateWebhookEndpointResponses[keyof types.UpdateWebhookEndpointResponses]>(sdk.updateWebhookEndpoint, { path: { webhookEndpointId }, body }, options);
  }

  /**
   * Disable a webhook endpoint
   *
   * Its deliveries stop and its queued messages fail (replay them once it is ACTIVE again).
   *
   * `POST /admin/v1/webhook-endpoints/{webhookEndpointId}/disable` (`disableWebhookEndpoint` in the function API)
   */
  disableEndpoint(webhookEndpointId: string, options?: RequestOptions): NexusPromise<types.DisableWebhookEndpointResponses[keyof types.DisableWebhookEndpointResponses]> {
    return this._core._call<types.DisableWebhookEndpointResponses[keyof types.DisableWebhookEndpointResponses]>(sdk.disableWebhookEndpoint, { path: { webhookEndpointId } }, options);
  }

  /**
   * Rotate a webhook endpoint's secret
   *
   * A new secret, shown this once. The old one keeps signing beside it (a second `v1,`
   * signature in `webhook-signature`) for `NEXUS_EVENTS_SECRET_OVERLAP_HOURS` (24 h by default),
   * so receivers can switch without losing a message. A secret rotated out earlier keeps signing
   * until its own overlap ends: a second rotation within the overlap ends none early. At most 10
   * secrets sign at once: a rotation that would make more is refused with 409
   * `too_many_webhook_secrets` (until the oldest overlap ends).
   *
   * `POST /admin/v1/webhook-endpoints/{webhookEndpointId}/rotate-secret` (`rotateWebhookEndpointSecret` in the function API)
   */
  rotateEndpointSecret(webhookEndpointId: string, options?: RequestOptions): NexusPromise<types.RotateWebhookEndpointSecretResponses[keyof types.RotateWebhookEndpointSecretResponses]> {
    return this._core._call<types.RotateWebhookEndpointSecretResponses[keyof types.RotateWebhookEndpointSecretResponses]>(sdk.rotateWebhookEndpointSecret, { path: { webhookEndpointId } }, options);
  }

  /**
   * Send a test event
   *
   * Queues a `webhook.test` event for this endpoint alone (whatever its filter); the answer is its message.
   *
   * `POST /admin/v1/webhook-endpoints/{webhookEndpointId}/test` (`sendTestWebhookEvent` in the function API)
   */
  sendTestWebhookEvent(webhookEndpointId: string, options?: RequestOptions): NexusPromise<types.SendTestWebhookEventResponses[keyof types.SendTestWebhookEventResponses]> {
    return this._core._call<types.SendTestWebhookEventResponses[keyof types.SendTestWebhookEventResponses]>(sdk.sendTestWebhookEvent, { path: { webhookEndpointId } }, options);
  }

  /**
   * List an endpoint's messages and their attempts
   *
   * One message per event sent (or to be sent) to this endpoint, newest first, each with its
   * attempts (outcome, latency, the receiver's status and the first 1 KiB of its body).
   *
   * `GET /admin/v1/webhook-endpoints/{webhookEndpointId}/messages` (`listWebhookMessages` in the function API)
   */
  listMessages(webhookEndpointId: string, query?: Params<types.ListWebhookMessagesData['query']>, options?: RequestOptions): PagePromise<types.ListWebhookMessagesResponses[200][number]> {
    return this._core._list<types.ListWebhookMessagesResponses[200][number]>(sdk.listWebhookMessages, { path: { webhookEndpointId }, query }, options);
  }

  /**
   * Get a message and its attempts
   *
   * `GET /admin/v1/webhook-endpoints/{webhookEndpointId}/messages/{messageId}` (`getWebhookMessage` in the function API)
   */
  getMessage(webhookEndpointId: string, messageId: string, options?: RequestOptions): NexusPromise<types.GetWebhookMessageResponses[keyof types.GetWebhookMessageResponses]> {
    return this._core._call<types.GetWebhookMessageResponses[keyof types.GetWebhookMessageResponses]>(sdk.getWebhookMessage, { path: { webhookEndpointId, messageId } }, options);
  }

  /**
   * Replay a message
   *
   * Sends the message again, with the same `webhook-id`, whatever its status. The endpoint must be ACTIVE (409 `webhook_endpoint_disabled`).
   *
   * `POST /admin/v1/webhook-endpoints/{webhookEndpointId}/messages/{messageId}/replay` (`replayWebhookMessage` in the function API)
   */
  replayMessage(webhookEndpointId: string, messageId: string, options?: RequestOptions): NexusPromise<types.ReplayWebhookMessageResponses[keyof types.ReplayWebhookMessageResponses]> {
    return this._core._call<types.ReplayWebhookMessageResponses[keyof types.ReplayWebhookMessageResponses]>(sdk.replayWebhookMessage, { path: { webhookEndpointId, messageId } }, options);
  }

  /**
   * Replay every failed message since a time
   *
   * Queues again every FAILED message of the endpoint created at or after `since`, each with its own `webhook-id`.
   *
   * `POST /admin/v1/webhook-endpoints/{webhookEndpointId}/replay-failed` (`replayFailedWebhookMessages` in the function API)
   */
  replayFailedWebhookMessages(webhookEndpointId: string, body: Params<NonNullable<types.ReplayFailedWebhookMessagesData['body']>>, options?: RequestOptions): NexusPromise<types.ReplayFailedWebhookMessagesResponses[keyof types.ReplayFailedWebhookMessagesResponses]> {
    return this._core._call<types.ReplayFailedWebhookMessagesResponses[keyof types.ReplayFailedWebhookMessagesResponses]>(sdk.replayFailedWebhookMessages, { path: { webhookEndpointId }, body }, options);
  }
}

/**
 * Gateway: proxyProviderGet, proxyProviderPut, proxyProviderPost, proxyProviderDelete, proxyProviderPatch, getMe.
 *
 * The metered proxy to upstream providers, called with an Inference Key.
 */
export class GatewayResource extends NexusResource {
  /**
   * Proxy a GET to the provider
   *
   * Forwards the request to the connection's `baseUrl` + `/` + `providerPath` (+ the query
   * string, less a `key` parameter: a caller's key never leaves Nexus). The model list
   * (`GET v1/models`) and a model's description (`GET v1/models/{model}`), on the `openai` and
   * `anthropic` profiles (`azure-openai` and `gemini`: ProtocolProfile; `bedrock` has none), are governed but free: the key and the access are checked like a metered
   * call's, no quota is taken, and no workspace setting is needed. When the access's quota strategy
   * has `allowedModels`, the list's `data[]` holds only the allowed models and a model outside it
   * is refused with 403 `model_not_allowed`. `GET v1/me` is answered by Nexus itself, as `getMe`,
   * for a key of the connection's workspace. Another endpoint without a usage inspector is refused
   * with 409 `unmetered_endpoint` (naming its PassthroughClass) unless the workspace or the access's
   * plan lets its class through (`passthroughClasses`). The model
   * lists of `azure-openai` are `openai/models` and `openai/v1/models`.
   *
   * `GET /providers/{providerConnectionId}/{providerPath}` (`proxyProviderGet` in the function API)
   */
  proxyProviderGet(providerConnectionId: string, providerPath: string, options?: RequestOptions): NexusPromise<types.ProxyProviderGetResponses[keyof types.ProxyProviderGetResponses]> {
    return this._core._call<types.ProxyProviderGetResponses[keyof types.ProxyProviderGetResponses]>(sdk.proxyProviderGet, { path: { providerConnectionId, providerPath } }, options);
  }

  /**
   * Proxy a PUT to the provider
   *
   * Forwarded like a POST; without a usage inspector it needs its PassthroughClass let through (else 409).
   *
   * `PUT /providers/{providerConnectionId}/{providerPath}` (`proxyProviderPut` in the function API)
   */
  proxyProviderPut(providerConnectionId: string, providerPath: string, body?: Params<types.ProxyProviderPutData['body']>, options?: RequestOptions): NexusPromise<types.ProxyProviderPutResponses[keyof types.ProxyProviderPutResponses]> {
    return this._core._call<types.ProxyProviderPutResponses[keyof types.ProxyProviderPutResponses]>(sdk.proxyProviderPut, { path: { providerConnectionId, providerPath }, body }, options);
  }

  /**
   * Proxy a POST to the provider
   *
   * The metered path: `openai` connections meter `chat/completions`, `completions`,
   * `embeddings` and `responses`; `anthropic` connections meter `messages`; `azure-openai`
   * connections meter Azure's deployment and v1 paths; `gemini` connections meter
   * `generateContent`, `streamGenerateContent` (SSE only), `embedContent` and
   * `batchEmbedContents`; `bedrock` connections meter Converse and ConverseStream
   * (`model/{modelId}/converse[-stream]`, the stream AWS's binary event-stream) and refuse
   * InvokeModel with 409 `unmetered_endpoint` (ProtocolProfile). A path of another
   * profile's API is refused with 409 `protocol_mismatch`. Before the
   * upstream is called an upper bound of the call's units is reserved (input bounded by an
   * estimate of the tokens of the text the request carries, never more than the request body's
   * size in bytes, output by `max_tokens` / `max_completion_tokens` /
   * `max_output_tokens`, or the strategy's `maxOutputTokens` when the request names none). A
   * request asking for more than `maxOutputTokens` is, by the strategy's `outputCapPolicy`, sent
   * with its cap lowered to `maxOutputTokens` (`clamp`, the default: the answer says so in
   * `x-nexus-output-cap`) or refused with 400 `max_tokens_exceeded` (`refuse`). The units are
   * priced by the strategy's model rule for the model the request names (the model the provider
   * reports answering never changes it), and a model outside the strategy's `allowedModels` is
   * refused with 403 `model_not_allowed` before the provider is called. After the answer the call
   * is settled to the exact units reported by the provider. The body is forwarded unchanged,
   * except that an OpenAI-style stream that did not ask for usage gets
   * `stream_options.include_usage` (the extra usage chunk is removed from what the client
   * receives), and a cap is written in or lowered as above. Anthropic's `v1/messages/count_tokens`,
   * Gemini's `:countTokens` and Bedrock's `model/{modelId}/count-tokens` are governed but free,
   * like the model list.
   *
   * `POST /providers/{providerConnectionId}/{providerPath}` (`proxyProviderPost` in the function API)
   */
  proxyProviderPost(providerConnectionId: string, providerPath: string, body?: Params<types.ProxyProviderPostData['body']>, options?: RequestOptions): NexusPromise<types.ProxyProviderPostResponses[keyof types.ProxyProviderPostResponses]> {
    return this._core._call<types.ProxyProviderPostResponses[keyof types.ProxyProviderPostResponses]>(sdk.proxyProviderPost, { path: { providerConnectionId, providerPath }, body }, options);
  }

  /**
   * Proxy a DELETE to the provider
   *
   * Forwarded as is; without a usage inspector it needs its PassthroughClass let through (else 409).
   *
   * `DELETE /providers/{providerConnectionId}/{providerPath}` (`proxyProviderDelete` in the function API)
   */
  proxyProviderDelete(providerConnectionId: string, providerPath: string, options?: RequestOptions): NexusPromise<types.ProxyProviderDeleteResponses[keyof types.ProxyProviderDeleteResponses]> {
    return this._core._call<types.ProxyProviderDeleteResponses[keyof types.ProxyProviderDeleteResponses]>(sdk.proxyProviderDelete, { path: { providerConnectionId, providerPath } }, options);
  }

  /**
   * Proxy a PATCH to the provider
   *
   * Forwarded like a POST; without a usage inspector it needs its PassthroughClass let through (else 409).
   *
   * `PATCH /providers/{providerConnectionId}/{providerPath}` (`proxyProviderPatch` in the function API)
   */
  proxyProviderPatch(providerConnectionId: string, providerPath: string, body?: Params<types.ProxyProviderPatchData['body']>, options?: RequestOptions): NexusPromise<types.ProxyProviderPatchResponses[keyof types.ProxyProviderPatchResponses]> {
    return this._core._call<types.ProxyProviderPatchResponses[keyof types.ProxyProviderPatchResponses]>(sdk.proxyProviderPatch, { path: { providerConnectionId, providerPath }, body }, options);
  }

  /**
   * The calling inference key's access, plan, quota and rate limits
   *
   * Self-service for end users, authenticated by their inference key (`Authorization: Bearer`
   * or `x-api-key`): the access's status and plan, the current quota period, where each rate
   * limit of the plan stands now, the models the plan allows, and the key's expiry. A
   * suspended or expired access still answers (its `status` says so); an invalid, expired or
   * revoked key gets 401, and a key of an archived workspace 403.
   *
   * Also served under each provider connection's `gatewayBaseUrl`
   * (`GET /providers/{providerConnectionId}/v1/me`), where the end user's SDK is pointed
   * (`client.get('/me')` on an OpenAI client whose base URL is `gatewayBaseUrl + '/v1'`): the same
   * answer, for a key of the connection's workspace (another's connection is 404
   * `provider_connection_not_found`, as for a call).
   *
   * `GET /v1/me` (`getMe` in the function API)
   */
  getMe(options?: RequestOptions): NexusPromise<types.GetMeResponses[keyof types.GetMeResponses]> {
    return this._core._call<types.GetMeResponses[keyof types.GetMeResponses]>(sdk.getMe, {  }, options);
  }
}

/**
 * Management keys: list, create, revoke, update.
 *
 * The keys that call the Admin API, managed by a root key.
 */
export class ManagementKeysResource extends NexusResource {
  /**
   * List Management Keys
   *
   * Root Management Key only; a scoped key gets 403 `root_key_required`. Every stored key, newest first, revoked
   * ones too (with `revokedAt`), never a plaintext. The root key given in `NEXUS_MANAGEMENT_KEY` is not stored
   * and is not listed; the audit names it `root`.
   *
   * `GET /admin/v1/management-keys` (`listManagementKeys` in the function API)
   */
  list(query?: Params<types.ListManagementKeysData['query']>, options?: RequestOptions): PagePromise<types.ListManagementKeysResponses[200][number]> {
    return this._core._list<types.ListManagementKeysResponses[200][number]>(sdk.listManagementKeys, { query }, options);
  }

  /**
   * Create a Management Key
   *
   * Root Management Key only; a scoped key gets 403 `root_key_required`. A scoped key (`workspaceIds`, at least
   * one) sees only those workspaces, and stays scoped to them; a root key (`root: true`, no `workspaceIds`) sees
   * every workspace. A key may carry a `role` (docs/people.md): `owner` makes a root key, a workspace role
   * (`viewer`, `billing`, ...) applies the role table in each of its workspaces, as for a person. The plaintext
   * is in `key`, in this answer only: Nexus keeps its hash. A workspace that does not exist is 404
   * `workspace_not_found`; an archived one, 409 `workspace_archived`.
   *
   * `POST /admin/v1/management-keys` (`createManagementKey` in the function API)
   */
  create(body: Params<NonNullable<types.CreateManagementKeyData['body']>>, options?: RequestOptions): NexusPromise<types.CreateManagementKeyResponses[keyof types.CreateManagementKeyResponses]> {
    return this._core._call<types.CreateManagementKeyResponses[keyof types.CreateManagementKeyResponses]>(sdk.createManagementKey, { body }, options);
  }

  /**
   * Revoke a Management Key
   *
   * Root Management Key only. Requests with the key are refused (401 `invalid_management_key`) from the next
   * one on, on every process (keys are looked up on each request). Revoking a revoked key changes nothing.
   * The last active stored root key is kept while no `NEXUS_MANAGEMENT_KEY` is set (409 `last_root_key`):
   * without it, no key could manage the others.
   *
   * `DELETE /admin/v1/management-keys/{managementKeyId}` (`revokeManagementKey` in the function API)
   */
  revoke(managementKeyId: string, options?: RequestOptions): NexusPromise<types.RevokeManagementKeyResponses[keyof types.RevokeManagementKeyResponses]> {
    return this._core._call<types.RevokeManagementKeyResponses[keyof types.RevokeManagementKeyResponses]>(sdk.revokeManagementKey, { path: { managementKeyId } }, options);
  }

  /**
   * Rename a Management Key
   *
   * Root Management Key only. The name is what the audit shows beside the key's id, for every entry the key
   * made, before the rename too. A revoked key can still be renamed. Unknown: 404 `management_key_not_found`.
   *
   * `PATCH /admin/v1/management-keys/{managementKeyId}` (`updateManagementKey` in the function API)
   */
  update(managementKeyId: string, body: Params<NonNullable<types.UpdateManagementKeyData['body']>>, options?: RequestOptions): NexusPromise<types.UpdateManagementKeyResponses[keyof types.UpdateManagementKeyResponses]> {
    return this._core._call<types.UpdateManagementKeyResponses[keyof types.UpdateManagementKeyResponses]>(sdk.updateManagementKey, { path: { managementKeyId }, body }, options);
  }
}

/**
 * People: listMembers, addMember, listInvitations, createInvitation, revokeInvitation, removeMember, getCaller, listOwners, addOwner, removeOwner, listSessions, revokeSession.
 *
 * The members of each workspace and their roles, invitations, and the sessions of the persons signed in to the console (docs/people.md).
 */
export class PeopleResource extends NexusResource {
  /**
   * List a workspace's members
   *
   * The people who are members of the workspace, each with their role, newest first.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/members` (`listMembers` in the function API)
   */
  listMembers(workspaceId: string, query?: Params<types.ListMembersData['query']>, options?: RequestOptions): PagePromise<types.ListMembersResponses[200][number]> {
    return this._core._list<types.ListMembersResponses[200][number]>(sdk.listMembers, { path: { workspaceId }, query }, options);
  }

  /**
   * Add a member to a workspace
   *
   * Makes the person with this email a member of the workspace with one role, before or after they first
   * sign in: they sign in with single sign-on when their provider vouches for the email (verified). One
   * membership per email and workspace: another is 409 `conflict`. An archived workspace is 409
   * `workspace_archived`. Audited (`member.added`).
   *
   * `POST /admin/v1/workspaces/{workspaceId}/members` (`addMember` in the function API)
   */
  addMember(workspaceId: string, body: Params<NonNullable<types.AddMemberData['body']>>, options?: RequestOptions): NexusPromise<types.AddMemberResponses[keyof types.AddMemberResponses]> {
    return this._core._call<types.AddMemberResponses[keyof types.AddMemberResponses]>(sdk.addMember, { path: { workspaceId }, body }, options);
  }

  /**
   * List a workspace's invitations
   *
   * The invitations neither accepted nor revoked, expired ones included, newest first. Their links are never shown again.
   *
   * `GET /admin/v1/workspaces/{workspaceId}/invitations` (`listInvitations` in the function API)
   */
  listInvitations(workspaceId: string, query?: Params<types.ListInvitationsData['query']>, options?: RequestOptions): PagePromise<types.ListInvitationsResponses[200][number]> {
    return this._core._list<types.ListInvitationsResponses[200][number]>(sdk.listInvitations, { path: { workspaceId }, query }, options);
  }

  /**
   * Invite a person to a workspace
   *
   * An invitation of this email with a role, whose link (`url`, shown only in this answer) is sent to the person.
   * Opened, then followed by a sign-in with single sign-on as that email (verified), it makes them a member,
   * once, until `expiresAt` (`NEXUS_INVITATION_DAYS`, 7). An archived workspace is 409 `workspace_archived`.
   * Audited (`invitation.created`).
   *
   * `POST /admin/v1/workspaces/{workspaceId}/invitations` (`createInvitation` in the function API)
   */
  createInvitation(workspaceId: string, body: Params<NonNullable<types.CreateInvitationData['body']>>, options?: RequestOptions): NexusPromise<types.CreateInvitationResponses[keyof types.CreateInvitationResponses]> {
    return this._core._call<types.CreateInvitationResponses[keyof types.CreateInvitationResponses]>(sdk.createInvitation, { path: { workspaceId }, body }, options);
  }

  /**
   * Revoke an invitation
   *
   * Its link no longer makes anyone a member. One accepted or revoked already is 404 `invitation_not_found`. Audited.
   *
   * `DELETE /admin/v1/invitations/{invitationId}` (`revokeInvitation` in the function API)
   */
  revokeInvitation(invitationId: string, options?: RequestOptions): NexusPromise<types.RevokeInvitationResponses[keyof types.RevokeInvitationResponses]> {
    return this._core._call<types.RevokeInvitationResponses[keyof types.RevokeInvitationResponses]>(sdk.revokeInvitation, { path: { invitationId } }, options);
  }

  /**
   * Remove a member
   *
   * Ends the membership: the person's next request in that workspace, on any process, is refused.
   * Audited (`member.removed`).
   *
   * `DELETE /admin/v1/members/{memberId}` (`removeMember` in the function API)
   */
  removeMember(memberId: string, options?: RequestOptions): NexusPromise<types.RemoveMemberResponses[keyof types.RemoveMemberResponses]> {
    return this._core._call<types.RemoveMemberResponses[keyof types.RemoveMemberResponses]>(sdk.removeMember, { path: { memberId } }, options);
  }

  /**
   * Who is calling, and what they may call
   *
   * The credential of this request (a Management Key, or a person's session) and the operations its role
   * allows, by the role table (each operation's `x-roles`): an owner (the root key, an owner's session or key)
   * may call every operation; anyone else, in each of their workspaces, the `operations` listed there. The
   * console shows only what these allow; the server refuses the rest whatever is shown.
   *
   * `GET /admin/v1/caller` (`getCaller` in the function API)
   */
  getCaller(options?: RequestOptions): NexusPromise<types.GetCallerResponses[keyof types.GetCallerResponses]> {
    return this._core._call<types.GetCallerResponses[keyof types.GetCallerResponses]>(sdk.getCaller, {  }, options);
  }

  /**
   * List the installation's owners
   *
   * The people who own the installation (every workspace, every operation): those of `NEXUS_OWNER_EMAILS`
   * (`configured`, no `id`: removed only from the configuration), then those made through the API or at
   * sign-in, oldest first. Owners only.
   *
   * `GET /admin/v1/owners` (`listOwners` in the function API)
   */
  listOwners(options?: RequestOptions): NexusPromise<types.ListOwnersResponses[keyof types.ListOwnersResponses]> {
    return this._core._call<types.ListOwnersResponses[keyof types.ListOwnersResponses]>(sdk.listOwners, {  }, options);
  }

  /**
   * Make a person an owner
   *
   * Makes the person with this email an owner of the installation: they sign in with single sign-on when their
   * provider vouches for the email (verified), and may do everything. An owner already is 409 `conflict`.
   * Owners only. Audited (`owner.added`, in no workspace's log).
   *
   * `POST /admin/v1/owners` (`addOwner` in the function API)
   */
  addOwner(body: Params<NonNullable<types.AddOwnerData['body']>>, options?: RequestOptions): NexusPromise<types.AddOwnerResponses[keyof types.AddOwnerResponses]> {
    return this._core._call<types.AddOwnerResponses[keyof types.AddOwnerResponses]>(sdk.addOwner, { body }, options);
  }

  /**
   * Remove an owner
   *
   * The person is no longer an owner: their next request, on any process, has only the roles of their
   * workspaces. The last owner stays (409 `last_owner`: make another first); one of `NEXUS_OWNER_EMAILS`
   * has no id here (remove it from the configuration). Owners only. Audited (`owner.removed`).
   *
   * `DELETE /admin/v1/owners/{memberId}` (`removeOwner` in the function API)
   */
  removeOwner(memberId: string, options?: RequestOptions): NexusPromise<types.RemoveOwnerResponses[keyof types.RemoveOwnerResponses]> {
    return this._core._call<types.RemoveOwnerResponses[keyof types.RemoveOwnerResponses]>(sdk.removeOwner, { path: { memberId } }, options);
  }

  /**
   * List sessions
   *
   * The sessions that have not ended (not signed out, not revoked, neither idle nor past their absolute end),
   * newest first, each with its person. Owners only: another caller is refused 403 `root_key_required`.
   * A session's token is never shown: only its id.
   *
   * `GET /admin/v1/sessions` (`listSessions` in the function API)
   */
  listSessions(query?: Params<types.ListSessionsData['query']>, options?: RequestOptions): PagePromise<types.ListSessionsResponses[200][number]> {
    return this._core._list<types.ListSessionsResponses[200][number]>(sdk.listSessions, { query }, options);
  }

  /**
   * Revoke a session
   *
   * Ends the session now: its next request, on any process, is refused 401 `invalid_session`. Audited
   * (`session.revoked`). A session that has ended already, or none with that id, is 404 `session_not_found`.
   * Owners only.
   *
   * `DELETE /admin/v1/sessions/{sessionId}` (`revokeSession` in the function API)
   */
  revokeSession(sessionId: string, options?: RequestOptions): NexusPromise<types.RevokeSessionResponses[keyof types.RevokeSessionResponses]> {
    return this._core._call<types.RevokeSessionResponses[keyof types.RevokeSessionResponses]>(sdk.revokeSession, { path: { sessionId } }, options);
  }
}

/**
 * System: getHealth, getReadiness.
 *
 * Health and readiness.
 */
export class SystemResource extends NexusResource {
  /**
   * Liveness
   *
   * 200 while the process serves requests. 503 `event_loop_blocked` while its event loop has lately been held up for longer than `NEXUS_EVENT_LOOP_BLOCKED_MS` (5 s by default), and for twice that after the stall: nothing was answered meanwhile. A loop blocked right now answers nothing at all; the probe's timeout is the answer then.
   *
   * `GET /healthz` (`getHealth` in the function API)
   */
  getHealth(options?: RequestOptions): NexusPromise<types.GetHealthResponses[keyof types.GetHealthResponses]> {
    return this._core._call<types.GetHealthResponses[keyof types.GetHealthResponses]>(sdk.getHealth, {  }, options);
  }

  /**
   * Readiness
   *
   * 200 when the database answers and migrations are applied; 503 otherwise.
   *
   * `GET /readyz` (`getReadiness` in the function API)
   */
  getReadiness(options?: RequestOptions): NexusPromise<types.GetReadinessResponses[keyof types.GetReadinessResponses]> {
    return this._core._call<types.GetReadinessResponses[keyof types.GetReadinessResponses]>(sdk.getReadiness, {  }, options);
  }
}

/**
 * The Nexus client, a resource per area of the API:
 *
 *   const nexus = new Nexus({ baseUrl: 'https://nexus.example.com', apiKey: process.env.NEXUS_MANAGEMENT_KEY });
 *   const workspace = await nexus.workspaces.create({ name: 'Acme production' });
 *
 * Every call returns the answer's data (`.withResponse()` adds the Response), throws a NexusError, retries
 * what is safe to retry and times out (NexusOptions, RequestOptions).
 */
export class Nexus extends NexusCore {
  /**
   * Workspaces
   *
   * Tenants. Everything else belongs to one.
   */
  readonly workspaces: WorkspacesResource = new WorkspacesResource(this);
  /**
   * Provider connections
   *
   * Upstream model providers with encrypted keys.
   */
  readonly providerConnections: ProviderConnectionsResource = new ProviderConnectionsResource(this);
  /**
   * Routes
   *
   * One gateway URL over several connections, with fallbacks, retries, load balancing and circuit breaking.
   */
  readonly routes: RoutesResource = new RoutesResource(this);
  /**
   * Plans
   *
   * Plans, versioned quota strategies and their bindings.
   */
  readonly plans: PlansResource = new PlansResource(this);
  /**
   * Workspace accesses
   *
   * End users, their accesses, inference keys and quota.
   */
  readonly workspaceAccesses: WorkspaceAccessesResource = new WorkspaceAccessesResource(this);
  /**
   * Usage
   *
   * Invocations, usage events and the audit trail.
   */
  readonly usage: UsageResource = new UsageResource(this);
  /**
   * Money
   *
   * The price book, the cost of calls, spend exports and workspace budgets.
   */
  readonly money: MoneyResource = new MoneyResource(this);
  /**
   * Billing
   *
   * Stripe and Paddle connections, product mappings, checkouts, the webhook inbox and projections.
   */
  readonly billing: BillingResource = new BillingResource(this);
  /**
   * Webhooks
   *
   * Signed outbound events (Standard Webhooks) to the application's endpoints, their deliveries and replays.
   */
  readonly webhooks: WebhooksResource = new WebhooksResource(this);
  /**
   * Gateway
   *
   * The metered proxy to upstream providers, called with an Inference Key.
   */
  readonly gateway: GatewayResource = new GatewayResource(this);
  /**
   * Management keys
   *
   * The keys that call the Admin API, managed by a root key.
   */
  readonly managementKeys: ManagementKeysResource = new ManagementKeysResource(this);
  /**
   * People
   *
   * The members of each workspace and their roles, invitations, and the sessions of the persons signed in to the console (docs/people.md).
   */
  readonly people: PeopleResource = new PeopleResource(this);
  /**
   * System
   *
   * Health and readiness.
   */
  readonly system: SystemResource = new SystemResource(this);
}

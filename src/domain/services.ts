/**
 * Builds every service from its dependencies. The one place where areas meet;
 * each area adds its repositories and service here.
 *
 * `services` holds what the handlers, the API glue, the app's timers and the gateway
 * call, nothing else: not the dependencies they were built from, no repository. What
 * only tests reach (the billing pass's steps, a repository to seed rows the API cannot
 * make) is returned apart, as `testHooks`: buildApp never hands it out; the test
 * harness builds the domain itself and keeps it (test/support/test-app.ts).
 */
import { rebuildWorkspaceDays } from './recording/rollup-sql.js';
import type { Config } from '../config.js';
import { isEmbedded, type Db } from '../db/database.js';
import { createReadiness } from '../db/readiness.js';
import type { Logger } from '../observability/logger.js';
import type { Clock } from './actor.js';
import { createAccessRepo } from './accesses/access-repo.js';
import { createAccessService } from './accesses/access-service.js';
import { createBilling } from './billing/billing-service.js';
import { changeChannel, createChangeFeed } from './changes/change-feed.js';
import { createChangeRepo } from './changes/change-repo.js';
import { createAuditRepo } from './audit/audit-repo.js';
import { createAuditService } from './audit/audit-service.js';
import { createAuditQueryService } from './audit/audit-query-service.js';
import { createProviderConnectionRepo } from './provider-connections/provider-connection-repo.js';
import { createProviderConnectionService } from './provider-connections/provider-connection-service.js';
import { createRouteRepo } from './routes/route-repo.js';
import { createRouteService } from './routes/route-service.js';
import { createInvocationRepo } from './invocations/invocation-repo.js';
import { createInvocationService } from './invocations/invocation-service.js';
import { createRequestLogRepo } from './request-logs/request-log-repo.js';
import { createRequestLogService } from './request-logs/request-log-service.js';
import { createExportSlots } from './invocations/export-slots.js';
import { createIdempotencyRepo } from './idempotency/idempotency-repo.js';
import { createIdempotencyService } from './idempotency/idempotency-service.js';
import { createInferenceKeyRepo } from './inference-keys/inference-key-repo.js';
import { createInferenceKeyService } from './inference-keys/inference-key-service.js';
import { createManagementKeyRepo } from './management-keys/management-key-repo.js';
import { createManagementKeyService } from './management-keys/management-key-service.js';
import { createPlanRepo } from './plans/plan-repo.js';
import { createPlanService } from './plans/plan-service.js';
import { createQuotaRepo } from './quota/quota-repo.js';
import { createQuotaService } from './quota/quota-service.js';
import { createRateRepo } from './rate-limits/rate-repo.js';
import { createRateService } from './rate-limits/rate-service.js';
import { createKeyHasher, IDEMPOTENCY_HASH_LABEL } from './security/key-hash.js';
import { createSecretBox } from './security/secret-box.js';
import { createWorkspaceRepo } from './workspaces/workspace-repo.js';
import { createBudgetRepo } from './budgets/budget-repo.js';
import { createBudgetService } from './budgets/budget-service.js';
import { createPriceRepo } from './prices/price-repo.js';
import { createPriceService } from './prices/price-service.js';
import { createWorkspaceService } from './workspaces/workspace-service.js';
import { createEvents } from './events/outbox.js';
import { createWebhookDelivery } from './events/webhook-delivery.js';
import { createWebhookRepo } from './events/webhook-repo.js';
import { createWebhookService } from './events/webhook-service.js';
import { createPeople } from './people/people.js';
import { createHistoryService } from './history/history-service.js';
import { archiveMonth } from './history/archive.js';
import { dirStore, s3Store } from './history/archive-store.js';

export interface ServiceDeps {
  db: Db;
  config: Config;
  clock: Clock;
  logger: Logger;
  /** The outside world, replaceable in tests. */
  fetch: typeof fetch;
}

/** What the keys' services share with the rest of the domain. */
interface KeyDeps {
  hasher: ReturnType<typeof createKeyHasher>;
  audit: ReturnType<typeof createAuditService>;
  changes: ReturnType<typeof createChangeFeed>;
  events: ReturnType<typeof createEvents>;
  workspaceRepo: ReturnType<typeof createWorkspaceRepo>;
}

/** The keys: the Admin API's management keys, and the inference keys callers bring to the gateway. */
function createKeys(deps: ServiceDeps, { hasher, audit, changes, events, workspaceRepo }: KeyDeps) {
  const { db, config, clock } = deps;
  const managementKeyRepo = createManagementKeyRepo(db);
  const managementKeys = createManagementKeyService({
    db,
    managementKeyRepo,
    workspaceRepo,
    audit,
    hasher,
    clock,
    rootKey: config.managementKey,
  });
  const inferenceKeyRepo = createInferenceKeyRepo(db);
  const inferenceKeys = createInferenceKeyService({
    db,
    inferenceKeyRepo,
    hasher,
    audit,
    clock,
    keyEnvironment: config.keyEnvironment,
    ttlDays: config.inferenceKeyTtlDays,
    changes,
    events,
    expiringDays: config.eventsKeyExpiringDays,
  });
  return { managementKeys, inferenceKeys };
}

export function createDomain(deps: ServiceDeps) {
  const { db, config, clock } = deps;
  const secretBox = createSecretBox(config.encryptionKey, config.previousEncryptionKeys);
  const hasher = createKeyHasher(config.encryptionKey);
  const auditRepo = createAuditRepo(db);
  const audit = createAuditService({ auditRepo, clock });
  // The embedded database is one process's: nothing to tell the others.
  const changes = createChangeFeed({
    changeRepo: createChangeRepo(),
    channel: isEmbedded(db) ? null : changeChannel(config.databaseSchema),
  });
  // Outbound events: the one emitter every area writes its events with (in its own transaction).
  const events = createEvents({ clock });
  const workspaceRepo = createWorkspaceRepo(db);
  const workspaces = createWorkspaceService({
    db,
    workspaceRepo,
    audit,
    clock,
    changes,
    rebuildDayRollups: (workspaceId, zone, tx) => rebuildWorkspaceDays(tx, workspaceId, zone),
  });
  const { managementKeys, inferenceKeys } = createKeys(deps, { hasher, audit, changes, events, workspaceRepo });
  const requestHasher = createKeyHasher(config.encryptionKey, IDEMPOTENCY_HASH_LABEL);
  const idempotency = createIdempotencyService({ idempotencyRepo: createIdempotencyRepo(db), clock, secretBox, requestHasher });
  const quotaRepo = createQuotaRepo(db);
  const quota = createQuotaService({ db, quotaRepo });
  const planRepo = createPlanRepo(db);
  const plans = createPlanService({ db, planRepo, workspaces, audit, clock, changes });
  const accessRepo = createAccessRepo(db);
  const rates = createRateService({ rateRepo: createRateRepo(db) });
  const accesses = createAccessService({
    db,
    accessRepo,
    quotaRepo,
    quota,
    rates,
    plans,
    inferenceKeys,
    workspaces,
    audit,
    clock,
    changes,
    events,
  });
  const invocationRepo = createInvocationRepo(db, config.usageDayCacheBytes);
  const requestLogs = createRequestLogService({ requestLogRepo: createRequestLogRepo(db), secretBox, clock });
  const invocations = createInvocationService({
    invocationRepo,
    workspaces,
    clock,
    exportSlots: createExportSlots(config.exportsAtOnce),
    requestLogs,
  });
  const auditLogs = createAuditQueryService({ auditRepo, workspaces });
  const providerConnectionRepo = createProviderConnectionRepo(db);
  const providerConnections = createProviderConnectionService({
    db,
    providerConnectionRepo,
    workspaces,
    audit,
    secretBox,
    config,
    clock,
    changes,
    events,
  });
  const webhookRepo = createWebhookRepo(db);
  const webhooks = createWebhookService({ db, webhookRepo, workspaces, audit, secretBox, events, config, clock });
  const webhookDelivery = createWebhookDelivery({ db, webhookRepo, webhooks, events, audit, config, clock, logger: deps.logger });
  const routeRepo = createRouteRepo(db);
  const routes = createRouteService({ db, routeRepo, providerConnectionRepo, workspaces, audit, clock, changes });

  const { service: billing, passes: billingPasses } = createBilling({
    db,
    config,
    clock,
    logger: deps.logger,
    fetch: deps.fetch,
    secretBox,
    audit,
    workspaces,
    accesses,
    events,
  });
  const readiness = createReadiness({ db, schema: config.databaseSchema });
  const prices = createPriceService({ db, priceRepo: createPriceRepo(db), providerConnectionRepo, workspaces, audit, clock });
  const budgets = createBudgetService({
    db,
    budgetRepo: createBudgetRepo(db),
    workspaces,
    audit,
    changes,
    clock,
    events,
  });

  // People's sign-in and sessions (docs/people.md).
  const people = createPeople({ db, config, clock, logger: deps.logger, fetch: deps.fetch, hasher, secretBox, audit, workspaceRepo });

  // History's months ahead, its retention and each workspace's policy (docs/operations.md).
  const archiveStore = config.archiveS3 ? s3Store(config.archiveS3) : config.archiveDir ? dirStore(config.archiveDir) : undefined;
  const history = createHistoryService({
    db,
    audit,
    clock,
    archive: archiveStore ? async (month) => void (await archiveMonth(db, archiveStore, month)) : undefined,
  });

  const services = {
    // The Admin API's areas (src/handlers/, src/http/api.ts) and the app's timers (src/app.ts).
    workspaces,
    managementKeys,
    people,
    idempotency,
    plans,
    accesses,
    invocations,
    requestLogs,
    auditLogs,
    history,
    providerConnections,
    routes,
    billing,
    readiness,
    webhooks,
    // The app's timers: the delivery workers, and the sweep that announces keys about to expire.
    webhookDelivery,
    inferenceKeyExpiry: { announceExpiring: inferenceKeys.announceExpiring },
    // The one way another area raises an event (budgets, route breakers): events.emit(tx, workspaceId, type, data).
    events,
    prices,
    // The Admin API's budgets, and the gateway's check of them after each batch of calls recorded.
    budgets,
    // What the gateway is given besides the app's own db, config, clock and logger.
    quota,
    rates,
    hasher,
    secretBox,
    // What decides a gateway call changed (the gateway's cache subscribes; the app's listener feeds it).
    changes,
  };
  const testHooks = {
    billingPasses,
    inferenceKeys,
    providerConnectionRepo,
    quotaRepo,
  };
  return { services, testHooks };
}

export type Domain = ReturnType<typeof createDomain>;
export type Services = Domain['services'];
export type TestHooks = Domain['testHooks'];

/** The services alone (the CLI). */
export function createServices(deps: ServiceDeps): Services {
  return createDomain(deps).services;
}

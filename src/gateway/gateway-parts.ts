/**
 * The gateway's process-wide parts, composed in one place, beside the domain's
 * (src/domain/services.ts): its database pool, the key lookup's cache, the
 * upstream pools, the quota leases and rate allowances, the records (the recorder and its
 * spool: src/records/), the output bounds learned and the first wave's, and the meter that hands a call what it asks
 * of them (call-meter.ts). src/app.ts builds them once and gives them to the
 * gateway (gateway.ts), which only routes a request through them, and to the layers above it (src/batches/, src/realtime/).
 */
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Clock } from '../domain/actor.js';
import type { ChangeFeed } from '../domain/changes/change-feed.js';
import { createInvocationRepo } from '../domain/invocations/invocation-repo.js';
import { createQuotaLeases } from '../domain/quota/quota-leases.js';
import { createQuotaRepo } from '../domain/quota/quota-repo.js';
import { createRateAllowances } from '../domain/rate-limits/rate-allowances.js';
import { createRateRepo } from '../domain/rate-limits/rate-repo.js';
import type { KeyHasher } from '../domain/security/key-hash.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { createAuthCache } from './auth-cache.js';
import { CallMeter } from './call-meter.js';
import { createCallReport } from './call-report.js';
import { createRecords } from '../records/records.js';
import { createAuthRepo } from './auth-repo.js';
import { createGatewayDb } from './gateway-db.js';
import { createFirstWave } from './first-wave.js';
import { createLearnedBounds } from './learned-bounds.js';
import { createRouteRepo } from '../domain/routes/route-repo.js';
import { createRouteRegistry, type BreakerTransition } from './route-registry.js';
import { createUpstreamPools } from './upstreams.js';
import { openConnections, warmProtocol } from './warm-up.js';

/** A learned output bound is told to the other processes for models named in at most this many characters (NOTIFY's payload is bounded). */
const MAX_SHARED_MODEL = 256;

export interface GatewayPartsDeps {
  /** The app's pool: the gateway's own is made beside it (gateway-db.ts), or this one is shared. */
  db: Db;
  config: Config;
  clock: Clock;
  logger: Logger;
  hasher: KeyHasher;
  /** The connection secrets' key: request logs are sealed with it. */
  secretBox: SecretBox;
  /** Changes that decide a call: the cache drops what they touch; output bounds learned travel through it. */
  changes: ChangeFeed;
  /** Where the gateway counts what it does beyond the request metrics (optional: tests build gateways without). */
  metrics?: Metrics | undefined;
  /** The budgets' check of the workspaces a batch of calls charged (src/domain/budgets/budget-service.ts). */
  checkBudgets?: ((workspaceIds: string[]) => Promise<void>) | undefined;
  /** Told of every route breaker transition this process makes (docs/routes.md). */
  onBreakerTransition?: ((transition: BreakerTransition) => void) | undefined;
}

export function createGatewayParts(deps: GatewayPartsDeps) {
  const { config, clock, logger, metrics, changes } = deps;
  const { db, owned } = createGatewayDb(deps.db, config, () => clock.now());
  const authRepo = createAuthRepo(db, config.databasePreparedStatements);
  const cache = createAuthCache({
    repo: authRepo,
    clock,
    ttlMs: config.authCacheTtlMs,
    outageGraceMs: Math.floor(config.leaseTtlMs / 2),
    hash: (token) => deps.hasher.hash(token),
    heardThrough: changes.heardThrough,
    listeningTtlMs: config.authCacheListeningTtlMs,
  });
  const unsubscribe = changes.subscribe((change) => cache.invalidate(change));
  const pools = createUpstreamPools({ allowPrivate: config.allowPrivateUpstreams });
  const calls = createCallReport({ logger, metrics });
  // A lease's acquisition, extension and release are named statements too (lease-sql.ts): planned once per connection.
  const quotaRepo = createQuotaRepo(db, config.databasePreparedStatements);
  const leases = createQuotaLeases({
    repo: quotaRepo,
    clock,
    logger,
    ttlMs: config.leaseTtlMs,
    idleMs: config.quotaLeaseIdleMs,
    onStatement: metrics?.leaseStatement,
    onReleased: (periodId) => cache.leaseReleased(periodId),
  });
  const rates = createRateAllowances({
    repo: createRateRepo(db, config.databasePreparedStatements),
    clock,
    logger,
    ttlMs: config.leaseTtlMs,
    // An access idle this long gives back what the process holds unused (another process may be refused meanwhile).
    idleMs: config.quotaLeaseIdleMs,
  });
  // The records of calls (src/records/), written on the gateway's pool.
  const records = createRecords({
    db,
    config,
    logger,
    secretBox: deps.secretBox,
    metrics,
    checkBudgets: deps.checkBudgets,
    written: leases.written,
  });
  const { recorder } = records;
  const meter = new CallMeter({
    repo: records.repo,
    leases,
    rates,
    recorder,
    learned: createLearnedBounds(clock),
    firstWave: createFirstWave({ limit: config.firstWaveCalls, waitMs: config.firstWaveWaitMs }),
    invocations: createInvocationRepo(db),
    clock,
    logger,
    leaseTtlMs: config.leaseTtlMs,
    callSnapshotMs: config.callSnapshotMs,
    reload: (credential, connectionId) => cache.reload(credential, connectionId),
    onOutputOverBound: metrics?.outputOverBound,
    onUsageMissing: metrics?.usageMissing,
    // Off the call's path; a notification lost leaves the other processes to learn it themselves.
    shareLearned: (learned) => {
      if (learned.model.length > MAX_SHARED_MODEL) return;
      changes.shareLearned(learned, db).catch((err: Error) => {
        logger.warn({
          msg: 'could not tell the other processes of a learned output bound',
          connectionId: learned.connectionId,
          error: err.message,
        });
      });
    },
    report: calls.report,
  });
  const unlearn = changes.onLearned((learned) => meter.learnedElsewhere(learned));
  const routes = createRouteRegistry({
    repo: createRouteRepo(db),
    changes,
    clock,
    logger,
    onBreakerTransition: (transition) => {
      metrics?.routeBreaker(transition.routeId, transition.connectionId, transition.to);
      deps.onBreakerTransition?.(transition);
    },
  });
  if (owned) metrics?.watchPool('gateway', db);

  /** Waits for the records started so far, then returns the quota leases and rate allowances not in use. */
  async function drain(): Promise<void> {
    await records.drain();
    await leases.drain();
    await rates.drain();
  }

  return {
    cache,
    pools,
    meter,
    /** The routes this process serves and their targets' breakers. */
    routes,
    attemptMetrics: metrics && {
      attempt: metrics.routeAttempt,
      fallback: metrics.routeFallback,
      retryWait: metrics.routeRetryWait,
      connectionAttempt: metrics.connectionAttempt,
      connectionRetryWait: metrics.connectionRetryWait,
    },
    /** The call report's line for a request refused before its call was opened. */
    refusedEarly: calls.refusedEarly,
    /** Writes the records a process that stopped left in the spool (at start). */
    recover: () => recorder.recover(),
    /**
     * Before a fresh process takes calls (warm-up.ts): the gateway pool's connections opened (each settles on its
     * plans as it opens: gateway-db.ts), while the call's protocol part is compiled. Resolves with the connections opened.
     */
    async warmUp(): Promise<number> {
      const opening = openConnections(db, config.databasePoolMax);
      warmProtocol();
      return opening;
    },
    recorderStats: () => recorder.stats(),
    drain,
    /** Drains, then stops every timer, pool and subscription the parts hold. */
    async close(): Promise<void> {
      await drain();
      meter.close();
      recorder.close();
      leases.close();
      rates.close();
      unsubscribe();
      unlearn();
      await routes.close();
      cache.close();
      await pools.close();
      if (owned) await db.destroy();
    },
  };
}

export type GatewayParts = ReturnType<typeof createGatewayParts>;

/**
 * The Batch API (docs/batches.md): OpenAI's Files and Batches, Azure OpenAI's, and Anthropic's Message Batches. A layer
 * above the gateway, as Realtime sessions are: the composition builds it on the gateway's parts (its meter, for the
 * access's rules and quota view, and its upstream pools) and hands the gateway its paths (TakenPaths); the job
 * `batch-settlement` runs its settlement's rounds. Its leases and records are written on the app's pool, committed
 * as the Admin API's are.
 */
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Clock } from '../domain/actor.js';
import { createQuotaRepo } from '../domain/quota/quota-repo.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import type { Logger } from '../observability/logger.js';
import type { GatewayParts } from '../gateway/gateway-parts.js';
import type { TakenPaths } from '../gateway/taken-paths.js';
import { batchPathOf, createBatchGateway } from './batch-gateway.js';
import { createBatchRepo } from './batch-repo.js';
import { createBatchSettlement, type BatchSettlementDeps } from './batch-settlement.js';

/** A path that may be one of the Batch API's (batchPathOf says, once the connection's protocol is known). */
const BATCH_LIKE = /(?:^|\/)(?:files|batches)(?:\/|$)/i;

export interface BatchesDeps {
  /** The app's pool. */
  db: Db;
  /** The gateway's process-wide parts: its meter and upstream pools. */
  parts: Pick<GatewayParts, 'meter' | 'pools'>;
  config: Config;
  clock: Clock;
  logger: Logger;
  /** The connection secrets' key: a batch's request and its poll open their connection's key. */
  secretBox: SecretBox;
  /** The settlement's chunk, and its hook after each (tests: a process that dies midway). */
  settlement?: Pick<BatchSettlementDeps, 'chunk' | 'charged'> | undefined;
}

export function createBatches(deps: BatchesDeps) {
  const { config, clock, logger, secretBox } = deps;
  const { meter, pools } = deps.parts;
  const repo = createBatchRepo(deps.db);
  const quotaRepo = createQuotaRepo(deps.db);
  const requests = createBatchGateway({
    repo,
    quotaRepo,
    meter,
    pools,
    secretBox,
    clock,
    logger,
    bodyLimitBytes: config.gatewayBodyLimitBytes,
  });
  const settlement = createBatchSettlement({ repo, quotaRepo, pools, secretBox, clock, logger, ...deps.settlement });
  const paths: TakenPaths = {
    mayTake: (route) => BATCH_LIKE.test(route),
    take(protocol, method, route) {
      const path = batchPathOf(protocol, method, route);
      return path && ((r, boundary) => requests.handle({ ...r, path }, boundary));
    },
  };
  return {
    /** The Batch API's paths, handed to the gateway. */
    paths,
    /** A round of the batches' settlement (the job `batch-settlement`): those due by `now` polled; how many. */
    settle: (now?: Date) => settlement.round(now),
  };
}

export type Batches = ReturnType<typeof createBatches>;

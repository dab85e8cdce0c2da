/**
 * The records of calls, composed: the statements that write them (call-repo.ts), the recorder that batches them off
 * the calls' path and spools them while PostgreSQL is away (call-recorder.ts, spool.ts), their request logs sealed
 * and written, and their costs handed to the metrics and the budgets (call-spend.ts). Built by the gateway's parts
 * (src/gateway/gateway-parts.ts) on the gateway's pool; the gateway's meter, Realtime sessions' turns and the tests'
 * callers record through them.
 */
import { join } from 'node:path';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { createInferenceKeyRepo } from '../domain/inference-keys/inference-key-repo.js';
import type { Admission } from '../domain/quota/quota-leases.js';
import { createRequestLogRepo } from '../domain/request-logs/request-log-repo.js';
import { sealRequestLog } from '../domain/request-logs/request-log-seal.js';
import type { RequestLogEntry } from '../domain/request-logs/request-log-types.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { createCallRecorder } from './call-recorder.js';
import { createCallRepo } from './call-repo.js';
import { createCallSpend } from './call-spend.js';
import { createSpool } from './spool.js';

export interface RecordsDeps {
  /** The pool the records are written on (the gateway's own: src/gateway/gateway-db.ts). */
  db: Db;
  config: Config;
  logger: Logger;
  /** The connection secrets' key: request logs are sealed with it. */
  secretBox: SecretBox;
  metrics?: Metrics | undefined;
  /** The budgets' check of the workspaces a batch of calls charged (src/domain/budgets/budget-service.ts). */
  checkBudgets?: ((workspaceIds: string[]) => Promise<void>) | undefined;
  /** Told of each admitted call once its record is safe (written or spooled), or given up (the quota leases'). */
  written: (admission: Admission) => void;
}

/** Request logs sealed and written in one statement per batch (the recorder's, off the calls' path). */
function requestLogWriter(db: Db, secretBox: SecretBox) {
  const repo = createRequestLogRepo(db);
  return { write: (entries: RequestLogEntry[]) => repo.insert(entries.map((entry) => sealRequestLog(secretBox, entry))) };
}

export function createRecords(deps: RecordsDeps) {
  const { db, config, logger, metrics } = deps;
  const repo = createCallRepo(db, config.databasePreparedStatements);
  const spend = createCallSpend({ checkBudgets: deps.checkBudgets, onCost: metrics?.callCost, logger });
  const recorder = createCallRecorder({
    // A batch's costs go to the metrics and the budgets once it is written.
    repo: { record: async (rows) => spend.recorded(await repo.record(rows)) },
    keys: createInferenceKeyRepo(db),
    logger,
    written: deps.written,
    // Records wait for PostgreSQL in the data dir; the embedded database is never away from its process.
    spool: config.databaseUrl ? createSpool(join(config.dataDir, 'spool')) : undefined,
    events: metrics && {
      batch: metrics.recorderBatch,
      failure: metrics.recorderFailure,
      spooled: metrics.recorderSpooled,
      logsWritten: metrics.requestLogsWritten,
      logsDropped: metrics.requestLogsDropped,
    },
    logs: requestLogWriter(db, deps.secretBox),
    window: { maxMs: config.recordWindowMs },
  });
  metrics?.watchRecorder(() => recorder.stats());
  return {
    /** The statements of calls under way (the meter's heartbeat and snapshot). */
    repo,
    recorder,
    /** Waits for the records started so far, then for the budget checks they began. */
    async drain(): Promise<void> {
      await recorder.drain();
      await spend.drain();
    },
  };
}

/**
 * Request logs as the Admin API and the jobs see them: one call's log, opened for the keys and people of its
 * workspace only, and the sweep that removes expired logs in bounded batches, off the request path.
 */
import { AppError } from '../../errors.js';
import { canSeeWorkspace, type Actor, type Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { SecretBox } from '../security/secret-box.js';
import type { RequestLogRepo } from './request-log-repo.js';
import { openRequestLog } from './request-log-seal.js';
import type { RequestLogEntry } from './request-log-types.js';

/** Logs removed per statement, and statements per sweep: a backlog leaves over several sweeps, never in one long delete. */
const SWEEP_BATCH = 1000;
const SWEEP_BATCHES = 10;

export interface RequestLogDeps {
  requestLogRepo: RequestLogRepo;
  secretBox: SecretBox;
  clock: Clock;
}

/** The call's log; another workspace's looks missing, as a call that kept none does. */
async function get({ requestLogRepo, secretBox }: RequestLogDeps, actor: Actor, invocationId: string): Promise<RequestLogEntry> {
  const row = await requestLogRepo.findByInvocation(invocationId);
  if (!row || !canSeeWorkspace(actor, row.workspace_id)) throw new AppError('request_log_not_found', 'Request log not found');
  return openRequestLog(secretBox, row);
}

/** Removes the logs expired by now, at most SWEEP_BATCHES batches; returns how many. */
async function sweepExpired({ requestLogRepo, clock }: RequestLogDeps): Promise<number> {
  const now = clock.now();
  let removed = 0;
  for (let i = 0; i < SWEEP_BATCHES; i++) {
    const n = await requestLogRepo.deleteExpired(now, SWEEP_BATCH);
    removed += n;
    if (n < SWEEP_BATCH) break;
  }
  return removed;
}

export function createRequestLogService(deps: RequestLogDeps) {
  return bindDeps(deps, { get, sweepExpired });
}

export type RequestLogService = ReturnType<typeof createRequestLogService>;

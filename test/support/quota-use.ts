/**
 * Quota used the way the gateway uses it, without an upstream: for tests of what
 * use does elsewhere (plan changes, billing, snapshots, the sweeper).
 * - leaseUnits: a lease of exactly `units` (quotaRepo.acquireLease, the statement a
 *   gateway process takes a lease with, sized exactly instead of with headroom);
 * - chargeOnLease: a call admitted on that lease consumed `units` of its `bound`:
 *   settled and recorded by the gateway's record statement (src/records/call-repo.ts), with an
 *   invocation and its USAGE event (and ADJUSTMENT beyond the bound);
 * - meteringProcess: what one gateway process runs, quota leases and the call
 *   recorder, for concurrency tests with several such processes on one database.
 */
import { expect } from 'vitest';
import type { Db } from '../../src/db/database.js';
import { systemClock, type Clock } from '../../src/domain/actor.js';
import { createInferenceKeyRepo } from '../../src/domain/inference-keys/inference-key-repo.js';
import type { InvocationRow } from '../../src/domain/invocations/invocation-types.js';
import { createQuotaLeases, type Admission } from '../../src/domain/quota/quota-leases.js';
import { createQuotaRepo } from '../../src/domain/quota/quota-repo.js';
import { createCallRepo } from '../../src/records/call-repo.js';
import { callRows, type Consumption } from '../../src/records/call-rows.js';
import { createCallRecorder } from '../../src/records/call-recorder.js';
import { newId } from '../../src/ids.js';
import { createLogger } from '../../src/observability/logger.js';
import { preparedStatements } from './test-db.js';

export interface PeriodRef {
  id: string;
  workspace_id: string;
  workspace_access_id: string;
}

/** An invocation of a call on the period, as the gateway records one that succeeded. */
function invocationOn(period: PeriodRef, leaseId: string | null, units: bigint, at: Date): InvocationRow {
  return {
    id: newId(),
    workspace_id: period.workspace_id,
    workspace_access_id: period.workspace_access_id,
    provider_connection_id: newId(),
    inference_key_id: newId(),
    request_id: `test-${newId()}`,
    trace_id: null,
    method: 'POST',
    endpoint: 'v1/chat/completions',
    requested_model: 'test-model',
    status: 'SUCCEEDED',
    metering_status: 'metered',
    streamed: false,
    lease_id: leaseId,
    quota_units: units,
    error_code: null,
    started_at: at,
    first_token_at: null,
    completed_at: at,
    total_latency_ms: 1,
    provider_latency_ms: 1,
    nexus_latency_ms: 0,
    total_ttft_ms: null,
    provider_ttft_ms: null,
    nexus_ttft_ms: null,
    upstream_response_id: null,
    attempt_id: newId(),
    attempt_upstream_model: 'test-model',
    attempt_status: 'SUCCEEDED',
    attempt_http_status: 200,
    attempt_error_code: null,
    attempt_started_at: at,
    attempt_first_token_at: null,
    attempt_completed_at: at,
    attempt_duration_ms: 1,
  };
}

const consumption = (units: bigint): Consumption => ({
  units,
  inputTokens: units,
  cachedInputTokens: 0n,
  outputTokens: 0n,
  model: 'test-model',
  pricing: { rule: null, inputMultiplierPpm: 1_000_000n, cachedInputMultiplierPpm: 1_000_000n, outputMultiplierPpm: 1_000_000n },
});

/** A lease of exactly `units` on the period, expiring at `expiresAt`; returns its id. */
export async function leaseUnits(db: Db, period: PeriodRef, units: bigint, at: { now: Date; expiresAt: Date }): Promise<string> {
  const id = newId();
  const answer = await createQuotaRepo(db).acquireLease({
    id,
    workspaceId: period.workspace_id,
    accessId: period.workspace_access_id,
    periodId: period.id,
    need: units,
    want: units,
    share: 1,
    requestId: 'test',
    now: at.now,
    expiresAt: at.expiresAt,
  });
  expect(answer.held, `the period could not hold ${units} units`).toBe(units);
  return id;
}

/**
 * A call admitted on the lease with `bound` consumed `units`: its lease gives up `take` (the units, unless
 * given), the rest beyond the lease's hold is an ADJUSTMENT. Returns the invocation's id.
 */
export async function chargeOnLease(
  db: Db,
  period: PeriodRef,
  leaseId: string,
  c: { bound: bigint; units: bigint; take?: bigint; at?: Date },
): Promise<string> {
  const invocation = invocationOn(period, leaseId, c.units, c.at ?? new Date());
  const rows = callRows({ invocation, lease: { id: leaseId, bound: c.bound, take: c.take ?? c.units }, consumed: consumption(c.units) });
  await createCallRepo(db, preparedStatements).record([rows]);
  return invocation.id;
}

/** Uses `units` of the period at once: a lease of that size, one call consuming all of it, the lease released. */
export async function useUnits(db: Db, period: PeriodRef, units: bigint, now = new Date()): Promise<void> {
  const leaseId = await leaseUnits(db, period, units, { now, expiresAt: new Date(now.getTime() + 60_000) });
  await chargeOnLease(db, period, leaseId, { bound: units, units, at: now });
  await createQuotaRepo(db).releaseLease(leaseId, now);
}

/** One gateway process's metering: its quota leases admit calls, its recorder writes them when they finish. */
export function meteringProcess(db: Db, options: { clock?: Clock; ttlMs?: number; idleMs?: number } = {}) {
  const logger = createLogger('silent');
  const leases = createQuotaLeases({
    repo: createQuotaRepo(db, preparedStatements),
    clock: options.clock ?? systemClock,
    logger,
    ttlMs: options.ttlMs ?? 60_000,
    idleMs: options.idleMs ?? 60_000,
  });
  const callRepo = createCallRepo(db, preparedStatements);
  const recorder = createCallRecorder({
    repo: {
      record: async (rows) => {
        await callRepo.record(rows);
      },
    },
    keys: createInferenceKeyRepo(db),
    logger,
    written: leases.written,
  });
  return {
    leases,
    admit: (period: PeriodRef, bound: bigint) =>
      leases.admit({ workspaceId: period.workspace_id, accessId: period.workspace_access_id, periodId: period.id }, bound),
    /** The admitted call ended having consumed `units` (null: nothing charged); its record is queued. */
    finish(period: PeriodRef, admission: Admission, units: bigint | null): string {
      const take = leases.settle(admission, units);
      const invocation = invocationOn(period, admission.lease.id, units ?? 0n, new Date());
      const rows = callRows({
        invocation,
        lease: units === null ? undefined : { id: admission.lease.id, bound: admission.bound, take },
        consumed: units === null ? null : consumption(units),
      });
      recorder.record(
        {
          ...rows,
          requestId: invocation.request_id,
          keyId: invocation.inference_key_id,
          lastRequestAt: new Date(),
          admission,
          span: undefined,
        },
        new Date(),
      );
      return invocation.id;
    },
    /** Waits for the records, then releases every lease. */
    async drain(): Promise<void> {
      await recorder.drain();
      await leases.drain();
    },
    close: () => leases.close(),
  };
}

/**
 * History's upkeep and its policy (docs/operations.md, "History: partitions, retention, archive"):
 * - the months ahead: each partitioned table has its partitions for this month and MONTHS_AHEAD more, made by the
 *   history job before they are needed (an insert into a month not made lands in the table's default partition);
 * - retention: a month of a detail table whose end is older than every workspace's detail policy leaves whole (its
 *   partition dropped, after its archive when one is configured), unless, for usage events, a quota period it may hold
 *   events of is not settled (and, with a billing connection, reconciled); what a workspace's shorter policy expires
 *   from months still kept leaves in bounded batches, each its own short transaction; rollups older than the
 *   workspace's rollup policy likewise;
 * - a workspace's policy, read and set (root or the workspace's key; the change is audited).
 */
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import { assertVisible, type Actor, type Clock } from '../actor.js';
import { bindDeps } from '../bind.js';
import type { AuditService } from '../audit/audit-service.js';
import {
  DETAIL_TABLES,
  HISTORY_TABLES,
  deleteBatch,
  deleteRollupBatch,
  dropMonth,
  HISTORY_LOCK_TIMEOUT_MS,
  ensureMonth,
  monthHoldsUnsettled,
  monthPartitions,
  retentionOf,
  retentionPolicies,
  setRetention,
  type HistoryTable,
  type MonthPartition,
  type RetentionRow,
} from './history-repo.js';

/** How many months past the current one exist at every moment. */
const MONTHS_AHEAD = 3;
const DEFAULT_DETAIL_DAYS = 90;
const MIN_DETAIL_DAYS = 1;
const MAX_RETENTION_DAYS = 3650;
const DAY_MS = 86_400_000;

/** What a round of retention removes at most per workspace and table (rows), and in how many batches. */
const BATCH_ROWS = 5_000;
const BATCHES_PER_ROUND = 20;

interface RetentionPolicy {
  workspaceId: string;
  detailDays: number;
  rollupDays: number;
}

/** What a round of retention did. */
interface RetentionRound {
  /** The partitions dropped (archived first when an archive is configured). */
  dropped: string[];
  /** The partitions whose end is past every policy, kept for their unsettled usage. */
  keptForBilling: string[];
  /** Rows removed in batches (detail and rollups). */
  removed: number;
}

/** Writes a month to the archive before it is dropped (archive.ts); absent: no archive is configured. */
type ArchiveMonth = (month: MonthPartition) => Promise<void>;

export interface HistoryDeps {
  db: Db;
  audit: AuditService;
  clock: Clock;
  archive?: ArchiveMonth | undefined;
}

const addMonths = (at: Date, n: number) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + n, 1));

/** Makes this month's partitions and MONTHS_AHEAD more of every history table; the names made. */
async function ensureMonthsAhead({ db, clock }: HistoryDeps): Promise<string[]> {
  const made: string[] = [];
  const now = clock.now();
  for (const table of Object.keys(HISTORY_TABLES) as HistoryTable[]) {
    for (let i = 0; i <= MONTHS_AHEAD; i++) {
      const at = addMonths(now, i);
      if (await ensureMonth(db, table, at)) made.push(`${table}@${at.toISOString().slice(0, 7)}`);
    }
  }
  return made;
}

const policyOf = (row: RetentionRow): RetentionPolicy => ({
  workspaceId: row.id,
  detailDays: row.detail_retention_days,
  rollupDays: row.rollup_retention_days,
});

/** The months of the detail tables past every workspace's policy: dropped, or kept for their unsettled usage. */
async function dropExpiredMonths(deps: HistoryDeps, policies: RetentionPolicy[], now: Date, round: RetentionRound): Promise<void> {
  // A month leaves whole once every workspace's policy has expired it: the longest policy decides.
  const keepDays = policies.length ? Math.max(...policies.map((p) => p.detailDays)) : DEFAULT_DETAIL_DAYS;
  const cutoff = new Date(now.getTime() - keepDays * DAY_MS);
  for (const table of DETAIL_TABLES) {
    for (const month of await monthPartitions(deps.db, table)) {
      if (month.to > cutoff) continue;
      if (table === 'usage_events' && (await monthHoldsUnsettled(deps.db, month, now))) {
        round.keptForBilling.push(month.name);
        continue;
      }
      if (deps.archive) await deps.archive(month);
      await dropMonth(deps.db, month, HISTORY_LOCK_TIMEOUT_MS);
      round.dropped.push(month.name);
    }
  }
}

/** A workspace's rows past its own policy, from the months still kept: a bounded number of batches per table. */
async function removeExpiredRows({ db }: HistoryDeps, policy: RetentionPolicy, now: Date): Promise<number> {
  let removed = 0;
  const detailCutoff = new Date(now.getTime() - policy.detailDays * DAY_MS);
  for (const table of DETAIL_TABLES) {
    for (let batch = 0; batch < BATCHES_PER_ROUND; batch++) {
      const n = await deleteBatch(db, table, policy.workspaceId, detailCutoff, BATCH_ROWS, now);
      removed += n;
      if (n < BATCH_ROWS) break;
    }
  }
  const rollupCutoff = new Date(now.getTime() - policy.rollupDays * DAY_MS);
  for (let batch = 0; batch < BATCHES_PER_ROUND; batch++) {
    const n = await deleteRollupBatch(db, policy.workspaceId, rollupCutoff, BATCH_ROWS);
    removed += n;
    if (n === 0) break;
  }
  return removed;
}

/** One round of retention at `now` (the history job passes its clock's time). */
async function applyRetention(deps: HistoryDeps, now: Date = deps.clock.now()): Promise<RetentionRound> {
  const policies = (await retentionPolicies(deps.db)).map(policyOf);
  const round: RetentionRound = { dropped: [], keptForBilling: [], removed: 0 };
  await dropExpiredMonths(deps, policies, now, round);
  for (const policy of policies) round.removed += await removeExpiredRows(deps, policy, now);
  return round;
}

async function getPolicy({ db }: HistoryDeps, actor: Actor, workspaceId: string): Promise<RetentionPolicy> {
  assertVisible(actor, workspaceId, 'workspace_not_found', 'Workspace');
  const row = await retentionOf(db, workspaceId);
  if (!row) throw new AppError('workspace_not_found', 'Workspace not found');
  return policyOf(row);
}

function assertDays(value: number, param: string, min: number): void {
  if (!Number.isInteger(value) || value < min || value > MAX_RETENTION_DAYS) {
    throw new AppError('invalid_parameter', `${param} must be a whole number of days from ${min} to ${MAX_RETENTION_DAYS}`, { param });
  }
}

/** Sets a workspace's policy (a field left out keeps its value); rollups are kept at least as long as detail. */
async function setPolicy(
  { db, audit, clock }: HistoryDeps,
  actor: Actor,
  workspaceId: string,
  input: { detailDays?: number | undefined; rollupDays?: number | undefined },
): Promise<RetentionPolicy> {
  assertVisible(actor, workspaceId, 'workspace_not_found', 'Workspace');
  if (input.detailDays !== undefined) assertDays(input.detailDays, 'detailDays', MIN_DETAIL_DAYS);
  if (input.rollupDays !== undefined) assertDays(input.rollupDays, 'rollupDays', MIN_DETAIL_DAYS);
  return db.transaction(async (tx) => {
    const current = await tx('workspaces').where({ id: workspaceId }).forUpdate().first<{ status: string } & RetentionRow>();
    if (!current) throw new AppError('workspace_not_found', 'Workspace not found');
    if (current.status === 'ARCHIVED') throw new AppError('workspace_archived', 'The workspace is archived and read-only');
    const detailDays = input.detailDays ?? current.detail_retention_days;
    const rollupDays = input.rollupDays ?? current.rollup_retention_days;
    if (rollupDays < detailDays) {
      throw new AppError('invalid_parameter', 'rollupDays must be at least detailDays: totals outlive the detail they sum', {
        param: 'rollupDays',
      });
    }
    await setRetention(tx, workspaceId, detailDays, rollupDays, clock.now());
    await audit.record(
      actor,
      {
        action: 'workspace.retention_updated',
        resourceType: 'workspace',
        resourceId: workspaceId,
        workspaceId,
        changes: {
          before: { detailDays: current.detail_retention_days, rollupDays: current.rollup_retention_days },
          after: { detailDays, rollupDays },
        },
      },
      tx,
    );
    return { workspaceId, detailDays, rollupDays };
  });
}

export function createHistoryService(deps: HistoryDeps) {
  return bindDeps(deps, { ensureMonthsAhead, applyRetention, getPolicy, setPolicy });
}

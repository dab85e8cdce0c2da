/**
 * The SQL of history's upkeep (docs/operations.md, "History: partitions, retention, archive"): the months of the
 * partitioned tables (migrations/20261210010000_history_partitions.ts), created ahead of need and dropped when
 * expired, and the bounded batches that remove what a workspace's shorter policy expires from months still kept.
 */
import type { Knex } from 'knex';
import type { Queryable } from '../../db/database.js';
import { RAISE_REVISION_SQL } from '../recording/rollup-sql.js';

/** The partitioned tables and their partition keys. */
export const HISTORY_TABLES = {
  invocations: 'started_at',
  usage_events: 'created_at',
  webhook_attempts: 'created_at',
  audit_logs: 'created_at',
} as const;

export type HistoryTable = keyof typeof HISTORY_TABLES;

/** The tables of a call's detail, which a workspace's detail retention expires (the audit log stays). */
export const DETAIL_TABLES: HistoryTable[] = ['invocations', 'webhook_attempts', 'usage_events'];

/** A month of a partitioned table: its partition's name and bounds [from, to). */
export interface MonthPartition {
  table: HistoryTable;
  name: string;
  from: Date;
  to: Date;
}

/** What a workspace keeps, in days. */
export interface RetentionRow {
  id: string;
  detail_retention_days: number;
  rollup_retention_days: number;
}

/** The SQL condition "quota period `q` is not settled at :now": not ended, or its billing not reconciled since. */
const UNSETTLED_PERIOD = `(q.period_end > :now or exists (
    select 1 from billing_connections c
     where c.workspace_id = q.workspace_id and c.status = 'ACTIVE'
       and not exists (select 1 from reconciliation_runs r
                        where r.billing_connection_id = c.id and r.status = 'SUCCEEDED' and r.finished_at >= q.period_end)))`;

/**
 * How long the history job waits for a lock: well under PostgreSQL's deadlock_timeout (1 s). Making or dropping a
 * partition locks its table and then the tables its foreign keys name (workspaces...), which a call's or a change's
 * transaction may hold while it waits for the first: the job gives up first (and tries again next round), so it is
 * never a call's transaction that the deadlock check ends.
 */
export const HISTORY_LOCK_TIMEOUT_MS = 200;

/**
 * Creates the month of `at` as a partition of `table` unless it exists; true when it made it. Making a partition locks
 * its table: it waits at most HISTORY_LOCK_TIMEOUT_MS for the lock, so no call's insert queues behind it for longer.
 */
export async function ensureMonth(db: Knex, table: HistoryTable, at: Date): Promise<boolean> {
  return db.transaction(async (tx) => {
    await tx.raw(`select set_config('lock_timeout', ?, true)`, [`${HISTORY_LOCK_TIMEOUT_MS}ms`]);
    const { rows } = await tx.raw<{ rows: { made: boolean }[] }>('select nexus_history_month(?, ?) as made', [table, at]);
    return rows[0]!.made;
  });
}

/** The month partitions of `table` (not its default), oldest first. */
export async function monthPartitions(q: Queryable, table: HistoryTable): Promise<MonthPartition[]> {
  const { rows } = await q.raw<{ rows: { name: string; bound: string }[] }>(
    `select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound
       from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = to_regclass(?)`,
    [table],
  );
  const months: MonthPartition[] = [];
  for (const r of rows) {
    const m = /FROM \('([^']+)'\) TO \('([^']+)'\)/.exec(r.bound);
    if (m) months.push({ table, name: r.name, from: new Date(m[1]!), to: new Date(m[2]!) });
  }
  return months.sort((a, b) => a.from.getTime() - b.from.getTime());
}

/**
 * Whether a month of usage events still holds billing-relevant events: a quota period that began before the month's
 * end is not settled (or, with an active billing connection, not reconciled since it ended). Conservative: a period
 * that overlaps the month keeps it whether or not its events are in it.
 */
export async function monthHoldsUnsettled(q: Queryable, month: MonthPartition, now: Date): Promise<boolean> {
  const { rows } = await q.raw<{ rows: unknown[] }>(
    `select 1 from quota_periods q where q.period_start < :to and q.period_end > :from and ${UNSETTLED_PERIOD} limit 1`,
    { to: month.to, from: month.from, now },
  );
  return rows.length > 0;
}

/** Drops a month's partition; waits at most `lockTimeoutMs` for its table's lock, so no call queues behind it. */
export async function dropMonth(q: Knex, month: MonthPartition, lockTimeoutMs: number): Promise<void> {
  await q.transaction(async (tx) => {
    await tx.raw(`select set_config('lock_timeout', ?, true)`, [`${lockTimeoutMs}ms`]);
    await tx.raw('drop table ??', [month.name]);
  });
}

/** Every workspace's retention policy. */
export async function retentionPolicies(q: Queryable): Promise<RetentionRow[]> {
  return q('workspaces').select('id', 'detail_retention_days', 'rollup_retention_days');
}

/** One workspace's retention policy. */
export async function retentionOf(q: Queryable, workspaceId: string): Promise<RetentionRow | undefined> {
  return q('workspaces').where({ id: workspaceId }).first('id', 'detail_retention_days', 'rollup_retention_days');
}

export async function setRetention(q: Queryable, workspaceId: string, detailDays: number, rollupDays: number, now: Date): Promise<void> {
  await q('workspaces')
    .where({ id: workspaceId })
    .update({ detail_retention_days: detailDays, rollup_retention_days: rollupDays, updated_at: now });
}

/**
 * Removes at most `limit` rows of `table` of one workspace older than `before` (usage events of an unsettled period
 * stay), oldest first by id (ids are time-ordered), in its own short transaction; returns how many it removed. The
 * time bound prunes the months newer than `before`.
 */
export async function deleteBatch(
  db: Knex,
  table: HistoryTable,
  workspaceId: string,
  before: Date,
  limit: number,
  now: Date,
): Promise<number> {
  const key = HISTORY_TABLES[table];
  const unsettled =
    table === 'usage_events' ? `and not exists (select 1 from quota_periods q where q.id = t.quota_period_id and ${UNSETTLED_PERIOD})` : '';
  return db.transaction(async (tx) => {
    await tx.raw(`select set_config('nexus.history_delete', 'on', true)`);
    const sql = `with doomed as (
        select t.id, t.${key} from ${table} t
         where t.workspace_id = :workspaceId and t.${key} < :before ${unsettled}
         order by t.workspace_id, t.id limit :limit)
      delete from ${table} d using doomed where d.id = doomed.id and d.${key} = doomed.${key} and d.${key} < :before
      returning 1`;
    const { rows } = await tx.raw<{ rows: unknown[] }>(sql, { workspaceId, before, limit, now });
    return rows.length;
  });
}

/**
 * Removes at most `limit` rollup rows (of each rollup) of one workspace from before `before`; how many. The hourly
 * rollups lose their hours before it; the day rollups only their days wholly before it (a local day lasts 25 hours
 * at most), so that a day the cutoff falls in keeps its row until all of it has expired.
 */
export async function deleteRollupBatch(db: Knex, workspaceId: string, before: Date, limit: number): Promise<number> {
  let removed = 0;
  const rollups = [
    ['usage_rollups', 'hour', '< :before'],
    ['usage_key_rollups', 'hour', '< :before'],
    ['usage_day_rollups', 'day', `<= cast(:before as timestamptz) - interval '25 hours'`],
    ['usage_day_key_rollups', 'day', `<= cast(:before as timestamptz) - interval '25 hours'`],
  ] as const;
  for (const [rollup, bucket, end] of rollups) {
    const { rows } = await db.raw<{ rows: unknown[] }>(
      `delete from ${rollup} r using (select distinct workspace_id, ${bucket} from (select workspace_id, ${bucket} from ${rollup}
          where workspace_id = :workspaceId and ${bucket} ${end} order by ${bucket} limit :limit) h) o
        where r.workspace_id = o.workspace_id and r.${bucket} = o.${bucket}
        returning 1`,
      { workspaceId, before, limit },
    );
    removed += rows.length;
  }
  // The summaries' finished days (src/domain/invocations/usage-days.ts) are read again.
  if (removed > 0) await db.raw(RAISE_REVISION_SQL, [workspaceId]);
  return removed;
}

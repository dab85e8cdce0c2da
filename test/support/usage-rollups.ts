/**
 * Usage written by hand in tests: a workspace's rollups made anew from its usage events (the gateway adds its calls'
 * in the statement that records them), and a usage CSV's cells as the summary's buckets give them.
 */
import type { UsageBucketDto } from '../../generated/client/types.gen.js';
import type { Db } from '../../src/db/database.js';
import { rebuildWorkspaceRollupsSql, ROLLUP_TABLES } from '../../src/domain/recording/rollup-sql.js';

export async function rebuildRollups(db: Db, workspaceId: string): Promise<void> {
  for (const table of ROLLUP_TABLES) await db(table).where({ workspace_id: workspaceId }).delete();
  await db.raw(rebuildWorkspaceRollupsSql(':workspaceId'), { workspaceId });
}

/** A bucket's cells in exportUsageSummary's columns, before the CSV's cell rules: a kind a bucket lacks is 0. */
export const usageCsvCells = (b: UsageBucketDto, currency = 'USD'): (string | number)[] => [
  b.start,
  b.key,
  b.units,
  b.inputTokens,
  b.cachedInputTokens,
  b.outputTokens,
  b.events,
  b.costMicros,
  b.unpricedEvents,
  b.calls,
  b.failedCalls,
  b.refusedCalls,
  currency,
  ...[b.audioInputTokens, b.audioOutputTokens, b.imageInputTokens, b.imageOutputTokens, b.images, b.audioMs, b.characters].map(
    (sum) => sum ?? '0',
  ),
];

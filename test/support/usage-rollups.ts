/**
 * Usage written by hand in tests: a workspace's rollups made anew from its usage events (the gateway adds its calls'
 * in the statement that records them), a summary asked of them through HTTP, and a usage CSV's cells as the summary's
 * buckets give them.
 */
import { expect } from 'vitest';
import type { UsageBucketDto } from '../../generated/client/types.gen.js';
import type { Db } from '../../src/db/database.js';
import { rebuildWorkspaceRollupsSql, ROLLUP_TABLES } from '../../src/domain/recording/rollup-sql.js';
import { newId } from '../../src/ids.js';
import { localDate, localMidnight } from '../../src/domain/workspaces/time-zone.js';
import { getUsageSummary } from './sdk.js';
import type { TestApp } from './test-app.js';

export async function rebuildRollups(db: Db, workspaceId: string): Promise<void> {
  for (const table of ROLLUP_TABLES) await db(table).where({ workspace_id: workspaceId }).delete();
  await db.raw(rebuildWorkspaceRollupsSql(':workspaceId'), { workspaceId });
}

/** A summary's question, its range in ms. */
export interface SummaryAsk {
  granularity: 'hour' | 'day';
  groupBy: 'model' | 'access';
  timeZone: string;
  since: number;
  until: number;
  top?: number;
  offset?: number;
}

/** getUsageSummary's answer to `ask` on `t` (200 expected). */
export async function askSummary(t: TestApp, workspaceId: string, ask: SummaryAsk) {
  const { since, until, ...rest } = ask;
  const res = await getUsageSummary({
    client: t.client,
    path: { workspaceId },
    query: { ...rest, since: new Date(since).toISOString(), until: new Date(until).toISOString() },
  });
  expect(res.response.status, JSON.stringify(res.error)).toBe(200);
  return res.data!;
}

/**
 * The `n`-th usage event of a seed written by hand (then rebuildRollups): its units, tokens and cost spread by `n`,
 * its model `models[n]` in turn, at `at` (ms).
 */
export const seededUsageEvent = (workspaceId: string, access: string, models: readonly string[], n: number, at: number) => ({
  id: newId(),
  workspace_id: workspaceId,
  workspace_access_id: access,
  quota_period_id: newId(),
  kind: 'USAGE',
  units: 1 + ((n * 37) % 900),
  input_tokens: (n * 13) % 500,
  cached_input_tokens: 0,
  output_tokens: (n * 11) % 300,
  cost_micros: 100 + ((n * 53) % 700),
  model: models[n % models.length]!,
  created_at: new Date(at),
});

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

/** A summary's bucket as the API answers it (its sums as numbers or decimal strings). */
export type Bucket = Record<string, unknown> & { start: string; key: string };

/** The hourly summary's buckets added up per local day of each hour's start, in the day summary's order. */
export function byLocalDay(hours: Bucket[], zone: string): Bucket[] {
  const days = new Map<string, Bucket>();
  for (const hour of hours) {
    const date = localDate(new Date(hour.start), zone);
    const start = localMidnight(date.year, date.month, date.day, zone).toISOString();
    const id = `${start} ${hour.key}`;
    const sum = days.get(id);
    if (!sum) {
      days.set(id, { ...hour, start });
      continue;
    }
    for (const [field, value] of Object.entries(hour)) {
      if (field === 'start' || field === 'key') continue;
      const total = BigInt(sum[field] as string | number) + BigInt(value as string | number);
      sum[field] = typeof value === 'number' ? Number(total) : String(total);
    }
  }
  return [...days.values()].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

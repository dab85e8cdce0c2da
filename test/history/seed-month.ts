/**
 * A month of history seeded for the archive's tests (archive.api.test.ts, archive-s3.api.test.ts): `rows`
 * invocations of one workspace, a minute apart from the month's start, each with its usage event (units 1..rows,
 * half of them with a model), of the column types the archive writes (text, bigint, double, JSON, timestamps).
 */
import type { Db } from '../../src/db/database.js';
import { newId } from '../../src/ids.js';

/** Seeds the month; the sum of its usage events' units. */
export async function seedMonth(db: Db, month: Date, rows: number, workspaceId: string): Promise<{ units: bigint }> {
  // The month is made without the history job's short lock timeout: the app under test runs that job as it starts,
  // and its round may hold the tables' locks while the seed asks for them.
  for (const table of ['invocations', 'usage_events']) await db.raw('select nexus_history_month(?, ?)', [table, month]);
  let units = 0n;
  const invocations: Record<string, unknown>[] = [];
  const events: Record<string, unknown>[] = [];
  for (let i = 0; i < rows; i++) {
    const at = new Date(month.getTime() + i * 60_000);
    const id = newId();
    invocations.push({
      id,
      workspace_id: workspaceId,
      workspace_access_id: newId(),
      provider_connection_id: newId(),
      inference_key_id: newId(),
      request_id: `req_${i}`,
      method: 'POST',
      endpoint: '/v1/chat/completions',
      status: i % 7 ? 'SUCCEEDED' : 'UPSTREAM_ERROR',
      metering_status: 'metered',
      started_at: at,
      quota_units: BigInt(i) * 1_000_000_000n,
      total_latency_ms: i / 3,
      error_message: i % 7 ? null : 'upstream said "no"',
      attempts: JSON.stringify([{ n: i, model: 'gpt-4o' }]),
    });
    units += BigInt(i + 1);
    events.push({
      id: newId(),
      workspace_id: workspaceId,
      workspace_access_id: newId(),
      quota_period_id: newId(),
      invocation_id: id,
      kind: 'USAGE',
      units: BigInt(i + 1),
      created_at: at,
      model: i % 2 ? 'gpt-4o' : null,
    });
  }
  await db('invocations').insert(invocations);
  await db('usage_events').insert(events);
  return { units };
}

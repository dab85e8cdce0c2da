/**
 * A summary by day in the workspace's zone by access or by key, where a bucket's whole day is several rows of the day
 * rollup (an access's keys; by key, the rows without a key of every access): the statement passes those rows on as
 * they are and the reader adds them up (usage-summary-sql.ts's byDayBucketsSql, adjacent-sums.ts). Through HTTP, over
 * random ranges, getUsageSummary by day equals the hourly summary's hours added up per local day, and
 * exportUsageSummary's lines (on PostgreSQL made by the statement itself, a line per day row, the lines of a bucket of
 * several rows added up by the process: adjacent-sums.ts's repeatsKey and mergeLines) are the day summary's buckets,
 * with buckets of negative sums among them, in UTC and in a DST zone. The export fails them with the lines left
 * apart, and with a negative sum's apostrophe left out of the added lines.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { rebuildWorkspaceDays, ROLLUP_SUMS } from '../../src/domain/recording/rollup-sql.js';
import type { UsageBucketDto } from '../../generated/client/types.gen.js';
import { getUsageSummary, updateWorkspace } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, type Tenant } from '../gateway/gateway-support.js';
import { prng } from '../support/prng.js';
import { byLocalDay, rebuildRollups, usageCsvCells, type Bucket } from '../support/usage-rollups.js';
import { usageSummary, usageSummarySumBatches } from '../../src/domain/invocations/usage-summary-repo.js';
import { UsageDayCache } from '../../src/domain/invocations/usage-days.js';
import { usageSumLines } from '../../src/handlers/money/csv.js';

let t: TestApp;
let upstream: FakeUpstream;
let tenant: Tenant;
let refunds: Tenant;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** The events span New York's spring DST change (March 8, 2026). */
const FROM = Date.parse('2026-03-02T00:00:00Z');
const TO = Date.parse('2026-03-12T00:00:00Z');
const MODELS = ['gpt-a', 'gpt-b', 'gpt-c'];
const ACCESSES = Array.from({ length: 3 }, () => newId());

const SEED = Number(process.env.DAY_BUCKET_ROWS_SEED ?? 20261207);
const rand = prng(SEED);

beforeAll(async () => {
  t = await startTestApp();
  const key = testProviderKey('day-bucket-rows');
  upstream = await startOpenAiUpstream({ apiKey: key });
  tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: key });
  const db = t.database.db;
  const events = Array.from({ length: 900 }, () => ({
    id: newId(),
    workspace_id: tenant.workspaceId,
    workspace_access_id: ACCESSES[Math.floor(rand() * ACCESSES.length)]!,
    quota_period_id: newId(),
    kind: 'USAGE',
    units: 1 + Math.floor(rand() * 1000),
    input_tokens: Math.floor(rand() * 500),
    cached_input_tokens: 0,
    output_tokens: Math.floor(rand() * 300),
    cost_micros: Math.floor(rand() * 9000),
    model: MODELS[Math.floor(rand() * MODELS.length)]!,
    created_at: new Date(FROM + Math.floor(rand() * (TO - FROM))),
  }));
  await db.batchInsert('usage_events', events, 500);
  await rebuildRollups(db, tenant.workspaceId);
  // Each access's calls of two models under a key of its own (one per access and model), those of the third under
  // none: an access has up to three rows a day, and the rows without a key are one per access.
  await db.raw(
    `update usage_rollups
        set inference_key_id = case when model = 'gpt-c' then '' else md5(workspace_access_id::text || model)::uuid::text end
      where workspace_id = ?`,
    [tenant.workspaceId],
  );
  await db('usage_key_rollups').where({ workspace_id: tenant.workspaceId }).delete();
  await db.raw(
    `insert into usage_key_rollups (workspace_id, hour, workspace_access_id, inference_key_id, ${ROLLUP_SUMS.join(', ')})
     select workspace_id, hour, workspace_access_id, inference_key_id, ${ROLLUP_SUMS.map((s) => `sum(${s})`).join(', ')}
       from usage_rollups where workspace_id = ?
      group by workspace_id, hour, workspace_access_id, inference_key_id`,
    [tenant.workspaceId],
  );
  await rebuildWorkspaceDays(db, tenant.workspaceId, 'UTC');
  // Another workspace, with refunds of one access (negative units, tokens and cost): buckets with negative sums, which
  // the export writes as text cells (a leading apostrophe), the counts as numbers. The Admin API's contract has no
  // negative sum, so it is read from the repository here.
  refunds = await createTenant(t, { baseUrl: upstream.url, providerKey: key });
  const negative = events.slice(0, 60).map((event, n) => ({
    ...event,
    id: newId(),
    workspace_id: refunds.workspaceId,
    kind: n % 3 ? 'USAGE' : 'ADJUSTMENT',
    units: n % 3 ? event.units : -5000 - n,
    input_tokens: n % 3 ? event.input_tokens : -900,
    cost_micros: n % 3 ? event.cost_micros : -20_000,
    workspace_access_id: n % 3 ? event.workspace_access_id : ACCESSES[0]!,
  }));
  await db.batchInsert('usage_events', negative, 500);
  await rebuildRollups(db, refunds.workspaceId);
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

/** Sets the workspace's zone: its day rollups are made again from its hourly rows, with their keys. */
async function setZone(zone: string) {
  const res = await updateWorkspace({ client: t.client, path: { workspaceId: tenant.workspaceId }, body: { timeZone: zone } });
  expect(res.response.status).toBe(200);
}

function queryOf(granularity: 'hour' | 'day', since: number, until: number, timeZone: string, groupBy: 'access' | 'key') {
  return { since: new Date(since).toISOString(), until: new Date(until).toISOString(), granularity, groupBy, timeZone };
}

async function summary(query: ReturnType<typeof queryOf>) {
  const res = await getUsageSummary({ client: t.client, path: { workspaceId: tenant.workspaceId }, query });
  expect(res.response.status, JSON.stringify(res.error)).toBe(200);
  return res.data!.buckets as unknown as Bucket[];
}

/** A cell as the exports write one (src/handlers/money/csv.ts): a negative sum's text with a leading apostrophe. */
const cell = (value: string | number) => (typeof value === 'string' && /^[=+\-@\t\r]/.test(value) ? `'${value}` : String(value));
const line = (b: Bucket) =>
  usageCsvCells(b as unknown as UsageBucketDto)
    .map(cell)
    .join(',') + '\r\n';

async function exported(query: ReturnType<typeof queryOf>): Promise<string> {
  const res = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary/export?${new URLSearchParams(query)}`, {
    headers: { authorization: `Bearer ${t.config.managementKey}` },
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  return text.slice(text.indexOf('\r\n') + 2);
}

describe('a bucket of several day rows (an access’s keys, the accesses’ rows without a key)', () => {
  it('the day rollup holds several rows of a day and access, and of a day without a key', async () => {
    const rows: { n: string }[] = await t.database
      .db('usage_day_key_rollups')
      .where({ workspace_id: tenant.workspaceId })
      .groupBy('day', 'workspace_access_id')
      .select(t.database.db.raw('count(*) as n'));
    expect(rows.some((r) => Number(r.n) > 2)).toBe(true);
    const keyless: { n: string }[] = await t.database
      .db('usage_day_key_rollups')
      .where({ workspace_id: tenant.workspaceId, inference_key_id: '' })
      .groupBy('day')
      .select(t.database.db.raw('count(*) as n'));
    expect(keyless.some((r) => Number(r.n) > 1)).toBe(true);
  });

  for (const zone of ['UTC', 'America/New_York']) {
    it(`${zone}: by access and by key, the day summary equals the hours added up per day, and the export its buckets`, async () => {
      await setZone(zone);
      for (let i = 0; i < 8; i++) {
        const since = i === 0 ? FROM : FROM - DAY + Math.floor(rand() * (TO - FROM));
        const until = i === 0 ? TO : Math.min(since + DAY + Math.floor(rand() * 9 * DAY), TO + DAY);
        const groupBy = (['access', 'key'] as const)[i % 2]!;
        const days = queryOf('day', since, until, zone, groupBy);
        const [buckets, hours] = await Promise.all([summary(days), summary(queryOf('hour', since, until, zone, groupBy))]);
        const name = `${days.since}..${days.until} by ${groupBy} (seed ${SEED})`;
        expect(buckets.length, name).toBeGreaterThan(0);
        expect(buckets, name).toEqual(byLocalDay(hours, zone));
        expect(await exported(days), name).toBe(buckets.map(line).join(''));
      }
    });
  }
});

describe('an export of buckets with negative sums (refunds), by day and user', () => {
  for (const groupBy of ['access', 'key'] as const) {
    it(`by ${groupBy}: a negative sum's cell begins with an apostrophe, a negative count's does not, as the summary's buckets`, async () => {
      const deps = { db: t.database.db, zones: {}, days: new UsageDayCache(0) };
      const query = {
        workspaceId: refunds.workspaceId,
        since: new Date(FROM + 5 * HOUR),
        until: new Date(TO),
        granularity: 'day' as const,
      };
      const asked = { ...query, groupBy, timeZone: 'UTC', workspaceTimeZone: 'UTC' };
      const buckets = await usageSummary(deps, asked);
      expect(buckets.some((b) => b.units.startsWith('-'))).toBe(true);
      let text = '';
      for await (const lines of usageSumLines([], await usageSummarySumBatches(deps, asked, 7, 'USD'), 'USD')) text += lines.toString();
      expect(text.slice(2)).toBe(buckets.map((b) => line(b as unknown as Bucket)).join(''));
      expect(text).toMatch(/,'-[0-9]+,/);
    });
  }
});

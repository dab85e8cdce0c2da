/**
 * exportUsageSummary through HTTP, its lines written from the database's sums as they come: each bucket of the
 * summary as a line, the texts a spreadsheet would read as a formula with a leading apostrophe, and the texts with a
 * quote, comma or line break quoted (the exports' CSV rules, src/handlers/money/csv.ts), by model
 * and by user, by hour and by day in the workspace's zone and in another.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { getUsageSummary } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, type Tenant } from '../gateway/gateway-support.js';
import type { UsageBucketDto } from '../../generated/client/types.gen.js';
import { rebuildRollups, seededUsageEvent, usageCsvCells } from '../support/usage-rollups.js';

let t: TestApp;
let upstream: FakeUpstream;
let tenant: Tenant;

const HOUR = 3_600_000;
const FROM = Date.parse('2026-04-01T00:00:00Z');
const TO = Date.parse('2026-04-04T00:00:00Z');
const ACCESSES = Array.from({ length: 4 }, () => newId());
/** Models as a provider may name them: plain, and texts a spreadsheet would misread or a CSV would split. */
const MODELS = ['gpt-4o', '=SUM(A1)', 'a,"b"', '-x,y', '@home', 'line\nbreak', '+1'];

beforeAll(async () => {
  t = await startTestApp();
  const key = testProviderKey('usage-export-cells');
  upstream = await startOpenAiUpstream({ apiKey: key });
  tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: key });
  const events = Array.from({ length: 300 }, (_, n) =>
    seededUsageEvent(
      tenant.workspaceId,
      ACCESSES[n % ACCESSES.length]!,
      MODELS,
      n,
      FROM + Math.floor(((n * 7919) % 300) * ((TO - FROM) / 300)),
    ),
  );
  await t.database.db.batchInsert('usage_events', events, 500);
  await rebuildRollups(t.database.db, tenant.workspaceId);
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

/** A cell as the exports write one (src/handlers/money/csv.ts). */
function cell(value: string | number): string {
  if (typeof value !== 'string') return String(value);
  const text = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

const line = (b: UsageBucketDto) => usageCsvCells(b).map(cell).join(',') + '\r\n';

describe("exportUsageSummary's lines", () => {
  it.each([
    ['model', 'hour', 'UTC'],
    ['model', 'day', 'UTC'],
    ['model', 'day', 'Asia/Tokyo'],
    ['access', 'hour', 'UTC'],
    ['access', 'day', 'UTC'],
    ['key', 'hour', 'UTC'],
  ] as const)(
    'by %s by %s in %s: a line per bucket of the summary, each cell as the CSV rules write it',
    async (groupBy, granularity, timeZone) => {
      const query = {
        since: new Date(FROM + 5 * HOUR).toISOString(),
        until: new Date(TO - 3 * HOUR).toISOString(),
        granularity,
        groupBy,
        timeZone,
      };
      const summary = await getUsageSummary({ client: t.client, path: { workspaceId: tenant.workspaceId }, query });
      expect(summary.response.status).toBe(200);
      const buckets = summary.data!.buckets;
      expect(buckets.length).toBeGreaterThan(3);
      const res = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary/export?${new URLSearchParams(query)}`, {
        headers: { authorization: `Bearer ${t.config.managementKey}` },
      });
      expect(res.status).toBe(200);
      const text = await res.text();
      const header = text.slice(0, text.indexOf('\r\n') + 2);
      expect(header.startsWith('start,key,units,')).toBe(true);
      expect(text.slice(header.length)).toBe(buckets.map(line).join(''));
    },
  );

  it('writes the models a spreadsheet would misread with an apostrophe, and quotes those a CSV would split', async () => {
    const query = {
      since: new Date(FROM).toISOString(),
      until: new Date(TO).toISOString(),
      granularity: 'day',
      groupBy: 'model',
      timeZone: 'UTC',
    };
    const res = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary/export?${new URLSearchParams(query)}`, {
      headers: { authorization: `Bearer ${t.config.managementKey}` },
    });
    const text = await res.text();
    // The keys of the first day's lines, as written (the key is the second cell; a quoted one may hold a comma).
    for (const written of [`,'=SUM(A1),`, `,"a,""b""",`, `,"'-x,y",`, `,'@home,`, `,"line\nbreak",`, `,'+1,`, `,gpt-4o,`]) {
      expect(text, written).toContain(`2026-04-01T00:00:00.000Z${written}`);
    }
    // As many usage events as the database holds in the range, summed over the lines.
    const events = (await t.database.db('usage_events').where({ workspace_id: tenant.workspaceId }).count('* as n').first()) as {
      n: string;
    };
    const summary = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { ...query, granularity: 'day', groupBy: 'model' },
    });
    expect(summary.data!.buckets.reduce((n, b) => n + b.events, 0)).toBe(Number(events.n));
    expect(text.slice(text.indexOf('\r\n') + 2)).toBe(summary.data!.buckets.map(line).join(''));
  });
});

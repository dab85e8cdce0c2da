/**
 * getUsageSummary's days in the operator's time zone: the hourly rollups summed from local midnight to local
 * midnight, events placed at chosen times around UTC midnight.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { rebuildWorkspaceRollupsSql } from '../../src/domain/recording/rollup-sql.js';
import { getUsageSummary } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { createTenant, type Tenant } from '../gateway/gateway-support.js';

let t: TestApp;
let upstream: FakeUpstream;
let tenant: Tenant;

/** Units 1, 2, 4, ... so that a bucket's sum says which events it holds. */
const EVENTS: [at: string, units: number][] = [
  ['2026-02-28T23:30:00Z', 1],
  ['2026-03-01T03:30:00Z', 2],
  ['2026-03-01T06:00:00Z', 4],
  ['2026-03-01T16:00:00Z', 8],
  // 00:10 on March 2 in Kolkata (UTC+5:30), but its hour, 18:00 UTC, starts at 23:30 on March 1.
  ['2026-03-01T18:40:00Z', 16],
  ['2026-03-01T19:10:00Z', 32],
];

beforeAll(async () => {
  t = await startTestApp();
  const key = testProviderKey('summary-tz');
  upstream = await startOpenAiUpstream({ apiKey: key });
  tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: key });
  // Usage events written as the gateway writes them, at chosen times (the gateway stamps its own clock's).
  await t.database.db('usage_events').insert(
    EVENTS.map(([at, units]) => ({
      id: newId(),
      workspace_id: tenant.workspaceId,
      workspace_access_id: tenant.accessId,
      quota_period_id: newId(),
      kind: 'USAGE',
      units,
      input_tokens: 0,
      cached_input_tokens: 0,
      output_tokens: 0,
      model: 'gpt-tz',
      created_at: new Date(at),
    })),
  );
  await t.database.db.raw(rebuildWorkspaceRollupsSql(':workspaceId'), { workspaceId: tenant.workspaceId });
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

async function days(timeZone: string | undefined, range = { since: '2026-02-28T00:00:00Z', until: '2026-03-03T00:00:00Z' }) {
  const res = await getUsageSummary({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    query: { ...range, granularity: 'day', groupBy: 'model', ...(timeZone ? { timeZone } : {}) },
  });
  expect(res.response.status).toBe(200);
  return { summary: res.data!, days: res.data!.buckets.map((b) => [b.start, b.units]) };
}

describe('getUsageSummary by day in a time zone', () => {
  it('UTC by default: days from UTC midnight, and the answer says the zone', async () => {
    const { summary, days: rows } = await days(undefined);
    expect(summary.timeZone).toBe('UTC');
    expect(rows).toEqual([
      ['2026-02-28T00:00:00.000Z', '1'],
      ['2026-03-01T00:00:00.000Z', '62'],
    ]);
  });

  it('America/New_York (UTC-5 in March): the calls before 05:00 UTC are the day before', async () => {
    const { summary, days: rows } = await days('America/New_York');
    expect(summary.timeZone).toBe('America/New_York');
    expect(rows).toEqual([
      ['2026-02-28T05:00:00.000Z', '3'],
      ['2026-03-01T05:00:00.000Z', '60'],
    ]);
  });

  it('Asia/Tokyo (UTC+9): the calls from 15:00 UTC are the next day', async () => {
    const { summary, days: rows } = await days('Asia/Tokyo');
    expect(summary.timeZone).toBe('Asia/Tokyo');
    expect(rows).toEqual([
      ['2026-02-28T15:00:00.000Z', '7'],
      ['2026-03-01T15:00:00.000Z', '56'],
    ]);
  });

  it('Asia/Kolkata (UTC+5:30): an hour counts in the local day its start falls in', async () => {
    const { days: rows } = await days('Asia/Kolkata');
    expect(rows).toEqual([
      // Local midnight is 18:30 UTC: the 18:40 event's hour began at 23:30 local, so it is March 1's.
      ['2026-02-28T18:30:00.000Z', '31'],
      ['2026-03-01T18:30:00.000Z', '32'],
    ]);
  });

  it('keeps the range rule: whole UTC hours, since down and until up; a day may start before since', async () => {
    const { summary, days: rows } = await days('Asia/Tokyo', { since: '2026-03-01T03:45:00Z', until: '2026-03-01T16:20:00Z' });
    expect(summary).toMatchObject({ since: '2026-03-01T03:00:00.000Z', until: '2026-03-01T17:00:00.000Z', timeZone: 'Asia/Tokyo' });
    // The 03:30 event is in (its hour is), the 18:40 one is not.
    expect(rows).toEqual([
      ['2026-02-28T15:00:00.000Z', '6'],
      ['2026-03-01T15:00:00.000Z', '8'],
    ]);
  });

  it('hour buckets do not depend on the zone', async () => {
    const get = (timeZone: string) =>
      getUsageSummary({
        client: t.client,
        path: { workspaceId: tenant.workspaceId },
        query: { since: '2026-02-28T00:00:00Z', until: '2026-03-03T00:00:00Z', granularity: 'hour', timeZone },
      });
    const [tokyo, utc] = await Promise.all([get('Asia/Tokyo'), get('UTC')]);
    expect(tokyo.data!.buckets).toEqual(utc.data!.buckets);
    expect(tokyo.data!.buckets.map((b) => b.start)[0]).toBe('2026-02-28T23:00:00.000Z');
  });

  it('refuses an unknown zone with a 400 naming timeZone', async () => {
    const get = async (query: string) => {
      const res = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary?granularity=day&${query}`, {
        headers: { authorization: `Bearer ${TEST_ROOT_KEY}` },
      });
      return { status: res.status, error: ((await res.json()) as { error: { message: string; param: string; code: string } }).error };
    };
    const unknown = await get('timeZone=Mars/Olympus_Mons');
    expect(unknown).toMatchObject({ status: 400, error: { param: 'timeZone', code: 'invalid_parameter' } });
    expect(unknown.error.message).toContain('Mars/Olympus_Mons');
    // Not an IANA name, though some parsers read it as an offset.
    expect(await get(`timeZone=${encodeURIComponent('+05:30')}`)).toMatchObject({ status: 400, error: { param: 'timeZone' } });
    expect(await get(`timeZone=${'A'.repeat(65)}`)).toMatchObject({ status: 400, error: { param: 'timeZone' } });
    expect(await get('timeZone=')).toMatchObject({ status: 400, error: { param: 'timeZone' } });
  });
});

describe('exportUsageSummary by day in a time zone', () => {
  const csv = async (query: string) => {
    const res = await t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary/export?${query}`, {
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}` },
    });
    return { status: res.status, body: await res.text() };
  };

  it('sums the same local days as the summary', async () => {
    const res = await csv('since=2026-02-28T00:00:00Z&until=2026-03-03T00:00:00Z&granularity=day&timeZone=America/New_York');
    expect(res.status).toBe(200);
    const rows = res.body
      .trim()
      .split(/\r?\n/)
      .slice(1)
      .map((line) => line.split(',').slice(0, 3));
    expect(rows).toEqual([
      ['2026-02-28T05:00:00.000Z', 'gpt-tz', '3'],
      ['2026-03-01T05:00:00.000Z', 'gpt-tz', '60'],
    ]);
  });

  it('refuses an unknown zone with a 400 naming timeZone', async () => {
    const res = await csv('since=2026-02-28T00:00:00Z&until=2026-03-03T00:00:00Z&timeZone=Nowhere/Else');
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ error: { param: 'timeZone' } });
  });
});

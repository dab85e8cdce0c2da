/**
 * The CSV exports (docs/pricing.md "Exports"): invocations and usage summaries over a time range, streamed. 100,000
 * invocations stream with flat memory: the live heap (measured after a forced collection, every few chunks) stays
 * far below the size of the file while it is read. A usage summary's range is capped, and a process streams a bounded
 * number of exports at once.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_MARKER } from '../security/secret-marker.js';
import { createModelPrice, getUsageSummary } from '../support/sdk.js';
import { startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { usageCsvCells } from '../support/usage-rollups.js';
import { createTenant, openAiFor, until, type Tenant } from '../gateway/gateway-support.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

let t: TestApp;
let upstream: FakeUpstream;
let tenant: Tenant;
const KEY = `${SECRET_MARKER}-export-openai-0123456789`;
const ROWS = Number(process.env.EXPORT_ROWS ?? 100_000);

beforeAll(async () => {
  t = await startTestApp();
  upstream = await startOpenAiUpstream({ apiKey: KEY });
  tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: KEY });
  await createModelPrice({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: {
      modelPattern: 'gpt-4o*',
      inputPerMillion: '2.5',
      outputPerMillion: '10',
      effectiveFrom: new Date(Date.now() - 3_600_000).toISOString(),
    },
  });
  await openAiFor(tenant, { 'x-fake-usage': '1000,500,0' }).chat.completions.create({
    model: 'gpt-4o',
    messages: [{ role: 'user', content: '=cmd|"a,b"' }],
    max_tokens: 20,
  });
  await t.nexus.gateway.drain();
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
});

const auth = () => ({ authorization: `Bearer ${t.config.managementKey}` });

describe('exportInvocations', () => {
  it('lists each invocation with its tokens and cost, as CSV', async () => {
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const until = new Date(Date.now() + 60_000).toISOString();
    const res = await t.fetch(
      `${t.url}/admin/v1/workspaces/${tenant.workspaceId}/invocations/export?since=${encodeURIComponent(since)}&until=${encodeURIComponent(until)}`,
      { headers: auth() },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    const lines = (await res.text()).trimEnd().split('\r\n');
    expect(lines[0]).toBe(
      'id,started_at,completed_at,status,error_code,workspace_access_id,inference_key_id,provider_connection_id,requested_model,upstream_model,quota_units,input_tokens,cached_input_tokens,output_tokens,cost_micros,currency,price_id,total_latency_ms,request_id,user_email,user_external_id,endpoint,error_message,' +
        'audio_input_tokens,audio_output_tokens,image_input_tokens,image_output_tokens,images,audio_ms,characters,image_tier',
    );
    expect(lines).toHaveLength(2);
    const cells = lines[1]!.split(',');
    expect(cells[3]).toBe('SUCCEEDED');
    expect(cells[8]).toBe('gpt-4o');
    // 1000 * 2.5 + 500 * 10.
    expect(cells.slice(11, 16)).toEqual(['1000', '0', '500', '7500', 'USD']);
  });

  it('refuses a range that ends before it starts, naming the field', async () => {
    const res = await t.fetch(
      `${t.url}/admin/v1/workspaces/${tenant.workspaceId}/invocations/export?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z`,
      { headers: auth() },
    );
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe('since');
  });

  it('streams 100,000 invocations with flat memory', async () => {
    // 100,000 copies of the call's invocation, a millisecond apart, on 2026-01-05.
    const ids: { id: string }[] = await t.database.db('invocations').where({ workspace_id: tenant.workspaceId }).select('id');
    const first = ids[0];
    const columns = Object.keys((await t.database.db('invocations').where({ id: first!.id }).first()) as object);
    const copied: Record<string, string> = {
      id: `md5('export' || g)::uuid`,
      request_id: `'export-' || g`,
      attempt_id: `md5('attempt' || g)::uuid`,
      started_at: `timestamptz '2026-01-05T00:00:00Z' + g * interval '1 millisecond'`,
    };
    await t.database.db.raw(
      `insert into invocations (${columns.join(', ')})
       select ${columns.map((c) => copied[c] ?? `i.${c}`).join(', ')}
         from invocations i, generate_series(1, ?) g
        where i.id = ?`,
      [ROWS, first!.id],
    );
    // As autovacuum would after such an insert: without statistics the planner takes the 100,000 rows for one and
    // sorts what is left of them for each page of the export (a second per 20 pages), instead of reading the
    // (workspace_id, id) index in order.
    await t.database.db.raw('analyze invocations');
    gc();
    const baseline = process.memoryUsage().heapUsed;
    const res = await fetch(
      `${t.url}/admin/v1/workspaces/${tenant.workspaceId}/invocations/export?since=2026-01-05T00:00:00Z&until=2026-01-06T00:00:00Z`,
      { headers: auth() },
    );
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let bytes = 0;
    let lines = 0;
    let chunks = 0;
    let peak = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      for (const b of value) if (b === 10) lines++;
      if (++chunks % 50 === 0) {
        gc();
        peak = Math.max(peak, process.memoryUsage().heapUsed - baseline);
      }
    }
    expect(lines).toBe(ROWS + 1);
    // The file is about 28 MB; what is live while it streams is a page or two of rows.
    expect(bytes).toBeGreaterThan(25_000_000);
    expect(peak).toBeLessThan(16 * 1024 * 1024);
  }, 240_000);
});

describe('exportUsageSummary', () => {
  it("holds the summary's buckets with their cost, as CSV", async () => {
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const until = new Date(Date.now() + 60_000).toISOString();
    const summary = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { since, until, granularity: 'hour' },
    });
    const res = await t.fetch(
      `${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary/export?since=${encodeURIComponent(since)}&until=${encodeURIComponent(until)}&granularity=hour`,
      { headers: auth() },
    );
    expect(res.status).toBe(200);
    const lines = (await res.text()).trimEnd().split('\r\n');
    expect(lines[0]).toBe(
      'start,key,units,input_tokens,cached_input_tokens,output_tokens,events,cost_micros,unpriced_events,calls,failed_calls,refused_calls,currency,audio_input_tokens,audio_output_tokens,image_input_tokens,image_output_tokens,images,audio_ms,characters',
    );
    expect(lines.slice(1)).toEqual(summary.data!.buckets.map((b) => usageCsvCells(b).join(',')));
    expect(lines.slice(1).some((l) => l.includes(',7500,'))).toBe(true);
  });
});

describe('exportUsageSummary’s range', () => {
  const exportOf = (query: string) =>
    t.fetch(`${t.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary/export?${query}`, { headers: auth() });

  it.each([
    ['years 0001 to 9999 by hour', 'since=0001-01-01T00:00:00Z&until=9999-12-31T00:00:00Z&granularity=hour'],
    ['a leap year and an hour by hour', 'since=2028-01-01T00:00:00Z&until=2029-01-01T01:00:00Z&granularity=hour'],
    ['25 years by day', 'since=2026-01-01T00:00:00Z&until=2051-01-01T00:00:00Z&granularity=day'],
  ])('of %s is refused with 400, naming since', async (_name, query) => {
    const res = await exportOf(query);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 'invalid_parameter', param: 'since', type: 'invalid_request_error' } });
  });

  it('of a year by hour (8784 buckets) holds the rows of the hours with usage in it, as the summary does', async () => {
    const at = Date.now();
    const summary = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { since: new Date(at - 3_600_000).toISOString(), until: new Date(at + 3_600_000).toISOString(), granularity: 'hour' },
    });
    expect(summary.data!.buckets.length).toBeGreaterThan(0);
    const hour = Math.floor(at / 3_600_000) * 3_600_000;
    const since = new Date(hour - 200 * 86_400_000).toISOString();
    const until = new Date(hour - 200 * 86_400_000 + 366 * 86_400_000).toISOString();
    const res = await exportOf(`since=${since}&until=${until}&granularity=hour`);
    expect(res.status).toBe(200);
    const rows = (await res.text()).trimEnd().split('\r\n').slice(1);
    expect(rows.map((r) => r.split(',').slice(0, 3))).toEqual(summary.data!.buckets.map((b) => [b.start, b.key, b.units]));
    // A range without usage: the header alone.
    const empty = await exportOf('since=2020-01-01T00:00:00Z&until=2020-12-31T00:00:00Z&granularity=hour');
    expect(empty.status).toBe(200);
    expect((await empty.text()).trimEnd().split('\r\n')).toHaveLength(1);
  });
});

describe('exports at once', () => {
  it('past NEXUS_EXPORTS_AT_ONCE a process answers 503 exports_busy with Retry-After, and takes them again once one ends', async () => {
    const one = await t.withEnv({ NEXUS_EXPORTS_AT_ONCE: '1' });
    const usageExport = (signal?: AbortSignal) =>
      one.fetch(
        `${one.url}/admin/v1/workspaces/${tenant.workspaceId}/usage-summary/export?since=2026-01-01T00:00:00Z&until=2026-06-01T00:00:00Z`,
        { headers: auth(), ...(signal ? { signal } : {}) },
      );
    const invocationsExport = () =>
      one.fetch(`${one.url}/admin/v1/workspaces/${tenant.workspaceId}/invocations/export?since=2026-01-01T00:00:00Z`, {
        headers: auth(),
      });
    // Once first, so that the next one goes straight to its reads (the zones and the key are known).
    const warm = await usageExport();
    expect(warm.status).toBe(200);
    await warm.text();
    // The rollup locked by the test: an export reads it, and waits, holding its slot.
    const lock = await t.database.db.transaction();
    try {
      await lock.raw('lock table usage_rollups in access exclusive mode');
      const cut = new AbortController();
      const first = usageExport(cut.signal).catch((err: Error) => err);
      // The export's own read waits (the lease sweeper's writes wait on the lock too).
      await until(async () => {
        const waiting = await t.database.db.raw(
          `select 1 from pg_locks l join pg_stat_activity a on a.pid = l.pid
            where l.relation = to_regclass('usage_rollups') and not l.granted and a.query like '%min("hour")%'`,
        );
        return waiting.rows.length > 0;
      });
      for (const refused of [await usageExport(), await invocationsExport()]) {
        expect(refused.status).toBe(503);
        expect(refused.headers.get('retry-after')).toBe('5');
        expect(await refused.json()).toMatchObject({ error: { code: 'exports_busy', type: 'api_error' } });
      }
      // Its client goes: the export's slot comes back once it has read (the answer it would have written is dropped).
      cut.abort();
      expect(await first).toBeInstanceOf(Error);
      await lock.commit();
      await until(async () => {
        const res = await usageExport();
        await res.text();
        return res.status === 200;
      });
      // One that ran to its end gave its slot back too.
      const next = await invocationsExport();
      expect(next.status).toBe(200);
      expect((await next.text()).length).toBeGreaterThan(0);
    } finally {
      if (!lock.isCompleted()) await lock.rollback();
      await one.close();
    }
  });
});

/**
 * The record statement (src/domain/recording/record-sql.ts; printed part by part by record-sql.test.ts) for a priced
 * call that crosses a threshold, made through the gateway with the official SDK: every row its parts write (the
 * invocation, the USAGE event priced and the ADJUSTMENT beyond the bound, the rollups, the threshold's mark, its event
 * and its webhook message) is written by the one statement, in one transaction, and the period is charged with them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createModelPrice } from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, openAiFor, periodOf, type Tenant } from '../gateway/gateway-support.js';
import { acceptedOf, endpointFor, startReceiver, type Receiver } from '../events/receiver.js';

const PROVIDER_KEY = testProviderKey('record-sql');

let t: TestApp;
let upstream: FakeUpstream;
let receiver: Receiver;
let tenant: Tenant;

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_EVENTS_POLL_MS: '20' } });
  upstream = await startOpenAiUpstream({ apiKey: PROVIDER_KEY });
  receiver = await startReceiver();
  tenant = await createTenant(t, { baseUrl: upstream.url, providerKey: PROVIDER_KEY, quotaUnits: 1000n });
});
afterAll(async () => {
  await t?.close();
  await upstream?.close();
  await receiver?.close();
});

describe('the record statement, for a priced call crossing a threshold', () => {
  it('writes the invocation, its priced usage, the rollups and the threshold’s event in one statement', async () => {
    const endpoint = await endpointFor(t, tenant.workspaceId, receiver, ['quota.threshold_crossed']);
    const price = await createModelPrice({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        modelPattern: 'gpt-test',
        inputPerMillion: '2.50',
        outputPerMillion: '10',
        effectiveFrom: new Date(Date.now() - 60_000).toISOString(),
      },
    });
    expect(price.response.status).toBe(201);
    // x-fake-usage: input, output, cached tokens; 1 unit per input token: 810 of 1000 units crosses 80%.
    const answer = await openAiFor(tenant, { 'x-fake-usage': '810,0,0' }).chat.completions.create({
      model: 'gpt-test',
      messages: [],
      max_tokens: 5,
    });
    expect(answer.usage?.prompt_tokens).toBe(810);
    await t.nexus.gateway.drain();

    const db = t.database.db;
    const invocation = await db('invocations').where({ workspace_id: tenant.workspaceId }).first();
    expect(invocation).toMatchObject({ status: 'SUCCEEDED', quota_units: 810n });
    const events = await db('usage_events').where({ invocation_id: invocation.id }).orderBy('kind', 'desc');
    expect(events.map((e) => [e.kind, e.cost_micros, e.price_id])).toEqual([
      // 810 input tokens at 2.50 per million: 2025 micro-units, on the USAGE event; the ADJUSTMENT carries units only.
      ['USAGE', 2025n, price.data!.id],
      ['ADJUSTMENT', null, null],
    ]);
    expect(events.reduce((sum, e) => sum + BigInt(e.units), 0n)).toBe(810n);
    const rollup = await db('usage_rollups').where({ workspace_id: tenant.workspaceId }).first();
    expect(rollup).toMatchObject({ units: 810n, cost_micros: 2025n, events: 2n, calls: 1n });
    const mark = await db('quota_threshold_marks').where({ percent: 80 }).join('quota_periods', 'quota_periods.id', 'quota_period_id');
    expect(mark.filter((m) => m.workspace_access_id === tenant.accessId)).toHaveLength(1);
    const event = await db('events').where({ workspace_id: tenant.workspaceId, type: 'quota.threshold_crossed' }).first();
    expect(event.data).toMatchObject({ workspaceAccessId: tenant.accessId, thresholdPercent: 80, consumedUnits: '810' });
    expect(await db('webhook_messages').where({ event_id: event.id, endpoint_id: endpoint.id })).toHaveLength(1);
    expect((await periodOf(t, tenant.accessId)).consumed).toBe(810n);

    // One statement: every row it wrote carries its one transaction's id.
    const writers = await db.raw(
      `select distinct xmin::text as tx from (
         select xmin from invocations where id = :id
         union all select xmin from usage_events where invocation_id = :id
         union all select xmin from usage_rollups where workspace_id = :ws
         union all select xmin from usage_key_rollups where workspace_id = :ws
         union all select m.xmin from quota_threshold_marks m where m.event_id = :event
         union all select xmin from events where id = :event) w`,
      { id: invocation.id, ws: tenant.workspaceId, event: event.id },
    );
    expect(writers.rows).toHaveLength(1);

    const delivered = await acceptedOf(receiver, 'quota.threshold_crossed', 1);
    expect(delivered[0]!.verified!.data).toMatchObject({ thresholdPercent: 80, grantedUnits: '1000', consumedUnits: '810' });
  });
});

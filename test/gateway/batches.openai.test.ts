/**
 * OpenAI's Batch API through the `openai` SDK (docs/batches.md), against a fake upstream that models a batch's
 * lifecycle (test/support/upstreams/batches.ts): 1,000 chat lines uploaded, admitted on one lease, run, settled each
 * at the batch price; bad lines refused before the provider has the file; another access's ids answer 404; a
 * cancelled batch charges only what ran; a poller that dies halfway through the output file leaves the batch to the
 * next, which charges each request once; quota refuses a batch over what remains, and two batches started at once from
 * two processes never overspend.
 */
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createModelPrice } from '../support/sdk.js';
import { startBatchUpstream, usageOfLine, type BatchUpstream } from '../support/upstreams/batches.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, openAiFor, periodOf, type Tenant } from './gateway-support.js';

const KEY = 'sk-batch-upstream-0123456789';
const CAP = 20;
let t: TestApp;
let up: BatchUpstream;
let tenant: Tenant;
/** Told of each chunk charged by the settlement (a test makes it throw: a poller that dies). */
let charged: (batchId: string, requests: number) => void = () => {};

const line = (i: number, body: Record<string, unknown> = {}) =>
  JSON.stringify({
    custom_id: `req-${i}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `question ${i}` }], max_tokens: CAP, ...body },
  });

const fileOf = (lines: string[]) => toFile(Buffer.from(lines.join('\n') + '\n'), 'batch.jsonl', { type: 'application/jsonl' });
const linesOf = (count: number) => Array.from({ length: count }, (_, i) => line(i));

/** A batch uploaded and created through the SDK. */
async function startBatch(client: OpenAI, count: number) {
  const file = await client.files.create({ file: await fileOf(linesOf(count)), purpose: 'batch' });
  return client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
}

/** The units and cost the batch's requests are charged: per line, input + 2 x output; cost at half the price (1 and 4 per million). */
function expectedOf(count: number) {
  let units = 0n;
  let cost = 0n;
  for (let i = 0; i < count; i++) {
    const u = usageOfLine(i, CAP);
    units += BigInt(u.input + 2 * u.output);
    cost += BigInt(Math.round((u.input + 4 * u.output) / 2));
  }
  return { units, cost };
}

/** The settlement's clock: each round a quarter of an hour after the last (past any poll's wait and any claim). */
let clockMs = Date.now();
const settle = () => t.nexus.batches.settle(new Date((clockMs += 15 * 60_000)));

async function batchRow(upstreamId: string) {
  return t.database.db('batches').where({ upstream_batch_id: upstreamId }).first();
}

beforeAll(async () => {
  t = await startTestApp({ batchSettlement: { chunk: 100, charged: (id, n) => charged(id, n) } });
  up = await startBatchUpstream(KEY);
  tenant = await createTenant(t, {
    baseUrl: up.url,
    providerKey: KEY,
    maxOutputTokens: CAP,
    users: 2,
    quotaUnits: 10_000_000n,
    allowedModels: ['gpt-4o-mini'],
  });
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
  const price = await createModelPrice({
    client: t.client,
    path: { workspaceId: tenant.workspaceId },
    body: { modelPattern: 'gpt-4o-mini', inputPerMillion: '1', outputPerMillion: '4', effectiveFrom: hourAgo },
  });
  expect(price.response.status).toBe(201);
}, 60_000);

afterAll(async () => {
  await t?.close();
  await up?.close();
});

describe('OpenAI batches through the openai SDK', () => {
  it('uploads 1,000 lines, admits the batch on one lease at its bound, settles each line at the batch price', async () => {
    const client = openAiFor(tenant);
    const before = await periodOf(t, tenant.accessId);
    const batch = await startBatch(client, 1000);
    expect(batch.status).toBe('in_progress');
    const row = await batchRow(batch.id);
    expect(row.requests).toBe(1000);
    // One lease holds the whole bound.
    const lease = await t.database.db('quota_leases').where({ id: row.lease_id }).first();
    expect(lease.status).toBe('HELD');
    expect(BigInt(lease.reserved_units)).toBe(BigInt(row.bound_units));
    expect((await periodOf(t, tenant.accessId)).reserved - before.reserved).toBe(BigInt(row.bound_units));

    expect(await settle()).toBe(1);
    expect((await batchRow(batch.id)).status).toBe('OPEN');
    up.run(batch.id);
    await settle();
    const done = await client.batches.retrieve(batch.id);
    expect(done.status).toBe('completed');
    const output = await (await client.files.content(done.output_file_id!)).text();
    expect(output.trim().split('\n')).toHaveLength(1000);

    const { units, cost } = expectedOf(1000);
    const settled = await batchRow(batch.id);
    expect(settled).toMatchObject({ status: 'SETTLED', settled_requests: 1000, upstream_status: 'completed' });
    expect(BigInt(settled.settled_units)).toBe(units);
    expect(BigInt(settled.cost_micros)).toBe(cost);
    const events = await t.database.db('usage_events').where({ lease_id: settled.lease_id });
    expect(events).toHaveLength(1000);
    const first = usageOfLine(0, CAP);
    const one = events.find((e: { input_tokens: bigint }) => BigInt(e.input_tokens) === BigInt(first.input))!;
    expect(BigInt(one.cost_micros)).toBe(BigInt(Math.round((first.input + 4 * first.output) / 2)));
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed - before.consumed).toBe(units);
    expect(after.reserved).toBe(before.reserved);
    const invocation = await t.database.db('invocations').where({ id: settled.invocation_id }).first();
    expect(invocation).toMatchObject({ status: 'SUCCEEDED', endpoint: 'v1/batches', requested_model: 'gpt-4o-mini' });
    expect(BigInt(invocation.quota_units)).toBe(units);
    // batch.completed, for the webhook endpoints that want it.
    const event = await t.database.db('events').where({ workspace_id: tenant.workspaceId, type: 'batch.completed' }).first();
    expect(event.data).toMatchObject({
      batchId: batch.id,
      invocationId: settled.invocation_id,
      status: 'completed',
      requests: 1000,
      settledRequests: 1000,
      settledUnits: `${units}`,
      costMicros: `${cost}`,
    });
  });

  it('refuses a bad line with 400 naming it, before the provider has the file', async () => {
    const client = openAiFor(tenant);
    const uploaded = up.files.length;
    const cases: [string[], RegExp][] = [
      [[line(0), line(1), '{not json'], /line 3: not JSON/],
      [[line(0), line(1, { model: 'gpt-4o' })], /line 2: the model 'gpt-4o' is not allowed/],
      [[line(0, { max_tokens: CAP + 1 })], /line 1: max_tokens may be at most 20/],
      [[line(0, { max_tokens: undefined })], /line 1: the request names no output cap/],
    ];
    for (const [lines, message] of cases) {
      const err = (await client.files.create({ file: await fileOf(lines), purpose: 'batch' }).catch((e: unknown) => e)) as InstanceType<
        typeof OpenAI.BadRequestError
      >;
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.message).toMatch(message);
    }
    expect(up.files.length).toBe(uploaded);
  });

  it("answers 404 for another access's batch and file, and 409 for a file Nexus did not see", async () => {
    const mine = openAiFor(tenant);
    const other = new OpenAI({ baseURL: tenant.gatewayBaseUrl + '/v1', apiKey: tenant.users[1]!.apiKey, maxRetries: 0 });
    const batch = await startBatch(mine, 3);
    const err = await other.batches.retrieve(batch.id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await other.batches.cancel(batch.id).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await other.files.retrieve(batch.input_file_id).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError);
    const listed = await other.batches.list();
    expect(listed.data.map((b) => b.id)).not.toContain(batch.id);
    expect((await mine.batches.list()).data.map((b) => b.id)).toContain(batch.id);
    const unknown = (await mine.batches
      .create({ input_file_id: 'file-elsewhere', endpoint: '/v1/chat/completions', completion_window: '24h' })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.ConflictError>;
    expect(unknown).toBeInstanceOf(OpenAI.ConflictError);
    expect(unknown.message).toMatch(/was not uploaded through Nexus/);
  });

  it('a cancelled batch settles only the lines that ran; the rest of its lease returns', async () => {
    const client = openAiFor(tenant);
    const before = await periodOf(t, tenant.accessId);
    const batch = await startBatch(client, 100);
    expect((await client.batches.cancel(batch.id)).status).toBe('cancelling');
    up.run(batch.id, 40);
    await settle();
    const row = await batchRow(batch.id);
    expect(row).toMatchObject({ status: 'SETTLED', upstream_status: 'cancelled', settled_requests: 40 });
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed - before.consumed).toBe(expectedOf(40).units);
    expect(after.reserved).toBe(before.reserved);
    expect((await t.database.db('invocations').where({ id: row.invocation_id }).first()).status).toBe('CLIENT_ABORTED');
  });

  it('a poller that dies halfway through the output file leaves the batch to the next claim, each request charged once', async () => {
    const client = openAiFor(tenant);
    const before = await periodOf(t, tenant.accessId);
    const batch = await startBatch(client, 1000);
    up.run(batch.id);
    let chunks = 0;
    charged = () => {
      if (++chunks === 5) throw new Error('the process died');
    };
    await settle();
    charged = () => {};
    const half = await batchRow(batch.id);
    expect(half).toMatchObject({ status: 'OPEN', settled_requests: 500 });
    // Its claim holds it until it expires; then another round finishes it.
    expect(half.next_poll_at.getTime()).toBeGreaterThan(clockMs);
    await t.nexus.batches.settle(new Date(clockMs));
    expect(await batchRow(batch.id)).toMatchObject({ status: 'OPEN', settled_requests: 500 });
    await settle();
    const row = await batchRow(batch.id);
    expect(row).toMatchObject({ status: 'SETTLED', settled_requests: 1000 });
    expect(await t.database.db('usage_events').where({ lease_id: row.lease_id }).count()).toEqual([{ count: 1000n }]);
    expect((await periodOf(t, tenant.accessId)).consumed - before.consumed).toBe(expectedOf(1000).units);
  });
});

describe('batches against quota', () => {
  it('refuses a batch whose bound exceeds what remains, and two at once from two processes never overspend', async () => {
    // A line is bounded at about 20 input tokens and 20 output: some 60 units; 10 lines some 600.
    const small = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: CAP, quotaUnits: 1000n });
    const client = openAiFor(small);
    const big = await client.files.create({ file: await fileOf(linesOf(20)), purpose: 'batch' });
    const err = (await client.batches
      .create({ input_file_id: big.id, endpoint: '/v1/chat/completions', completion_window: '24h' })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.RateLimitError>;
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.message).toMatch(/This batch may need up to \d+ units; 1000 are available/);

    const second = await t.withEnv({});
    try {
      const other = new OpenAI({ baseURL: `${second.url}/providers/${small.connectionId}/v1`, apiKey: small.apiKey, maxRetries: 0 });
      const a = await client.files.create({ file: await fileOf(linesOf(10)), purpose: 'batch' });
      const b = await client.files.create({ file: await fileOf(linesOf(10)), purpose: 'batch' });
      const bound = BigInt((await t.database.db('batch_files').where({ upstream_file_id: a.id }).first()).bound_units);
      expect(bound * 2n).toBeGreaterThan(1000n);
      expect(bound).toBeLessThanOrEqual(1000n);
      const results = await Promise.allSettled([
        client.batches.create({ input_file_id: a.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
        other.batches.create({ input_file_id: b.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
      ]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const refused = results.find((r) => r.status === 'rejected')!;
      expect(refused.reason).toBeInstanceOf(OpenAI.RateLimitError);
      const period = await periodOf(t, small.accessId);
      expect(period.reserved + period.consumed).toBeLessThanOrEqual(period.granted);
    } finally {
      await second.close();
    }
  });
});

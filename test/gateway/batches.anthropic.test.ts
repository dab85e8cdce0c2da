/**
 * Anthropic's Message Batches through `@anthropic-ai/sdk` (docs/batches.md): the requests of messages.batches.create
 * bounded inline and admitted at their sum on one lease, a bad request refused naming it, the batch read through
 * Nexus (its results_url the gateway's), settled at the batch price once it ended, its results() read through the
 * gateway, and another access's batch answering 404; a cancelled batch charges only what ran.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMessageBatchUpstream, usageOfLine, type MessageBatchUpstream } from '../support/upstreams/batches.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { anthropicFor, createTenant, periodOf, type Tenant } from './gateway-support.js';

const KEY = 'sk-ant-batch-upstream-0123456789';
const CAP = 20;
let t: TestApp;
let up: MessageBatchUpstream;
let tenant: Tenant;
let clockMs = Date.now();
const settle = () => t.nexus.batches.settle(new Date((clockMs += 15 * 60_000)));

const requestsOf = (count: number, params: Record<string, unknown> = {}) =>
  Array.from({ length: count }, (_, i) => ({
    custom_id: `req-${i}`,
    params: { model: 'claude-sonnet-4-5', max_tokens: CAP, messages: [{ role: 'user' as const, content: `question ${i}` }], ...params },
  }));

/** Units of the first `count` requests: input + 2 x output. */
const unitsOf = (count: number) =>
  Array.from({ length: count }, (_, i) => usageOfLine(i, CAP)).reduce((sum, u) => sum + BigInt(u.input + 2 * u.output), 0n);

beforeAll(async () => {
  t = await startTestApp();
  up = await startMessageBatchUpstream(KEY);
  tenant = await createTenant(t, { profile: 'anthropic', baseUrl: up.url, providerKey: KEY, maxOutputTokens: CAP, users: 2 });
}, 60_000);

afterAll(async () => {
  await t?.close();
  await up?.close();
});

describe('Anthropic message batches through @anthropic-ai/sdk', () => {
  it('admits the batch at the sum of its requests, settles each, and reads its results through the gateway', async () => {
    const client = anthropicFor(tenant);
    const before = await periodOf(t, tenant.accessId);
    const batch = await client.messages.batches.create({ requests: requestsOf(200) });
    expect(batch.processing_status).toBe('in_progress');
    const row = await t.database.db('batches').where({ upstream_batch_id: batch.id }).first();
    expect(row.requests).toBe(200);
    expect((await periodOf(t, tenant.accessId)).reserved - before.reserved).toBe(BigInt(row.bound_units));

    up.run(batch.id);
    await settle();
    const done = await client.messages.batches.retrieve(batch.id);
    expect(done.processing_status).toBe('ended');
    expect(done.results_url).toBe(`${tenant.gatewayBaseUrl}/v1/messages/batches/${batch.id}/results`);
    let results = 0;
    for await (const result of await client.messages.batches.results(batch.id)) {
      expect(result.result.type).toBe('succeeded');
      results++;
    }
    expect(results).toBe(200);
    const settled = await t.database.db('batches').where({ upstream_batch_id: batch.id }).first();
    expect(settled).toMatchObject({ status: 'SETTLED', settled_requests: 200 });
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed - before.consumed).toBe(unitsOf(200));
    expect(after.reserved).toBe(before.reserved);

    const other = new Anthropic({ baseURL: tenant.gatewayBaseUrl, apiKey: tenant.users[1]!.apiKey, maxRetries: 0 });
    expect(await other.messages.batches.retrieve(batch.id).catch((e: unknown) => e)).toBeInstanceOf(Anthropic.NotFoundError);
  });

  it('refuses a request over the output cap, naming it, before the provider has the batch', async () => {
    const err = (await anthropicFor(tenant)
      .messages.batches.create({ requests: [...requestsOf(2), ...requestsOf(1, { max_tokens: CAP + 1 })] })
      .catch((e: unknown) => e)) as InstanceType<typeof Anthropic.BadRequestError>;
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.message).toMatch(/requests\[2\]: max_tokens may be at most 20/);
  });

  it('a cancelled batch charges only the requests that ran', async () => {
    const client = anthropicFor(tenant);
    const before = await periodOf(t, tenant.accessId);
    const batch = await client.messages.batches.create({ requests: requestsOf(50) });
    expect((await client.messages.batches.cancel(batch.id)).processing_status).toBe('canceling');
    up.run(batch.id, 20);
    await settle();
    const row = await t.database.db('batches').where({ upstream_batch_id: batch.id }).first();
    expect(row).toMatchObject({ status: 'SETTLED', settled_requests: 20, upstream_status: 'cancelled' });
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed - before.consumed).toBe(unitsOf(20));
    expect(after.reserved).toBe(before.reserved);
  });

  it('a batch the provider never ends is given up at its window plus a margin, its lease released, nothing charged', async () => {
    const client = anthropicFor(tenant);
    const before = await periodOf(t, tenant.accessId);
    const batch = await client.messages.batches.create({ requests: requestsOf(10) });
    expect((await periodOf(t, tenant.accessId)).reserved).toBeGreaterThan(before.reserved);
    await t.nexus.batches.settle(new Date(Date.now() + 26 * 3_600_000));
    const row = await t.database.db('batches').where({ upstream_batch_id: batch.id }).first();
    expect(row).toMatchObject({ status: 'SETTLED', upstream_status: 'expired', settled_requests: 0 });
    expect(await periodOf(t, tenant.accessId)).toEqual(before);
    const invocation = await t.database.db('invocations').where({ id: row.invocation_id }).first();
    expect(invocation).toMatchObject({ status: 'FAILED', error_code: 'batch_expired' });
  });
});

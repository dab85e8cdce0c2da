/**
 * Batches beyond the upload and the admission (docs/batches.md), through the official SDKs against fake upstreams:
 * an access's list paged in full pages whatever other accesses made between its batches (the `openai` SDK's
 * auto-pagination, and the `@anthropic-ai/sdk`'s); `batch.completed` delivered to a webhook endpoint, verified with
 * `standardwebhooks`; and a batch through an Azure OpenAI connection (`AzureOpenAI`: Azure's paths, its api-version
 * on every request, the poller's included), uploaded, created and settled.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI, { AzureOpenAI, toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptedOf, endpointFor, startReceiver, type Receiver } from '../events/receiver.js';
import {
  startBatchUpstream,
  startMessageBatchUpstream,
  usageOfLine,
  type BatchUpstream,
  type MessageBatchUpstream,
} from '../support/upstreams/batches.js';
import { changeAccessPlan } from '../support/sdk.js';
import { activePlan } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { anthropicFor, createTenant, invocationByRequestId, openAiFor, periodOf, type Tenant } from './gateway-support.js';

const KEY = 'sk-batch-lifecycle-0123456789';
const CAP = 20;
const AZURE_API_VERSION = '2024-10-21';
let t: TestApp;
let up: BatchUpstream;
let azureUp: BatchUpstream;
let anthropicUp: MessageBatchUpstream;
let receiver: Receiver;
let tenant: Tenant;

const line = (i: number, url = '/v1/chat/completions') =>
  JSON.stringify({
    custom_id: `req-${i}`,
    method: 'POST',
    url,
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `question ${i}` }], max_tokens: CAP },
  });
const fileOf = (count: number, url?: string) =>
  toFile(Buffer.from(Array.from({ length: count }, (_, i) => line(i, url)).join('\n') + '\n'), 'batch.jsonl');

async function startBatch(client: OpenAI, count: number, url?: string) {
  const file = await client.files.create({ file: await fileOf(count, url), purpose: 'batch' });
  return client.batches.create({
    input_file_id: file.id,
    endpoint: (url ?? '/v1/chat/completions') as '/v1/chat/completions',
    completion_window: '24h',
  });
}

let clockMs = Date.now();
const batchRow = (connectionId: string, upstreamId: string) =>
  t.database.db('batches').where({ provider_connection_id: connectionId, upstream_batch_id: upstreamId }).first();
/** Rounds of the settlement (each a quarter of an hour after the last) until the batch is settled; its row. */
async function settled(connectionId: string, upstreamId: string) {
  for (let round = 0; round < 10; round++) {
    await t.nexus.batches.settle(new Date((clockMs += 15 * 60_000)));
    const row = await batchRow(connectionId, upstreamId);
    if (row.status === 'SETTLED') return row;
  }
  throw new Error(`the batch ${upstreamId} was not settled`);
}

beforeAll(async () => {
  t = await startTestApp();
  up = await startBatchUpstream(KEY);
  azureUp = await startBatchUpstream(KEY, { azure: true });
  anthropicUp = await startMessageBatchUpstream(KEY);
  receiver = await startReceiver();
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: CAP, users: 2, allowedModels: ['gpt-4o-mini'] });
}, 60_000);

afterAll(async () => {
  await t?.close();
  for (const server of [up, azureUp, anthropicUp, receiver]) await server?.close();
});

describe("an access's list of batches", () => {
  it('comes in full pages, newest first, with has_more and the cursor right, whatever other accesses made between', async () => {
    const mine = openAiFor(tenant);
    const other = new OpenAI({ baseURL: tenant.gatewayBaseUrl + '/v1', apiKey: tenant.users[1]!.apiKey, maxRetries: 0 });
    const made: string[] = [];
    const theirs: string[] = [];
    // Interleaved: the provider's own pages would hold both accesses' batches.
    for (let i = 0; i < 7; i++) {
      made.push((await startBatch(mine, 1)).id);
      if (i % 2 === 0) theirs.push((await startBatch(other, 1)).id);
    }
    const first = await mine.batches.list({ limit: 3 });
    expect(first.data.map((b) => b.id)).toEqual(made.slice(-3).reverse());
    expect(first.has_more).toBe(true);
    const raw = await fetch(`${tenant.gatewayBaseUrl}/v1/batches?limit=3`, { headers: { authorization: `Bearer ${tenant.apiKey}` } });
    expect(await raw.json()).toMatchObject({ object: 'list', first_id: made.at(-1), last_id: made.at(-3), has_more: true });
    const seen: string[] = [];
    for await (const batch of mine.batches.list({ limit: 3 })) seen.push(batch.id);
    expect(seen).toEqual([...made].reverse());
    const last = await mine.batches.list({ limit: 3, after: made[2]! });
    expect(last.data.map((b) => b.id)).toEqual([made[1], made[0]]);
    expect(last.has_more).toBe(false);
    // Each as the provider has it now.
    up.run(made[0]!);
    expect(last.data.find((b) => b.id === made[0])!.status).toBe('in_progress');
    expect((await mine.batches.list({ limit: 100, after: made[1]! })).data[0]!.status).toBe('completed');
    const them: string[] = [];
    for await (const batch of other.batches.list({ limit: 2 })) them.push(batch.id);
    expect(them).toEqual([...theirs].reverse());
    const bad = await mine.batches.list({ limit: 101 }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it("pages Anthropic's Message Batches the same way (after_id, before_id)", async () => {
    const a = await createTenant(t, { profile: 'anthropic', baseUrl: anthropicUp.url, providerKey: KEY, maxOutputTokens: CAP, users: 2 });
    const mine = anthropicFor(a);
    const other = new Anthropic({ baseURL: a.gatewayBaseUrl, apiKey: a.users[1]!.apiKey, maxRetries: 0 });
    const request = (i: number) => ({
      custom_id: `r-${i}`,
      params: { model: 'claude-3-5-haiku-latest', max_tokens: CAP, messages: [{ role: 'user' as const, content: `q ${i}` }] },
    });
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      made.push((await mine.messages.batches.create({ requests: [request(i)] })).id);
      await other.messages.batches.create({ requests: [request(i)] });
    }
    const seen: string[] = [];
    for await (const batch of mine.messages.batches.list({ limit: 2 })) seen.push(batch.id);
    expect(seen).toEqual([...made].reverse());
    const newer = await mine.messages.batches.list({ limit: 2, before_id: made[1]! });
    expect(newer.data.map((b) => b.id)).toEqual([made[3], made[2]]);
    expect(newer.has_more).toBe(true);
  });
});

describe("the Batch API's own requests", () => {
  it('are recorded as invocations, unmetered and of 0 units, so the console lists them; a batch made is not, its own is', async () => {
    const client = openAiFor(tenant);
    const upload = await client.files.create({ file: await fileOf(2), purpose: 'batch' }).withResponse();
    const created = await client.batches
      .create({ input_file_id: upload.data.id, endpoint: '/v1/chat/completions', completion_window: '24h' })
      .withResponse();
    const read = await client.batches.retrieve(created.data.id).withResponse();
    const missing = await client.batches.retrieve('batch_nope').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    const requestOf = (r: { response: Response }) => r.response.headers.get('x-nexus-request-id')!;
    expect(await invocationByRequestId(t, tenant.workspaceId, requestOf(upload))).toMatchObject({
      method: 'POST',
      endpoint: 'v1/files',
      status: 'SUCCEEDED',
      quotaUnits: '0',
    });
    expect(
      await t.database
        .db('invocations')
        .where({ request_id: requestOf(upload) })
        .first(),
    ).toMatchObject({ metering_status: 'unmetered' });
    expect(await invocationByRequestId(t, tenant.workspaceId, requestOf(read))).toMatchObject({
      method: 'GET',
      endpoint: `v1/batches/${created.data.id}`,
      status: 'SUCCEEDED',
      quotaUnits: '0',
    });
    expect(
      await invocationByRequestId(t, tenant.workspaceId, (missing as InstanceType<typeof OpenAI.NotFoundError>).requestID!),
    ).toMatchObject({
      status: 'REJECTED',
      errorCode: 'batch_not_found',
    });
    // The batch's own invocation is recorded once it is settled, not at its creation.
    await t.nexus.gateway.drain();
    expect(await t.database.db('invocations').where({ request_id: requestOf(created) })).toHaveLength(0);
  });
});

describe('batch.completed', () => {
  it('is delivered to a webhook endpoint subscribed to it, and verifies with standardwebhooks', async () => {
    const w = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: CAP, allowedModels: ['gpt-4o-mini'] });
    await endpointFor(t, w.workspaceId, receiver, ['batch.completed']);
    const batch = await startBatch(openAiFor(w), 4);
    up.run(batch.id);
    const row = await settled(w.connectionId, batch.id);
    const [delivery] = await acceptedOf(receiver, 'batch.completed', 1);
    expect(delivery!.verified!.data).toMatchObject({
      workspaceAccessId: w.accessId,
      invocationId: row.invocation_id,
      batchId: batch.id,
      status: 'completed',
      requests: 4,
      settledRequests: 4,
      settledUnits: `${row.settled_units}`,
      costMicros: `${row.cost_micros}`,
    });
    expect(delivery!.headers['webhook-signature']).toMatch(/^v1,/);
  });
});

describe('a batch through an Azure OpenAI connection', () => {
  it('uploads, creates and settles on Azure paths, the api-version on every request to the provider', async () => {
    const az = await createTenant(t, {
      profile: 'azure-openai',
      baseUrl: azureUp.url,
      providerKey: KEY,
      maxOutputTokens: CAP,
      allowedModels: ['gpt-4o-mini'],
    });
    const client = new AzureOpenAI({ endpoint: az.gatewayBaseUrl, apiKey: az.apiKey, apiVersion: AZURE_API_VERSION, maxRetries: 0 });
    const before = await periodOf(t, az.accessId);
    const batch = await startBatch(client, 10, '/chat/completions');
    expect(batch.status).toBe('in_progress');
    const row = await batchRow(az.connectionId, batch.id);
    expect(row).toMatchObject({ status: 'OPEN', path_prefix: 'openai/', requests: 10 });
    azureUp.run(batch.id);
    const done = await settled(az.connectionId, batch.id);
    let units = 0n;
    for (let i = 0; i < 10; i++) units += BigInt(usageOfLine(i, CAP).input + 2 * usageOfLine(i, CAP).output);
    expect(done).toMatchObject({ status: 'SETTLED', settled_requests: 10, upstream_status: 'completed' });
    expect(BigInt(done.settled_units)).toBe(units);
    const after = await periodOf(t, az.accessId);
    expect(after.consumed - before.consumed).toBe(units);
    expect(after.reserved).toBe(before.reserved);
    const output = await (await client.files.content(done.output_file_id)).text();
    expect(output.trim().split('\n')).toHaveLength(10);
    // Every request the provider had, the poller's too, on Azure's paths with the api-version.
    expect(azureUp.seen.length).toBeGreaterThanOrEqual(5);
    for (const seen of azureUp.seen) expect(seen).toMatch(new RegExp(`^(GET|POST) /openai/[^?]+\\?api-version=${AZURE_API_VERSION}$`));
  });
});

describe('a batch settled after a plan change split its period', () => {
  it('gives what its release freed of the carry back to the part after the split, as a lease released does', async () => {
    const c = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: CAP, quotaUnits: 1_000_000n });
    const { plan } = await activePlan(t.client, c.workspaceId, {
      key: 'next',
      strategyKey: 'next-quota',
      quotaUnits: '1000000',
      outputMultiplierPpm: '2000000',
      maxOutputTokens: CAP,
    });
    const batch = await startBatch(openAiFor(c), 200);
    const changed = await changeAccessPlan({ client: t.client, path: { accessId: c.accessId }, body: { planId: plan.id } });
    expect(changed.response.status, JSON.stringify(changed.error)).toBe(200);
    const parts = () => t.database.db('quota_periods').where({ workspace_access_id: c.accessId }).orderBy('period_start');
    const [oldBefore, nextBefore] = await parts();
    // The batch's hold, beyond the old part's share (seconds of its month), was charged to the next part.
    expect(BigInt(oldBefore.carried_units)).toBeGreaterThan(0n);
    up.run(batch.id);
    const done = await settled(c.connectionId, batch.id);
    const [oldAfter, nextAfter] = await parts();
    const freed = BigInt(done.bound_units) - BigInt(done.settled_units);
    expect(freed).toBeGreaterThan(0n);
    expect(BigInt(nextAfter.granted_units)).toBeGreaterThan(BigInt(nextBefore.granted_units));
    expect(BigInt(oldAfter.carried_units)).toBeLessThan(BigInt(oldBefore.carried_units));
    for (const part of await parts())
      expect(BigInt(part.consumed_units) + BigInt(part.reserved_units)).toBeLessThanOrEqual(BigInt(part.granted_units));
  });
});

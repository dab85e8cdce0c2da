/**
 * A Nexus killed (SIGKILL) between asking the provider to make a batch and reading its answer (docs/batches.md,
 * "Cancel, expiry, crash"): its batch's row stays PENDING with its lease held; the settlement job of another process
 * finds the batch at the provider by the id its metadata names, then settles it as any other, each request charged
 * once; or, when the provider never made it, releases the lease. The killed Nexus runs dist/server.js on the test
 * app's database; the `openai` SDK calls it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNexusProcess, type NexusProcess } from '../support/nexus-process.js';
import { startBatchUpstream, usageOfLine, type BatchUpstream } from '../support/upstreams/batches.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createTenant, periodOf, until, type Tenant } from './gateway-support.js';

const KEY = 'sk-batch-crash-0123456789';
const CAP = 20;
let t: TestApp;
let up: BatchUpstream;
let tenant: Tenant;
let dataDir: string;
let nexus: NexusProcess | undefined;

const line = (i: number) =>
  JSON.stringify({
    custom_id: `req-${i}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `question ${i}` }], max_tokens: CAP },
  });
const fileOf = (count: number) => toFile(Buffer.from(Array.from({ length: count }, (_, i) => line(i)).join('\n') + '\n'), 'batch.jsonl');

const pendingRows = () => t.database.db('batches').where({ workspace_access_id: tenant.accessId, status: 'PENDING' });

/**
 * A Nexus process on the test database; the batch of `count` lines uploaded through it, then created while the provider
 * holds its answer (`hold`); the process killed once the create's row is PENDING. Returns the row.
 */
async function createThenDie(hold: 'made' | 'lost', count: number) {
  nexus = await startNexusProcess({
    DATABASE_URL: t.database.url!,
    ...(t.database.schema ? { NEXUS_DATABASE_SCHEMA: t.database.schema } : {}),
    ...(t.database.directUrl ? { NEXUS_DATABASE_LISTEN_URL: t.database.directUrl } : {}),
    NEXUS_DATA_DIR: dataDir,
  });
  const client = new OpenAI({ baseURL: `${nexus.url}/providers/${tenant.connectionId}/v1`, apiKey: tenant.apiKey, maxRetries: 0 });
  const file = await client.files.create({ file: await fileOf(count), purpose: 'batch' });
  up.holdCreates = hold;
  const made = up.made.length;
  const creating = client.batches
    .create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' })
    .catch((e: unknown) => e);
  await until(async () => (await pendingRows()).length === 1 && (hold === 'lost' || up.made.length === made + 1), 20_000);
  await nexus.kill();
  expect(await creating).toBeInstanceOf(OpenAI.APIConnectionError);
  up.holdCreates = undefined;
  const [row] = await pendingRows();
  return row;
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'nexus-batch-crash-'));
  t = await startTestApp();
  up = await startBatchUpstream(KEY);
  tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, maxOutputTokens: CAP, allowedModels: ['gpt-4o-mini'] });
}, 60_000);

afterAll(async () => {
  await nexus?.kill();
  await t?.close();
  await up?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('a process killed between the provider making a batch and its row', () => {
  it('leaves a PENDING row that the settlement job finds at the provider by its metadata and settles, each request once', async () => {
    const before = await periodOf(t, tenant.accessId);
    const row = await createThenDie('made', 50);
    expect(row).toMatchObject({ upstream_batch_id: null, upstream_status: 'pending', requests: 50 });
    const lease = await t.database.db('quota_leases').where({ id: row.lease_id }).first();
    expect(lease).toMatchObject({ status: 'HELD' });
    expect(BigInt(lease.reserved_units)).toBe(BigInt(row.bound_units));
    const made = up.made.at(-1)!;
    expect(made.metadata).toEqual({ nexus_batch: row.id });

    // Before its grace has passed, the row is left to the process that asked (were it alive).
    const now = Date.now();
    await t.nexus.batches.settle(new Date(now + 60_000));
    expect((await t.database.db('batches').where({ id: row.id }).first()).status).toBe('PENDING');
    await t.nexus.batches.settle(new Date(now + 6 * 60_000));
    expect(await t.database.db('batches').where({ id: row.id }).first()).toMatchObject({
      status: 'OPEN',
      upstream_batch_id: made.id,
      upstream_status: 'in_progress',
    });

    up.run(made.id);
    await t.nexus.batches.settle(new Date(now + 30 * 60_000));
    const settled = await t.database.db('batches').where({ id: row.id }).first();
    let units = 0n;
    for (let i = 0; i < 50; i++) units += BigInt(usageOfLine(i, CAP).input + 2 * usageOfLine(i, CAP).output);
    expect(settled).toMatchObject({ status: 'SETTLED', settled_requests: 50 });
    expect(BigInt(settled.settled_units)).toBe(units);
    expect(await t.database.db('usage_events').where({ lease_id: row.lease_id }).count()).toEqual([{ count: 50n }]);
    const after = await periodOf(t, tenant.accessId);
    expect(after.consumed - before.consumed).toBe(units);
    expect(after.reserved).toBe(before.reserved);
  });

  it('releases the lease of a PENDING row whose batch the provider never made', async () => {
    const before = await periodOf(t, tenant.accessId);
    const row = await createThenDie('lost', 5);
    expect((await periodOf(t, tenant.accessId)).reserved - before.reserved).toBe(BigInt(row.bound_units));
    await t.nexus.batches.settle(new Date(Date.now() + 6 * 60_000));
    expect(await t.database.db('batches').where({ id: row.id }).first()).toBeUndefined();
    expect(await t.database.db('quota_leases').where({ id: row.lease_id }).first()).toMatchObject({ status: 'RELEASED' });
    const after = await periodOf(t, tenant.accessId);
    expect(after.reserved).toBe(before.reserved);
    expect(after.consumed).toBe(before.consumed);
  });
});

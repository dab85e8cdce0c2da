/**
 * A batch's invocation on its call page in the console, in Chromium (playwright-core, Debian's Chromium) on a live
 * Nexus: a batch made through the `openai` SDK against a fake upstream that models its lifecycle
 * (test/support/upstreams/batches.ts), cancelled after some of its requests ran and settled; its call page shows the
 * batch (the provider's id and status, the requests charged of those in its file, the bound it was admitted at, the
 * units charged and released, its cost at the batch price), each checked against the database. Scanned by axe-core.
 */
import OpenAI, { toFile } from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatMoney, formatNumber } from '../../console/src/format.js';
import { createModelPrice, getInvocation } from '../support/sdk.js';
import { provisionTenant, type Tenant } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startBatchUpstream, type BatchUpstream } from '../support/upstreams/batches.js';
import { axeViolations, chromiumOrWarn, signedInChromium } from './console-support.js';

const executablePath = chromiumOrWarn("the console's batches browser test");
const KEY = 'sk-console-batch-0123456789';
const CAP = 20;

describe.skipIf(!executablePath)("the console: a batch's invocation on its call page, in Chromium", () => {
  let t: TestApp;
  let up: BatchUpstream;
  let browser: Browser;
  let page: Page;
  let tenant: Tenant;
  const browserErrors: string[] = [];
  /** The settlement's clock: each round a quarter of an hour after the last (past any poll's wait and claim). */
  let clockMs = Date.now();

  beforeAll(async () => {
    t = await startTestApp();
    up = await startBatchUpstream(KEY);
    tenant = await provisionTenant(t.client, {
      name: 'console-batches',
      baseUrl: up.url,
      providerKey: KEY,
      maxOutputTokens: CAP,
      quotaUnits: 1_000_000n,
      allowedModels: ['gpt-4o-mini'],
    });
    const price = await createModelPrice({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        modelPattern: 'gpt-4o-mini',
        inputPerMillion: '1',
        outputPerMillion: '4',
        effectiveFrom: new Date(Date.now() - 3_600_000).toISOString(),
      },
    });
    expect(price.response.status).toBe(201);
    ({ browser, page } = await signedInChromium(executablePath!, t.url, browserErrors));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await up?.close();
  });

  it('shows a cancelled batch: its requests charged of those in its file, its bound, units, release and cost', async () => {
    const client = new OpenAI({ baseURL: `${tenant.gatewayBaseUrl}/v1`, apiKey: tenant.apiKey, maxRetries: 0 });
    const lines = Array.from({ length: 20 }, (_, i) =>
      JSON.stringify({
        custom_id: `req-${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `question ${i}` }], max_tokens: CAP },
      }),
    );
    const file = await client.files.create({
      file: await toFile(Buffer.from(lines.join('\n') + '\n'), 'batch.jsonl', { type: 'application/jsonl' }),
      purpose: 'batch',
    });
    const batch = await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    // Cancelled after 12 of its 20 requests ran: those are charged, the rest of its bound goes back.
    up.run(batch.id, 12);
    const row = async () => t.database.db('batches').where({ upstream_batch_id: batch.id }).first();
    for (let round = 0; round < 5 && (await row()).status !== 'SETTLED'; round++)
      await t.nexus.batches.settle(new Date((clockMs += 15 * 60_000)));
    const settled = await row();
    expect(settled).toMatchObject({ status: 'SETTLED', upstream_status: 'cancelled', requests: 20, settled_requests: 12 });
    expect(BigInt(settled.cost_micros)).toBeGreaterThan(0n);
    const released = BigInt(settled.bound_units) - BigInt(settled.settled_units);
    expect(released).toBeGreaterThan(0n);

    // The Admin API gives the batch's invocation its batch (getInvocation), as its row keeps it.
    const read = await getInvocation({ client: t.client, path: { invocationId: settled.invocation_id } });
    expect(read.data!.batch).toEqual({
      batchId: batch.id,
      upstreamStatus: 'cancelled',
      requests: 20,
      settledRequests: 12,
      boundUnits: `${settled.bound_units}`,
      settledUnits: `${settled.settled_units}`,
      costMicros: `${settled.cost_micros}`,
      createdAt: settled.created_at.toISOString(),
      expiresAt: settled.expires_at.toISOString(),
      settledAt: settled.settled_at.toISOString(),
    });

    await page.goto(`${t.url}/console/#/invocations/${settled.invocation_id}`);
    const section = page.getByTestId('batch');
    await section.waitFor();
    const text = async (id: string) => (await page.getByTestId(id).textContent())!.replace(/\u00a0/g, ' ');
    expect(await section.textContent()).toContain(batch.id);
    expect(await section.textContent()).toContain('cancelled');
    expect(await text('batch-requests')).toBe('12 of 20');
    expect(await text('batch-bound')).toBe(`${formatNumber(String(settled.bound_units))} units`);
    expect(await text('batch-settled')).toBe(formatNumber(String(settled.settled_units)));
    expect(await section.textContent()).toContain(`${formatNumber(String(released))} units`);
    // Its cost at the batch price, in millionths: a few cents' fraction, written exactly, never $0.00.
    const cost = formatMoney(String(settled.cost_micros), 'USD').replace(/\u00a0/g, ' ');
    expect(cost).not.toBe('$0.00');
    expect(await text('batch-cost')).toBe(cost);
    // The call's own figures: cancelled (CLIENT_ABORTED), its units those charged, its cost the batch's.
    const detail = page.locator('.detail');
    expect(await detail.textContent()).toContain('CLIENT_ABORTED');
    expect(await detail.textContent()).toContain('v1/batches');
    const invocation = await t.database.db('invocations').where({ id: settled.invocation_id }).first();
    expect(BigInt(invocation.quota_units)).toBe(BigInt(settled.settled_units));
    expect((await detail.textContent())!.replace(/\u00a0/g, ' ')).toContain(`Cost${cost}`);
    expect(await axeViolations(page)).toEqual([]);
    expect(browserErrors).toEqual([]);
  }, 120_000);
});

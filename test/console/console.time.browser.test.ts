/**
 * An operator's money questions in the console, in Chromium (playwright-core, Debian's Chromium) on a live Nexus,
 * the browser in New York: the top five users this month (a preset in the operator's zone) and the same as CSV, and
 * spend per model per day this week read from the table under the chart, each checked against the usage events in
 * the database; the budget's month in the workspace's time zone, set from the console. Pages scanned by axe-core in
 * light and dark.
 */
import { readFile } from 'node:fs/promises';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { createModelPrice, createProviderConnection } from '../support/sdk.js';
import { provisionTenant, type Tenant } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { chromiumOrWarn, axeViolationsInBothSchemes, signedInChromium, openConnections } from './console-support.js';

const executablePath = chromiumOrWarn("the console's time ranges browser test");
const ZONE = 'America/New_York';
const usd = (micros: bigint | string) =>
  new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 6 }).format(
    `${BigInt(micros) / 1_000_000n}.${String(BigInt(micros) % 1_000_000n).padStart(6, '0')}` as unknown as number,
  );

describe.skipIf(!executablePath)("the console: money by the operator's calendar, in Chromium", () => {
  let t: TestApp;
  let upstream: FakeUpstream;
  let broken: FakeUpstream;
  let browser: Browser;
  let page: Page;
  let tenant: Tenant;
  const errors: string[] = [];
  const providerKey = testProviderKey('console-time');

  /** Spend per access, or per model and local day, this month in ZONE, from the usage events (the source of truth). */
  const spendBy = async (groupBy: 'access' | 'model-day') => {
    const key =
      groupBy === 'access' ? 'workspace_access_id::text' : `model || ' ' || to_char(created_at at time zone '${ZONE}', 'YYYY-MM-DD')`;
    const result = await t.database.db.raw(
      `select ${key} as key, sum(cost_micros)::text as cost from usage_events
        where workspace_id = ? and created_at >= date_trunc('month', now() at time zone '${ZONE}') at time zone '${ZONE}'
        group by 1 order by sum(cost_micros) desc, 1`,
      [tenant.workspaceId],
    );
    return result.rows as { key: string; cost: string }[];
  };

  beforeAll(async () => {
    t = await startTestApp();
    upstream = await startOpenAiUpstream({ apiKey: providerKey });
    broken = await startOpenAiUpstream({ apiKey: providerKey });
    broken.forceStatus = 500;
    tenant = await provisionTenant(t.client, { name: 'calendar', baseUrl: upstream.url, providerKey, users: 7 });
    await createModelPrice({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        modelPattern: 'gpt-*',
        inputPerMillion: '1000',
        outputPerMillion: '2000',
        effectiveFrom: new Date(Date.now() - 3_600_000).toISOString(),
      },
    });
    // User i calls i + 1 times, gpt-a or gpt-b by turns: seven users of different spend, two models.
    for (const [i, user] of tenant.users.entries()) {
      for (let n = 0; n <= i; n++) {
        const res = await fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${user.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': `${10 * (i + 1)},5,0` },
          body: JSON.stringify({ model: n % 2 ? 'gpt-b' : 'gpt-a', messages: [{ role: 'user', content: 'hi' }] }),
        });
        expect(res.status).toBe(200);
        await res.arrayBuffer();
      }
    }
    await t.nexus.gateway.drain();
    ({ browser, page } = await signedInChromium(executablePath!, t.url, errors, {
      context: { viewport: { width: 1360, height: 900 }, timezoneId: ZONE, acceptDownloads: true },
    }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await upstream?.close();
    await broken?.close();
  });

  it('answers the top five users this month, on the page and as CSV', async () => {
    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/usage`);
    await page.getByRole('heading', { name: 'Usage over time', level: 1 }).waitFor();
    const asked = page.waitForRequest((r) => r.url().includes('/usage-summary?') && r.url().includes('groupBy=access'));
    await page.getByLabel('Range').selectOption('month');
    await page.getByLabel('By').selectOption('access');
    // This month in New York: from its midnight on the 1st, by day in its zone.
    const query = new URL((await asked).url()).searchParams;
    expect(query.get('timeZone')).toBe(ZONE);
    const since = new Date(query.get('since')!);
    expect(new Intl.DateTimeFormat('en-US', { timeZone: ZONE, day: 'numeric', hour: 'numeric', hourCycle: 'h23' }).format(since)).toBe(
      '1, 00',
    );

    const expected = (await spendBy('access')).slice(0, 5);
    const names = new Map(tenant.users.map((u, i) => [u.accessId, `calendar-user-${i}`]));
    const totals = page.getByRole('table', { name: /Totals/ });
    const topFive = async () =>
      (await totals.locator('tbody tr').all()).slice(0, 5).map(async (row) => {
        const cells = await row.locator('td').allTextContents();
        return `${cells[0]} ${cells[1]}`;
      });
    await expect.poll(async () => Promise.all(await topFive())).toEqual(expected.map((r) => `${names.get(r.key)} ${usd(r.cost)}`));

    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
    expect(download.suggestedFilename()).toMatch(/^usage-by-access-.*\.csv$/);
    const [header, ...lines] = (await readFile(await download.path(), 'utf8')).trimEnd().split(/\r?\n/);
    const columns = header!.split(',');
    const sums = new Map<string, bigint>();
    for (const line of lines) {
      const cells = line.split(',');
      const key = cells[columns.indexOf('key')]!;
      sums.set(key, (sums.get(key) ?? 0n) + BigInt(cells[columns.indexOf('cost_micros')] || '0'));
    }
    const csvTopFive = [...sums].sort(([, a], [, b]) => (b > a ? 1 : b < a ? -1 : 0)).slice(0, 5);
    expect(csvTopFive.map(([key, cost]) => [key, `${cost}`])).toEqual(expected.map((r) => [r.key, r.cost]));
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('answers spend per model per day this week in the table under the chart', async () => {
    await page.getByLabel('Range').selectOption('week');
    await page.getByLabel('By').selectOption('model');
    await expect.poll(() => page.getByLabel('Show').inputValue()).toBe('cost');
    const table = page.getByTestId('per-period-table');
    await expect.poll(() => table.locator('tbody tr').count()).toBe(7);
    // The two models (once the week by model has replaced the month by user), and the day's total.
    const columns = () => table.locator('thead th').allTextContents();
    await expect
      .poll(async () => (await columns()).map((h) => h.replace(/^gpt-([ab]).*/, 'gpt-$1')))
      .toEqual(['Day', 'gpt-a', 'gpt-b', 'Total']);
    const headers = await columns();
    const expected = await spendBy('model-day');
    const today = new Intl.DateTimeFormat('en-US', {
      timeZone: ZONE,
      weekday: 'short',
      day: 'numeric',
      month: 'short',
      year: 'numeric',
    }).format(new Date());
    const row = table.locator('tbody tr').filter({ has: page.getByRole('rowheader', { name: today, exact: true }) });
    const cells = await row.locator('td').allTextContents();
    const day = new Intl.DateTimeFormat('en-CA', { timeZone: ZONE }).format(new Date());
    for (const [i, model] of headers.slice(1, -1).entries()) {
      const cost = expected.find((r) => r.key === `${model} ${day}`)?.cost ?? '0';
      expect(cells[i], model).toBe(usd(cost));
    }
    expect(cells.at(-1)).toBe(usd(expected.filter((r) => r.key.endsWith(day)).reduce((sum, r) => sum + BigInt(r.cost), 0n)));
    expect(errors).toEqual([]);
  });

  it("answers a connection's health from its calls, and a failed Verify turns its row red", async () => {
    const failing = await createProviderConnection({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'broken upstream', protocolProfile: 'openai', baseUrl: broken.url, apiKey: providerKey },
    });
    await openConnections(page, t.url, tenant.workspaceId);
    const row = (name: string) => page.locator('tbody tr').filter({ hasText: name });
    const good = row('calendar upstream');
    await expect.poll(() => good.getByTestId('connection-health').locator('.status').textContent()).toMatch(/healthy|degraded/);
    await good.getByRole('button', { name: 'Health details' }).click();
    const table = good.getByTestId('connection-health-table');
    const { rows } = await t.database.db.raw(
      `select count(*)::int as calls, count(*) filter (where attempt_status in ('UPSTREAM_ERROR', 'FAILED'))::int as errors
         from invocations where provider_connection_id = ? and attempt_id is not null`,
      [tenant.connectionId],
    );
    const day = await table.locator('tbody tr').filter({ hasText: 'Last day' }).locator('td').allTextContents();
    expect(day.slice(0, 2)).toEqual([String(rows[0].calls), String(rows[0].errors)]);
    expect(rows[0].calls).toBe(28);
    // Latency percentiles, in order.
    const [p50, p95, p99] = day.slice(3, 6).map((c) => Number(c.replace(/[^\d.]/g, '')));
    expect(p50! <= p95! && p95! <= p99!).toBe(true);

    const bad = row('broken upstream');
    await expect.poll(() => bad.getByTestId('connection-health').locator('.status').textContent()).toBe('idle');
    await bad.getByRole('button', { name: 'Verify' }).click();
    await bad.getByTestId('verify-failed').waitFor();
    await expect.poll(() => bad.getByTestId('connection-health').locator('.status').textContent()).toBe('failing');
    const colour = await bad.getByTestId('verify-failed').evaluate((el) => getComputedStyle(el).color);
    expect(colour).toBe(
      await bad
        .getByTestId('connection-health')
        .locator('.status')
        .evaluate((el) => getComputedStyle(el).color),
    );
    const stored: { last_verify_outcome: string } = await t.database
      .db('provider_connections')
      .where({ id: failing.data!.id })
      .first('last_verify_outcome');
    expect(stored.last_verify_outcome).not.toBe('reachable');
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it("keeps a call's latencies on screen at 390 px, and its money cells even", async () => {
    const [first] = await t.database.db('invocations').where({ workspace_id: tenant.workspaceId }).orderBy('id').limit(1).select('id');
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/invocations/${(first as { id: string }).id}`);
      const latency = page.getByRole('heading', { name: 'Latency' });
      await latency.waitFor();
      await latency.scrollIntoViewIfNeeded();
      // Each latency figure's text ends inside the screen.
      const figures = page.locator('h3:has-text("Latency") ~ dl.figures dd');
      expect(await figures.count()).toBeGreaterThan(2);
      for (const box of await figures.evaluateAll((dds) => dds.map((dd) => dd.getBoundingClientRect().right))) {
        expect(box).toBeLessThanOrEqual(390);
      }
    } finally {
      await page.setViewportSize({ width: 1360, height: 900 });
    }
    // The list's costs, each with as many decimals.
    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/invocations`);
    const costs = page.locator('tbody tr td:nth-child(9)');
    await expect.poll(() => costs.count()).toBeGreaterThan(1);
    const decimals = new Set((await costs.allTextContents()).map((c) => c.split('.')[1]?.length));
    expect(decimals.size).toBe(1);
  });

  it("shows the budget's month in the workspace's time zone, set from the console", async () => {
    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/budget`);
    await page.getByRole('heading', { name: 'Budget', level: 1 }).waitFor();
    await page.getByLabel('Period').selectOption('MONTH');
    await page.getByLabel('Hard level (USD)').fill('1000');
    await page.getByRole('button', { name: 'Save budget' }).click();
    await page.getByTestId('budget-window').waitFor();
    await page.getByRole('combobox', { name: /^Time zone/ }).fill('Asia/Tokyo');
    await page.getByRole('button', { name: 'Save time zone' }).click();
    await expect.poll(() => page.getByTestId('budget-window').textContent()).toMatch(/^\w+ 1, \d{4}, 12:00\s?AM \(Asia\/Tokyo\) to /);
    const row: { time_zone: string } = await t.database.db('workspaces').where({ id: tenant.workspaceId }).first('time_zone');
    expect(row.time_zone).toBe('Asia/Tokyo');
    // The window's spend per day, days in Tokyo.
    await page.getByRole('region', { name: "Each day's spend (USD) (Asia/Tokyo)" }).waitFor();
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    expect(errors).toEqual([]);
  });
});

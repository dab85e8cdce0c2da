/**
 * Money in a zero-decimal currency, in Chromium: a workspace whose currency is JPY, priced in yen, called through the
 * gateway by three users; the usage page's totals (by user and by model) and the invocations list and a call's detail
 * show each amount in yen without decimals, equal to the usage events' costs in the database; by user, past the chart's 9
 * largest users, the rest are one "Other" row whose sum is the database's.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { createModelPrice, getWorkspace, updateWorkspace } from '../support/sdk.js';
import { provisionTenant, type Tenant } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { axeViolations, axeViolationsInBothSchemes, chromiumOrWarn, signedInChromium } from './console-support.js';

const executablePath = chromiumOrWarn("the console's yen browser test");

/** Whole yen as en-US writes them (¥1,235): the amounts here are whole yen, so none has a decimal. */
const yen = (micros: bigint | string) => {
  expect(BigInt(micros) % 1_000_000n, `${micros} micro-yen is whole yen`).toBe(0n);
  return `¥${(BigInt(micros) / 1_000_000n).toLocaleString('en-US')}`;
};

describe.skipIf(!executablePath)('the console: money in yen, in Chromium', () => {
  let t: TestApp;
  let upstream: FakeUpstream;
  let browser: Browser;
  let page: Page;
  let tenant: Tenant;
  const errors: string[] = [];
  const providerKey = testProviderKey('console-money');

  /** Cost per key from the usage events (the source of truth): per access, model, or request id. */
  const costBy = async (key: 'e.workspace_access_id::text' | 'e.model' | 'i.request_id', workspaceId = tenant.workspaceId) => {
    const result = await t.database.db.raw(
      `select ${key} as key, sum(e.cost_micros)::text as cost
         from usage_events e join invocations i on i.id = e.invocation_id
        where e.workspace_id = ? group by 1 order by sum(e.cost_micros) desc, 1`,
      [workspaceId],
    );
    return result.rows as { key: string; cost: string }[];
  };

  /** A workspace in yen, priced in yen, with `users` end users. */
  const yenTenant = async (name: string, users: number) => {
    const made = await provisionTenant(t.client, { name, baseUrl: upstream.url, providerKey, users });
    const changed = await updateWorkspace({ client: t.client, path: { workspaceId: made.workspaceId }, body: { currency: 'JPY' } });
    expect(changed.response.status, JSON.stringify(changed.error)).toBe(200);
    // ¥100,000 a million input tokens, ¥200,000 a million output: 10 input tokens are ¥1, 5 output tokens ¥1.
    const price = await createModelPrice({
      client: t.client,
      path: { workspaceId: made.workspaceId },
      body: {
        modelPattern: 'gpt-*',
        inputPerMillion: '100000',
        outputPerMillion: '200000',
        effectiveFrom: new Date(Date.now() - 3_600_000).toISOString(),
      },
    });
    expect(price.response.status, JSON.stringify(price.error)).toBe(201);
    expect(price.data!.currency).toBe('JPY');
    return made;
  };
  /** A call of `input` tokens (¥1 each 10) and 5 output tokens (¥1), by `user` of `of`. */
  const call = async (of: Tenant, user: number, input: number, model: string) => {
    const res = await fetch(`${of.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${of.users[user]!.apiKey}`, 'content-type': 'application/json', 'x-fake-usage': `${input},5,0` },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  };

  beforeAll(async () => {
    t = await startTestApp();
    upstream = await startOpenAiUpstream({ apiKey: providerKey });
    tenant = await yenTenant('yen', 3);
    // User 0: one call of 12,340 input tokens (¥1,235); user 1: two of 20 (¥3 each); user 2: one of 1,000 (¥101).
    const calls: [number, number, string][] = [
      [0, 12_340, 'gpt-yen-a'],
      [1, 20, 'gpt-yen-b'],
      [1, 20, 'gpt-yen-b'],
      [2, 1_000, 'gpt-yen-a'],
    ];
    for (const [user, input, model] of calls) await call(tenant, user, input, model);
    await t.nexus.gateway.drain();
    ({ browser, page } = await signedInChromium(executablePath!, t.url, errors, { context: { viewport: { width: 1360, height: 900 } } }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await upstream?.close();
  });

  it("shows the usage page's spend in yen, without decimals, as the database sums it", async () => {
    expect((await getWorkspace({ client: t.client, path: { workspaceId: tenant.workspaceId } })).data!.currency).toBe('JPY');
    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/usage`);
    await page.getByRole('heading', { name: 'Usage over time', level: 1 }).waitFor();
    await page.getByLabel('Range').selectOption('month');
    const totals = page.getByRole('table', { name: /Totals/ });
    const rows = async () =>
      Promise.all(
        (await totals.locator('tbody tr').all()).map(async (row) => (await row.locator('td').allTextContents()).slice(0, 2).join(' ')),
      );

    await page.getByLabel('By').selectOption('access');
    const names = new Map(tenant.users.map((u, i) => [u.accessId, `yen-user-${i}`]));
    const byUser = await costBy('e.workspace_access_id::text');
    expect(byUser.map((r) => yen(r.cost))).toEqual(['¥1,235', '¥101', '¥6']);
    await expect.poll(rows).toEqual(byUser.map((r) => `${names.get(r.key)} ${yen(r.cost)}`));
    const total = byUser.reduce((sum, r) => sum + BigInt(r.cost), 0n);
    await expect.poll(() => totals.locator('tfoot td').first().textContent()).toBe(yen(total));
    expect(await totals.locator('thead th').nth(1).textContent()).toBe('Spend (JPY)');
    await page.getByText("Spend is the providers' cost from the price book, in JPY.").waitFor();

    await page.getByLabel('By').selectOption('model');
    const byModel = await costBy('e.model');
    // The provider answers with a dated model (gpt-yen-a-2026-01-01): the row starts with the model asked.
    await expect
      .poll(async () => (await rows()).map((r) => r.replace(/-\d{4}-\d{2}-\d{2} /, ' ')))
      .toEqual(byModel.map((r) => `${r.key.replace(/-\d{4}-\d{2}-\d{2}$/, '')} ${yen(r.cost)}`));
    // The table under the chart: this month's days, today's total in yen.
    const perDay = page.getByTestId('per-period-table');
    const today = new Intl.DateTimeFormat('en-US', { timeZone: 'UTC', weekday: 'short', day: 'numeric', month: 'short', year: 'numeric' });
    const todays = perDay.locator('tbody tr').filter({ has: page.getByRole('rowheader', { name: today.format(new Date()), exact: true }) });
    await expect.poll(() => todays.locator('td').last().textContent()).toBe(yen(total));
    expect(await axeViolations(page)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it("shows each call's cost in yen, without decimals, in the invocations list and the call's detail", async () => {
    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/invocations`);
    await page.getByRole('heading', { name: 'Invocations', level: 1 }).waitFor();
    const byCall = await costBy('i.request_id');
    expect(byCall.length).toBe(4);
    const list = page.getByRole('table', { name: 'Invocations' });
    for (const { key, cost } of byCall) {
      const row = list.locator('tbody tr').filter({ hasText: key });
      // Cost is the ninth column.
      await expect.poll(() => row.locator('td').nth(8).textContent()).toBe(yen(cost));
    }
    // The dearest call opened: its detail says the same.
    await page.getByRole('link', { name: `Open call ${byCall[0]!.key}` }).click();
    const cost = page.locator('dt', { hasText: /^Cost$/ }).locator('xpath=following-sibling::dd[1]');
    await expect.poll(() => cost.textContent()).toBe('¥1,235');
    expect(await axeViolations(page)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('by user, shows the 9 who spent most and "Other" for the rest, each and the total as the database sums them', async () => {
    // Eleven users: user i spends ¥(10 (i + 1) + 1), so the two who spent least are "Other".
    const many = await yenTenant('many', 11);
    for (let i = 0; i < 11; i++) await call(many, i, 100 * (i + 1), 'gpt-many');
    await t.nexus.gateway.drain();
    await page.goto(`${t.url}/console/#/w/${many.workspaceId}/usage`);
    await page.getByRole('heading', { name: 'Usage over time', level: 1 }).waitFor();
    const asked = page.waitForRequest((r) => r.url().includes('/usage-summary?') && r.url().includes('groupBy=access'));
    await page.getByLabel('By').selectOption('access');
    // The page asks for the chart's series only.
    expect(new URL((await asked).url()).searchParams.get('top')).toBe('9');
    const byUser = await costBy('e.workspace_access_id::text', many.workspaceId);
    const names = new Map(many.users.map((u, i) => [u.accessId, `many-user-${i}`]));
    const rest = byUser.slice(9).reduce((sum, r) => sum + BigInt(r.cost), 0n);
    const totals = page.getByRole('table', { name: /Totals/ });
    const rows = async () =>
      Promise.all(
        (await totals.locator('tbody tr').all()).map(async (row) => (await row.locator('td').allTextContents()).slice(0, 2).join(' ')),
      );
    await expect.poll(rows).toEqual([...byUser.slice(0, 9).map((r) => `${names.get(r.key)} ${yen(r.cost)}`), `Other ${yen(rest)}`]);
    expect(rest).toBe(32_000_000n);
    const total = byUser.reduce((sum, r) => sum + BigInt(r.cost), 0n);
    await expect.poll(() => totals.locator('tfoot td').first().textContent()).toBe(yen(total));
    // The next users a page at a time: the 10th and 11th by spend, the first nine now in "Other", the total the same.
    const pager = page.getByRole('navigation', { name: 'Pages of users' });
    await expect
      .poll(() => pager.locator('span').textContent())
      .toBe('Users 1–9 of 11 by spend; the others are "Other". Every one is in the CSV.');
    const next = page.waitForRequest((r) => r.url().includes('/usage-summary?') && r.url().includes('groupBy=access'));
    await pager.getByRole('button', { name: 'Next 9 →' }).click();
    expect(new URL((await next).url()).searchParams.get('offset')).toBe('9');
    const first = byUser.slice(0, 9).reduce((sum, r) => sum + BigInt(r.cost), 0n);
    await expect.poll(rows).toEqual([...byUser.slice(9).map((r) => `${names.get(r.key)} ${yen(r.cost)}`), `Other ${yen(first)}`]);
    await expect
      .poll(() => pager.locator('span').textContent())
      .toBe('Users 10–11 of 11 by spend; the others are "Other". Every one is in the CSV.');
    await expect.poll(() => totals.locator('tfoot td').first().textContent()).toBe(yen(total));
    expect(await pager.getByRole('button', { name: 'Next 9 →' }).isDisabled()).toBe(true);
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    // Back to the first page.
    await pager.getByRole('button', { name: '← Previous 9' }).click();
    await expect.poll(rows).toEqual([...byUser.slice(0, 9).map((r) => `${names.get(r.key)} ${yen(r.cost)}`), `Other ${yen(rest)}`]);
    expect(errors).toEqual([]);
  });
});

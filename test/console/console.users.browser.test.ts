/**
 * A user at quota in the console, in Chromium (playwright-core, Debian's Chromium) on a live Nexus: refused for
 * quota, the user is shown blocked (its remainder below its typical call), found by email and ranked first by usage;
 * units granted from the console reach the period (read from the database) and the gateway admits the user again;
 * a plan change's pro-rated grant is explained. Each page is scanned by axe-core, in light and dark.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatInputBound } from '../gateway/gateway-support.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { projectRoot } from '../support/paths.js';
import { changeAccessPlan, listAuditLogs } from '../support/sdk.js';
import { activePlan, provisionTenant, type Tenant } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { chromiumOrWarn, axeViolationsInBothSchemes, signedInChromium } from './console-support.js';

const executablePath = chromiumOrWarn("the console's users browser test");
const shots = join(projectRoot, 'test-results', 'console');
const BODY = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'at quota' }], max_tokens: 10 });
// Each call reserves its input bound + 2 * 10 and consumes 10 + 2 * 5 = 20 units.
const BOUND = chatInputBound(BODY) + 20n;

describe.skipIf(!executablePath)('the console: a user at quota, in Chromium', () => {
  let t: TestApp;
  let upstream: FakeUpstream;
  let browser: Browser;
  let page: Page;
  let tenant: Tenant;
  const browserErrors: string[] = [];
  const providerKey = testProviderKey('console-users');
  // Room for 3 calls, then BOUND - 5 left: less than a call needs, though 80 % of the grant is not consumed.
  const quota = BOUND + 20n * 2n + 15n;

  const call = (apiKey: string) =>
    fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-fake-usage': '10,5,0' },
      body: BODY,
    });
  const period = async () =>
    t.database.db('quota_periods').where({ workspace_access_id: tenant.accessId }).orderBy('period_start', 'desc').first();

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    t = await startTestApp();
    upstream = await startOpenAiUpstream({ apiKey: providerKey });
    tenant = await provisionTenant(t.client, { name: 'at-quota', baseUrl: upstream.url, providerKey, quotaUnits: quota, users: 2 });
    for (let i = 0; i < 3; i++) expect((await call(tenant.apiKey)).status).toBe(200);
    expect((await call(tenant.apiKey)).status).toBe(429);
    await t.nexus.gateway.drain();
    ({ browser, page } = await signedInChromium(executablePath!, t.url, browserErrors, {
      context: { viewport: { width: 1360, height: 900 } },
    }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await upstream?.close();
  });

  it('shows the refused user blocked, finds it by email, ranks it first by usage, and grants it units', async () => {
    const row = await period();
    const available = BigInt(row.granted_units) - BigInt(row.consumed_units) - BigInt(row.reserved_units);
    expect(available).toBe(BOUND - 5n);
    expect(BigInt(row.consumed_units) * 10n).toBeLessThan(BigInt(row.granted_units) * 8n);

    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/users`);
    await page.getByRole('heading', { name: 'Users and accesses', level: 1 }).waitFor();
    await page.getByLabel('Order').selectOption('usage');
    const first = page.locator('tbody tr').first();
    await expect.poll(() => first.textContent()).toContain('at-quota-user-0');
    await expect.poll(() => first.getByTestId('quota-cell').textContent()).toBe(`60 / ${quota.toLocaleString('en-US')}blocked`);

    await page.getByLabel('External user id or email').fill('AT-QUOTA-0@example.com');
    await page.getByRole('button', { name: 'Find' }).click();
    await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
    await page.getByRole('button', { name: 'Manage at-quota-user-0' }).click();
    await page.getByText('Blocked: ').waitFor();
    await page.getByText('20 (median of its last calls, up to 20)').waitFor();
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    await page.screenshot({ path: join(shots, 'users-blocked.png'), fullPage: true });

    await page.getByRole('button', { name: 'Grant units' }).click();
    const form = page.getByRole('form', { name: 'Grant units to at-quota-user-0' });
    await form.getByLabel('Units').fill('1000');
    await form.getByLabel('Reason (optional)').fill('support ticket 42');
    await form.getByRole('button', { name: 'Grant units' }).click();
    await page.getByTestId('grant-explained').waitFor();
    expect(await page.getByTestId('grant-explained').textContent()).toBe(
      `${quota.toLocaleString('en-US')} units from the plan, plus 1,000 granted once (top-ups).`,
    );
    const after = await period();
    expect([BigInt(after.granted_units), BigInt(after.topped_up_units)]).toEqual([quota + 1000n, 1000n]);
    const audit = await listAuditLogs({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { action: 'access.units_granted' },
    });
    expect(audit.data![0]!.changes).toMatchObject({ units: '1000', reason: 'support ticket 42' });
    await expect.poll(() => page.getByTestId('quota-cell').textContent()).toBe(`60 / ${(quota + 1000n).toLocaleString('en-US')}`);
    await new Promise((r) => setTimeout(r, 300));
    expect((await call(tenant.apiKey)).status).toBe(200);
    expect(browserErrors).toEqual([]);
  });

  it("explains a plan change's pro-rated grant", async () => {
    const bigger = await activePlan(t.client, tenant.workspaceId, { key: 'at-quota-bigger', quotaUnits: '90000' });
    const accessId = tenant.users[1]!.accessId;
    expect((await changeAccessPlan({ client: t.client, path: { accessId }, body: { planId: bigger.plan.id } })).response.status).toBe(200);
    const part = await t.database.db('quota_periods').where({ workspace_access_id: accessId, source: 'plan_change' }).first();
    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/users/at-quota-user-1`);
    await page.getByRole('button', { name: 'Manage at-quota-user-1' }).click();
    const text = (await page.getByTestId('grant-explained').textContent())!;
    expect(text).toMatch(/^Pro-rated: this period began with a plan change on .+\. The plan gives 90,000 units a cycle/);
    expect(text).toContain(`${BigInt(part.granted_units).toLocaleString('en-US')} granted.`);
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    expect(browserErrors).toEqual([]);
  });
});

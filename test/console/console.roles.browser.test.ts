/**
 * The console shows what the caller's role may do, in Chromium on a live Nexus: the owner makes a viewer's
 * Management Key in the console; signed in with it, the plans, connections and budget pages show their lists and no form or button that changes
 * anything, and no Management keys page; a developer's key sees the plan form (their role may draft plans) but
 * not the budget's. The audit page filters by the person who made a change.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { chromiumOrWarn, signIn, unfold, chromiumPage } from './console-support.js';

const executablePath = chromiumOrWarn("the console's roles browser test");

describe.skipIf(!executablePath)('the console by role, in Chromium', () => {
  let t: TestApp;
  let browser: Browser;
  let page: Page;
  let workspaceId: string;
  const keys: Record<'viewer' | 'developer', string> = { viewer: '', developer: '' };
  const browserErrors: string[] = [];

  async function root(method: string, path: string, body: unknown): Promise<Record<string, string>> {
    const res = await fetch(`${t.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status, path).toBeLessThan(300);
    return (await res.json()) as Record<string, string>;
  }

  beforeAll(async () => {
    t = await startTestApp();
    workspaceId = (await root('POST', '/workspaces', { name: 'By role' })).id!;
    await root('POST', `/workspaces/${workspaceId}/plans`, { key: 'starter', name: 'Starter', billingInterval: 'MONTH' });
    keys.developer = (
      await root('POST', '/management-keys', { name: 'developer key', workspaceIds: [workspaceId], role: 'developer' })
    ).key!;
    // A change made by a person in their session, for the audit's filter.
    await root('POST', `/workspaces/${workspaceId}/members`, { email: 'ada@acme.example', role: 'developer' });
    const session = await t.nexus.services.people.sessions.start({
      person: { issuer: 'https://idp.acme.example', subject: 'ada', email: 'ada@acme.example', name: 'Ada Lovelace' },
      provider: 'acme',
      isOwner: false,
    });
    const cookie = `__Host-nexus_session=${session.token}`;
    const { csrfToken } = (await (await fetch(`${t.url}/auth/session`, { headers: { cookie } })).json()) as { csrfToken: string };
    const made = await fetch(`${t.url}/admin/v1/workspaces/${workspaceId}/plans`, {
      method: 'POST',
      headers: { cookie, 'x-csrf-token': csrfToken, 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'adas', name: "Ada's", billingInterval: 'MONTH' }),
    });
    expect(made.status).toBe(201);
    ({ browser, page } = await chromiumPage(executablePath!, browserErrors, { context: { viewport: { width: 1360, height: 900 } } }));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /** Opens a page of the workspace once the caller's operations are read, and waits for `ready` on it. */
  async function open(path: string, ready: string) {
    await page.goto(`${t.url}/console/#/w/${workspaceId}/${path}`);
    await page.getByText(ready).first().waitFor();
  }

  it('a viewer sees the lists and no form or button that changes anything; a developer sees the plan form', async () => {
    // The owner makes the viewer's key in the console.
    await signIn(page, t.url);
    await page.goto(`${t.url}/console/#/management-keys`);
    await unfold(page, 'New Management Key');
    const form = page.getByRole('form', { name: 'Create a Management Key' });
    await form.getByLabel('Name').fill('dashboards');
    await form.locator('select[name="managementKeyRole"]').selectOption('viewer');
    await form.getByRole('checkbox', { name: 'By role' }).check();
    await form.getByRole('button', { name: 'Create key' }).click();
    keys.viewer = (await page.getByTestId('shown-once').textContent())!.trim();
    await page.getByRole('row', { name: /dashboards.*as viewer/ }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();

    const caller = page.waitForResponse((res) => res.url().endsWith('/admin/v1/caller'));
    await signIn(page, t.url, keys.viewer);
    expect((await caller).status()).toBe(200);
    const nav = page.getByRole('navigation', { name: 'Pages' });
    expect(await nav.getByRole('link', { name: 'Workspaces' }).count()).toBe(1);
    expect(await nav.getByRole('link', { name: 'Management keys' }).count()).toBe(0);

    await open('plans', "Ada's");
    // No form of the page (its filters are toolbars, not forms that change anything).
    expect(await page.locator('form.card').count()).toBe(0);
    expect(await page.getByRole('button', { name: /^New / }).count()).toBe(0);
    expect(await page.getByRole('button', { name: /^Publish/ }).count()).toBe(0);
    await open('connections', 'No provider connection');
    expect(await page.getByRole('form', { name: 'Create a connection' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'New connection' }).count()).toBe(0);
    await open('budget', 'spend per day or month in its time zone');
    expect(await page.getByRole('form', { name: 'Set the budget' }).count()).toBe(0);

    // The audit page, filtered by a person: her change, named.
    await open('audit', 'plan.created');
    await page.getByLabel('Actor').fill('ada@acme.example');
    await page.getByLabel('Actor').press('Enter');
    await expect.poll(() => page.getByTestId('audit-actor').allTextContents()).toEqual([expect.stringContaining('Ada Lovelace')]);
    expect(await page.getByTestId('audit-actor').textContent()).toContain('as developer');

    // A developer's key: the plan form is theirs, the budget's is not.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await signIn(page, t.url, keys.developer);
    await open('plans', "Ada's");
    await unfold(page, 'New plan');
    await page.getByRole('form', { name: 'Draft a plan' }).waitFor();
    expect(await page.getByRole('button', { name: /^Publish/ }).count()).toBeGreaterThan(0);
    await open('budget', 'spend per day or month in its time zone');
    expect(await page.getByRole('form', { name: 'Set the budget' }).count()).toBe(0);
    expect(browserErrors).toEqual([]);
  }, 30_000);
});

/**
 * The passthrough classes in the console, in Chromium (playwright-core, Debian's Chromium) on a live Nexus: ticked
 * on the workspace's settings and on a published plan, and on a plan drafted with them, they are saved (read back
 * through the Admin API, and shown again after a reload), and the gateway lets that class through at once. The
 * workspace's retention policy, on the same settings page, likewise. Each page is scanned by axe-core.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { projectRoot } from '../support/paths.js';
import { getPlan, getRetentionPolicy, getWorkspace, listPlans } from '../support/sdk.js';
import { provisionTenant, type Tenant } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { axeViolations, chromiumOrWarn, unfold, signedInChromium, goByNav, openConnections } from './console-support.js';

const executablePath = chromiumOrWarn("the console's passthrough browser test");
const shots = join(projectRoot, 'test-results', 'console');

describe.skipIf(!executablePath)('the console: passthrough classes of a workspace and a plan, in Chromium', () => {
  let t: TestApp;
  let upstream: FakeUpstream;
  let browser: Browser;
  let page: Page;
  let tenant: Tenant;
  const browserErrors: string[] = [];
  const providerKey = testProviderKey('console-passthrough');

  /** The status of a gateway call of `path` with the tenant's key. */
  const gateway = async (path: string) =>
    (await fetch(`${tenant.gatewayBaseUrl}/${path}`, { headers: { authorization: `Bearer ${tenant.apiKey}` } })).status;
  const go = (link: string) => goByNav(page, link);
  const box = (name: string, value: string) => page.locator(`input[type="checkbox"][name="${name}"][value="${value}"]`);

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    t = await startTestApp();
    upstream = await startOpenAiUpstream({ apiKey: providerKey });
    tenant = await provisionTenant(t.client, { name: 'passthrough', baseUrl: upstream.url, providerKey });
    ({ browser, page } = await signedInChromium(executablePath!, t.url, browserErrors));
    await openConnections(page, t.url, tenant.workspaceId);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await upstream?.close();
  });

  it('workspace settings: the classes ticked are saved, shown again after a reload, and the gateway lets them through', async () => {
    expect(await gateway('v1/files')).toBe(409);
    await go('Workspace settings');
    await expect.poll(() => page.getByTestId('workspace-passthrough').textContent()).toBe('none');
    await box('workspacePassthrough', 'fine_tuning').check();
    await box('workspacePassthrough', 'files').check();
    await page.getByRole('form', { name: 'Passthrough classes' }).getByRole('button', { name: 'Save passthrough classes' }).click();
    await page.getByText('Saved: files, fine_tuning let through, from the next gateway call.').waitFor();

    const saved = await getWorkspace({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    expect(saved.data!.passthroughClasses).toEqual(['files', 'fine_tuning']);
    expect(await gateway('v1/files')).toBe(200);
    expect(await gateway('v1/evals')).toBe(409);

    await page.reload();
    await page.getByRole('heading', { name: 'Workspace settings', level: 1 }).waitFor();
    await expect.poll(() => page.getByTestId('workspace-passthrough').textContent()).toBe('files, fine_tuning');
    expect(await box('workspacePassthrough', 'files').isChecked()).toBe(true);
    expect(await box('workspacePassthrough', 'batches').isChecked()).toBe(false);
    await page.screenshot({ path: join(shots, 'passthrough-settings.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
    expect(browserErrors).toEqual([]);
  });

  it('workspace settings: the retention policy is shown, saved, read back through the API and shown after a reload', async () => {
    await expect.poll(() => page.getByTestId('retention-detail').textContent()).toBe('90 days');
    expect(await page.getByTestId('retention-rollup').textContent()).toBe('730 days');
    const form = page.getByRole('form', { name: 'Retention policy' });
    await form.getByLabel('Detail (days)').fill('30');
    await form.getByLabel('Totals (days)').fill('365');
    await form.getByRole('button', { name: 'Save retention' }).click();
    await page.getByText('Saved: detail kept 30 days, totals 365 days, applied within the hour.').waitFor();
    const saved = await getRetentionPolicy({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    expect(saved.data).toEqual({ workspaceId: tenant.workspaceId, detailDays: 30, rollupDays: 365 });

    await page.reload();
    await expect.poll(() => page.getByTestId('retention-detail').textContent()).toBe('30 days');
    expect(await page.getByTestId('retention-rollup').textContent()).toBe('365 days');
    expect(await axeViolations(page)).toEqual([]);
    expect(browserErrors).toEqual([]);
  });

  it("plans: a published plan's classes are saved from its row, and a plan drafted with classes keeps them", async () => {
    await go('Plans and strategies');
    const row = page.getByRole('row', { name: /passthrough.*ACTIVE/ });
    await row.getByRole('button', { name: 'Passthrough' }).click();
    await box('planPassthrough', 'evals').check();
    await page
      .getByRole('form', { name: 'Passthrough classes of passthrough' })
      .getByRole('button', { name: 'Save passthrough classes' })
      .click();
    await page.getByRole('row', { name: /passthrough.*ACTIVE.*evals/ }).waitFor();
    expect((await getPlan({ client: t.client, path: { planId: tenant.planId } })).data!.passthroughClasses).toEqual(['evals']);
    expect(await gateway('v1/evals')).toBe(200);

    await unfold(page, 'New plan');
    const draft = page.getByRole('form', { name: 'Draft a plan' });
    await draft.getByLabel('Key').fill('with-evals');
    await draft.getByLabel('Name').fill('With evals');
    await box('newPlanPassthrough', 'evals').check();
    await draft.getByRole('button', { name: 'Draft plan' }).click();
    await page.getByRole('row', { name: /With evals.*DRAFT.*evals/ }).waitFor();
    const plans = await listPlans({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { key: 'with-evals' } });
    expect(plans.data!.map((p) => p.passthroughClasses)).toEqual([['evals']]);

    // The editor open, for the scan.
    await page
      .getByRole('row', { name: /With evals.*DRAFT/ })
      .getByRole('button', { name: 'Passthrough' })
      .click();
    await page.getByRole('form', { name: 'Passthrough classes of With evals' }).waitFor();
    await page.screenshot({ path: join(shots, 'passthrough-plans.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
    expect(browserErrors).toEqual([]);
  });
});

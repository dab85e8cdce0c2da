/**
 * Settings edited where they are shown, in Chromium (playwright-core, Debian's Chromium) on a live Nexus: a published
 * plan's rate limits (the limit not touched kept), connections of the gemini, azure-openai and bedrock profiles
 * created with their own fields, and a connection edited (only what changed sent). Each is read back through the
 * Admin API, the database and the audit; each page is scanned by axe-core, in light and dark.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { projectRoot } from '../support/paths.js';
import { getPlan, listAuditLogs, listProviderConnections } from '../support/sdk.js';
import { provisionTenant, type Tenant } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { chromiumOrWarn, axeViolationsInBothSchemes, signedInChromium, goByNav, openConnections } from './console-support.js';

const executablePath = chromiumOrWarn("the console's settings browser test");
const shots = join(projectRoot, 'test-results', 'console');

describe.skipIf(!executablePath)('the console: settings edited where they are shown, in Chromium', () => {
  let t: TestApp;
  let upstream: FakeUpstream;
  let browser: Browser;
  let page: Page;
  let tenant: Tenant;
  const browserErrors: string[] = [];
  const providerKey = testProviderKey('console-settings');

  const go = (link: string) => goByNav(page, link);
  const audited = async (action: string) =>
    (await listAuditLogs({ client: t.client, path: { workspaceId: tenant.workspaceId }, query: { action } })).data!;

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    t = await startTestApp();
    upstream = await startOpenAiUpstream({ apiKey: providerKey });
    tenant = await provisionTenant(t.client, {
      name: 'settings',
      baseUrl: upstream.url,
      providerKey,
      rateLimits: { tokensPerMinute: 5000 },
    });
    ({ browser, page } = await signedInChromium(executablePath!, t.url, browserErrors, {
      context: { viewport: { width: 1360, height: 900 } },
    }));
    await openConnections(page, t.url, tenant.workspaceId);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await upstream?.close();
  });

  it("a published plan's rate limits: one set, the one not touched kept, from the plan's row", async () => {
    const before = (await getPlan({ client: t.client, path: { planId: tenant.planId } })).data!;
    expect(before.status).toBe('ACTIVE');
    await go('Plans and strategies');
    await page.getByRole('button', { name: 'Rate limits' }).click();
    const form = page.getByRole('form', { name: `Rate limits of ${before.name}` });
    expect(await form.getByLabel('Tokens per minute').inputValue()).toBe('5000');
    expect(await form.getByLabel('Requests per minute').inputValue()).toBe('');
    await form.getByLabel('Requests per minute').fill('120');
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    await form.getByRole('button', { name: 'Save rate limits' }).click();
    await page.getByRole('row', { name: /120 requests\/min, 5,000 tokens\/min/ }).waitFor();

    const after = (await getPlan({ client: t.client, path: { planId: tenant.planId } })).data!;
    expect(after.rateLimits).toEqual({ requestsPerMinute: 120, tokensPerMinute: 5000 });
    expect(after.status).toBe('ACTIVE');
    const row = await t.database.db('plans').where({ id: tenant.planId }).first();
    expect(JSON.stringify(row)).toContain('120');
    expect((await audited('plan.rate_limits_changed'))[0]!.changes).toMatchObject({
      before: { tokensPerMinute: 5000 },
      after: { requestsPerMinute: 120, tokensPerMinute: 5000 },
    });
    expect(browserErrors).toEqual([]);
  });

  it('connections of the gemini, azure-openai and bedrock profiles, each with its own fields', async () => {
    await go('Provider connections');
    await page.getByRole('button', { name: 'New connection' }).click();
    const create = page.getByRole('form', { name: 'Create a connection' });
    const make = async (name: string, profile: string, baseUrl: string, more?: () => Promise<void>) => {
      await create.getByLabel('Name', { exact: true }).fill(name);
      await create.getByLabel('Protocol').selectOption(profile);
      await create.getByLabel('Upstream base URL').fill(baseUrl);
      await create.getByLabel('Provider API key').fill(testProviderKey(name));
      await more?.();
      await create.getByRole('button', { name: 'Create connection' }).click();
      await page.getByRole('cell', { name: new RegExp(name) }).waitFor();
    };
    await make('gemini-conn', 'gemini', upstream.url);
    await make('azure-conn', 'azure-openai', upstream.url);
    await create.getByLabel('Protocol').selectOption('bedrock');
    expect(await create.getByLabel('AWS region').count()).toBe(1);
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    await make('bedrock-conn', 'bedrock', upstream.url, async () => {
      await create.getByLabel('AWS region').fill('eu-west-3');
      await create.getByLabel('AWS access key id (optional)').fill('AKIAEXAMPLE12345678');
    });

    const connections = (await listProviderConnections({ client: t.client, path: { workspaceId: tenant.workspaceId } })).data!;
    const byName = Object.fromEntries(connections.map((c) => [c.name, c]));
    expect(byName['gemini-conn']!.protocolProfile).toBe('gemini');
    expect(byName['azure-conn']!.protocolProfile).toBe('azure-openai');
    expect(byName['bedrock-conn']).toMatchObject({ protocolProfile: 'bedrock', baseUrl: upstream.url });
    // The region and access key id are stored sealed with the key, never in the clear.
    const row = await t.database.db('provider_connections').where({ id: byName['bedrock-conn']!.id }).first();
    expect(JSON.stringify(row)).not.toContain('AKIAEXAMPLE12345678');
    const created = (await audited('provider_connection.created')).find((e) => e.resourceId === byName['bedrock-conn']!.id)!;
    expect(created.changes).toMatchObject({ protocolProfile: 'bedrock', awsRegion: 'eu-west-3' });
    expect(browserErrors).toEqual([]);
  });

  it('a connection edited: its timeout and output-cap setting saved, nothing else sent', async () => {
    const row = page.getByRole('row', { name: /gemini-conn/ });
    await row.getByRole('button', { name: 'Edit' }).click();
    const form = page.getByRole('form', { name: 'Edit gemini-conn' });
    await form.getByLabel('Upstream timeout (ms)').fill('45000');
    await form.getByRole('checkbox', { name: /keeps to the output cap/ }).uncheck();
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    await form.getByRole('button', { name: 'Save connection' }).click();
    await form.waitFor({ state: 'detached' });
    const conn = (await listProviderConnections({ client: t.client, path: { workspaceId: tenant.workspaceId } })).data!.find(
      (c) => c.name === 'gemini-conn',
    )!;
    expect(conn).toMatchObject({ upstreamTimeoutMs: 45000, enforcesOutputCap: false, baseUrl: upstream.url, protocolProfile: 'gemini' });
    const updated = (await audited('provider_connection.updated')).filter((e) => e.resourceId === conn.id);
    expect(updated.map((e) => Object.keys(e.changes).sort())).toEqual([['enforcesOutputCap', 'upstreamTimeoutMs']]);
    expect(browserErrors).toEqual([]);
  });
});

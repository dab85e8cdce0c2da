/**
 * A call's request log on its page in the console, in Chromium (playwright-core, Debian's Chromium) on a live Nexus:
 * a workspace that keeps them shows the call's request and its stream's answer as its client assembled it; a call
 * that kept none says so. The page is scanned by axe-core.
 */
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { updateWorkspace } from '../support/sdk.js';
import { provisionTenant, type Tenant } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { axeViolations, CHROMIUM_ARGS, chromiumOrWarn, signIn, watchedPage } from './console-support.js';

const executablePath = chromiumOrWarn("the console's request logs browser test");

describe.skipIf(!executablePath)("the console: a call's request log, in Chromium", () => {
  let t: TestApp;
  let upstream: FakeUpstream;
  let browser: Browser;
  let page: Page;
  let tenant: Tenant;
  const browserErrors: string[] = [];
  const providerKey = testProviderKey('console-request-logs');

  /** A streamed chat call of the tenant: its invocation id, and the text its client received. */
  async function streamed(content: string): Promise<{ id: string; text: string }> {
    const answer = await fetch(`${tenant.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content }], max_tokens: 20 }),
    });
    let text = '';
    for (const line of (await answer.text()).split('\n')) {
      if (!line.startsWith('data: {')) continue;
      text += (JSON.parse(line.slice(6)) as { choices: { delta?: { content?: string } }[] }).choices[0]?.delta?.content ?? '';
    }
    await t.nexus.gateway.drain();
    const row = await t.database
      .db('invocations')
      .where({ request_id: answer.headers.get('x-nexus-request-id') })
      .first('id');
    return { id: (row as { id: string }).id, text };
  }

  const open = async (id: string) => {
    await page.goto('about:blank');
    await page.goto(`${t.url}/console/#/invocations/${id}`);
    await page.getByRole('heading', { name: 'Request and answer' }).waitFor();
    return page.locator('.detail');
  };

  beforeAll(async () => {
    t = await startTestApp();
    upstream = await startOpenAiUpstream({ apiKey: providerKey });
    tenant = await provisionTenant(t.client, { name: 'request-logs', baseUrl: upstream.url, providerKey });
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
    page = await watchedPage(browser, { viewport: { width: 1440, height: 900 }, locale: 'en-US', timezoneId: 'UTC' }, browserErrors);
    await signIn(page, t.url);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await upstream?.close();
  });

  it('shows the request and the stream assembled of a call that kept its log, and says when a call kept none', async () => {
    const before = await streamed('Before the policy');
    const set = await updateWorkspace({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { requestLog: { mode: 'all' } },
    });
    expect(set.response.status).toBe(200);
    const kept = await streamed('Bonjour from the console');

    const detail = await open(kept.id);
    await expect.poll(() => detail.textContent()).toContain('Bonjour from the console');
    expect(kept.text.length).toBeGreaterThan(0);
    expect(await detail.textContent()).toContain('a stream: its text assembled');
    expect(await detail.locator('pre.request-log-body').nth(1).textContent()).toBe(kept.text);
    expect(await axeViolations(page)).toEqual([]);

    const none = await open(before.id);
    await expect.poll(() => none.textContent()).toContain('No request log was kept for this call');
    expect(browserErrors).toEqual([]);
  });
});

/**
 * A call's request log on its page in the console, in Chromium (playwright-core, Debian's Chromium) on a live Nexus:
 * a workspace that keeps them shows the call's request and its stream's answer as its client assembled it; a call
 * that kept none says so. The request log policy is set in the console on the workspace's settings, a plan and a
 * route, read back through the API, and the gateway keeps (or not) as it says. The pages are scanned by axe-core.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { getInvocationLog, getPlan, getRoute, getWorkspace, listRoutes, updateWorkspace } from '../support/sdk.js';
import { provisionTenant, type Tenant } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { axeViolations, chromiumOrWarn, signedInChromium, unfold } from './console-support.js';

const executablePath = chromiumOrWarn("the console's request logs browser test");

describe.skipIf(!executablePath)("the console: a call's request log, in Chromium", () => {
  let t: TestApp;
  let upstream: FakeUpstream;
  let browser: Browser;
  let page: Page;
  let tenant: Tenant;
  const browserErrors: string[] = [];
  const providerKey = testProviderKey('console-request-logs');

  /** A streamed chat call of the tenant (through `base`: its connection unless told): its invocation id, and the text its client received. */
  async function streamed(content: string, base = tenant.gatewayBaseUrl): Promise<{ id: string; text: string }> {
    const answer = await fetch(`${base}/v1/chat/completions`, {
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
    ({ browser, page } = await signedInChromium(executablePath!, t.url, browserErrors));
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

  it("sets the workspace's, a plan's and a route's policy in the console; the API reads each back and the gateway keeps as they say", async () => {
    const kept = async (id: string) => (await getInvocationLog({ client: t.client, path: { invocationId: id } })).response.status;

    // The workspace: failed calls only. A call that succeeds keeps nothing.
    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/settings`);
    const workspaceForm = page.getByRole('form', { name: 'Request logs' });
    await workspaceForm.getByLabel('Keep bodies of').selectOption('failed');
    await workspaceForm.getByLabel('Kept (days)').fill('5');
    await workspaceForm.getByRole('button', { name: 'Save request log policy' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved: failed calls only' }).waitFor();
    await expect
      .poll(() => page.getByTestId('workspace-request-log').textContent())
      .toBe('failed calls only · bodies up to 65,536 bytes · kept 5 days');
    const workspace = (await getWorkspace({ client: t.client, path: { workspaceId: tenant.workspaceId } })).data!;
    expect(workspace.requestLog).toEqual({ mode: 'failed', maxBodyBytes: 65536, retentionDays: 5 });
    expect(await kept((await streamed('A success under failed-only')).id)).toBe(404);
    expect(await axeViolations(page)).toEqual([]);

    // The plan: every call sampled (100 %), each body cut at 2,048 bytes. It comes before the workspace's.
    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/plans`);
    const plan = (await getPlan({ client: t.client, path: { planId: tenant.planId } })).data!;
    await page.getByRole('button', { name: 'Request logs', exact: true }).click();
    const planForm = page.getByRole('form', { name: `Request logs of ${plan.name}` });
    await planForm.getByLabel('Keep bodies of').selectOption('sampled');
    await planForm.getByLabel('Share kept (%)').fill('100');
    await planForm.getByLabel('Body cap (bytes)').fill('2048');
    await planForm.getByRole('button', { name: 'Save request log policy' }).click();
    await page
      .getByRole('row', { name: new RegExp(`${plan.name}.*100% of calls sampled · bodies up to 2,048 bytes · kept 7 days`) })
      .waitFor();
    expect((await getPlan({ client: t.client, path: { planId: tenant.planId } })).data!.requestLog).toEqual({
      mode: 'sampled',
      sampleRate: 1,
      maxBodyBytes: 2048,
      retentionDays: 7,
    });
    const long = await streamed(`A long question ${'x'.repeat(4000)}`);
    const log = await getInvocationLog({ client: t.client, path: { invocationId: long.id } });
    expect(log.response.status).toBe(200);
    expect(log.data!.request.truncated).toBe(true);
    expect(Buffer.byteLength(log.data!.request.body)).toBeLessThanOrEqual(2048);
    expect(await axeViolations(page)).toEqual([]);

    // A route made in the console with its policy off: its calls keep nothing, over the plan's.
    await page.goto(`${t.url}/console/#/w/${tenant.workspaceId}/routes`);
    await unfold(page, 'New route');
    const routeForm = page.getByRole('form', { name: 'Create a route' });
    await routeForm.getByLabel('Name').fill('quiet');
    await routeForm.getByRole('group', { name: 'Target 1' }).getByLabel('Connection').selectOption({ index: 1 });
    await routeForm.getByLabel('Keep bodies of').selectOption('off');
    await routeForm.getByRole('button', { name: 'Create route' }).click();
    await page.getByRole('row', { name: /quiet.*ACTIVE/ }).waitFor();
    const route = (await listRoutes({ client: t.client, path: { workspaceId: tenant.workspaceId } })).data!.find(
      (r) => r.name === 'quiet',
    )!;
    expect(route.requestLog).toMatchObject({ mode: 'off' });
    expect(await kept((await streamed('Through the quiet route', route.gatewayBaseUrl)).id)).toBe(404);

    // Edited back to none: the plan's applies to its calls again, and the form shows the route as saved.
    await page.getByRole('button', { name: 'Edit quiet' }).click();
    const editing = page.getByRole('form', { name: 'Edit quiet' });
    await expect.poll(() => editing.getByLabel('Keep bodies of').inputValue()).toBe('off');
    await editing.getByLabel('Keep bodies of').selectOption('');
    await editing.getByRole('button', { name: 'Save route' }).click();
    await page.getByRole('button', { name: 'New route', exact: true, expanded: false }).waitFor();
    expect((await getRoute({ client: t.client, path: { routeId: route.id } })).data!.requestLog ?? null).toBeNull();
    expect(await kept((await streamed('Through the route again', route.gatewayBaseUrl)).id)).toBe(200);
    expect(browserErrors).toEqual([]);
  }, 120_000);
});

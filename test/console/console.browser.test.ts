/**
 * The operator console in a real browser: Debian's Chromium driven by playwright-core (no browser
 * download), on a live Nexus with a fake upstream. It signs in, builds a tenant page by page (a
 * workspace, a connection, a strategy, a plan and a user with a key), calls the gateway with the
 * official openai SDK, finds the call in the invocations and in the chart, and suspends the access;
 * then a key scoped to that workspace signs in and sees no other. Then a stricter plan set in the UI (a model
 * rule, an allow-list, a rate limit) is applied to the next gateway call, every page is scanned by axe-core
 * in light and dark mode, and a revoked key sends the console back to sign-in.
 * Each page's screenshot goes to test-results/console/.
 *
 * No Chromium: CI (CI=true) fails here; elsewhere the suite is skipped with a loud warning.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { get, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemActor } from '../../src/domain/actor.js';
import { ACCESS_ID_METADATA_KEY } from '../../src/domain/billing/billing-types.js';
import { FakeStripe } from '../billing/fake-stripe.js';
import {
  createWorkspace,
  listBillingConnections,
  listBillingWebhookEvents,
  listPlans,
  listProviderConnections,
  provisionWorkspaceUser,
} from '../support/sdk.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { projectRoot } from '../support/paths.js';
import { axeViolations, chromiumOrWarn, unfold, chromiumPage, goByNav } from './console-support.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

const executablePath = chromiumOrWarn("the console's browser test");

const shots = join(projectRoot, 'test-results', 'console');

/** A GET as a plain HTTP client makes it: the body's bytes as sent (not decoded), and the headers. */
function rawGet(url: string, acceptEncoding: string): Promise<{ headers: IncomingHttpHeaders; length: number }> {
  return new Promise((resolve, reject) => {
    get(url, { headers: { 'accept-encoding': acceptEncoding } }, (res) => {
      let length = 0;
      res.on('data', (chunk: Buffer) => (length += chunk.length));
      res.on('end', () => resolve({ headers: res.headers, length }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** Is the element inside the viewport (its top edge visible)? */
const inView = (el: Element) => {
  const r = el.getBoundingClientRect();
  return r.top >= -1 && r.top < window.innerHeight;
};

describe.skipIf(!executablePath)('the operator console in Chromium', () => {
  let t: TestApp;
  let upstream: FakeUpstream;
  let stripe: FakeStripe;
  let browser: Browser;
  let page: Page;
  const browserErrors: string[] = [];
  const providerKey = testProviderKey('console');

  const dialogs: string[] = [];
  const shot = (name: string) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  const go = (link: string) => goByNav(page, link);

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    stripe = await new FakeStripe().start();
    t = await startTestApp({ env: { NEXUS_STRIPE_API_BASE_URL: stripe.url } });
    upstream = await startOpenAiUpstream({ apiKey: providerKey });
    // Confirmations (suspend, revoke, archive): accepted, and their question kept to check.
    ({ browser, page } = await chromiumPage(executablePath!, browserErrors, {
      context: { viewport: { width: 1360, height: 900 }, locale: 'en-GB' },
      dialogs,
    }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await upstream?.close();
    await stripe?.close();
  });

  it('is served at /console with a strict CSP, and never by the API router', async () => {
    const res = await fetch(`${t.url}/console`, { redirect: 'manual' });
    expect(res.status).toBe(301);
    expect(res.headers.get('location')).toBe('console/');
    const index = await fetch(`${t.url}/console/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toContain('text/html');
    expect(index.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await index.text()).toContain('<script type="module" src="app.js">');
    const missing = await fetch(`${t.url}/console/nothing.js`);
    expect(missing.status).toBe(404);
    expect(await missing.text()).toContain('Not found in the console');
  });

  it('answers / with the console, serves its bundles precompressed, and has a favicon', async () => {
    const root = await fetch(`${t.url}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('console/');
    const plain = await fetch(`${t.url}/console/app.js`, { headers: { 'accept-encoding': 'identity' } });
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(plain.headers.get('vary')).toContain('Accept-Encoding');
    const size = (await plain.arrayBuffer()).byteLength;
    for (const encoding of ['br', 'gzip']) {
      // node's fetch decodes what it asked for: the raw answer is read with a plain HTTP request instead.
      const raw = await rawGet(`${t.url}/console/app.js`, encoding);
      expect(raw.headers['content-encoding']).toBe(encoding);
      expect(raw.headers['content-type']).toContain('javascript');
      expect(raw.headers['vary']).toContain('Accept-Encoding');
      expect(raw.headers['content-security-policy']).toContain("script-src 'self'");
      expect(raw.length).toBeLessThan(size / 2);
    }
    const css = await rawGet(`${t.url}/console/app.css`, 'br');
    expect(css.headers['content-type']).toContain('text/css');
    expect(css.headers['content-encoding']).toBe('br');
    const icon = await fetch(`${t.url}/console/favicon.svg`);
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toContain('image/svg+xml');
    expect(await (await fetch(`${t.url}/console/`)).text()).toContain('<link rel="icon" href="favicon.svg"');
  });

  it('signs in, builds a tenant, sees a gateway call in the invocations and the chart, and suspends the access', async () => {
    const missing: string[] = [];
    page.on('response', (res) => {
      if (res.status() === 404) missing.push(res.url());
    });
    await page.goto(`${t.url}/`);
    await expect.poll(() => page.getByRole('heading', { name: 'Sign in' }).isVisible()).toBe(true);
    expect(page.url()).toBe(`${t.url}/console/`);
    // The favicon is the console's own: no 404 for /favicon.ico on every load.
    expect(missing).toEqual([]);
    // A wrong key: the API's message and its request id.
    await page.getByLabel('Management Key').fill('nx-mgmt-not-a-key-0123456789abcdef');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Request id');
    await shot('01-sign-in');
    await page.getByLabel('Management Key').fill(TEST_ROOT_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Signing in checks the key against the API first, so the key is stored once that answers.
    await expect.poll(() => page.getByRole('heading', { name: 'Workspaces', level: 1 }).isVisible()).toBe(true);
    expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual(['nexus.console.managementKey']);
    expect(await page.evaluate(() => Object.keys(localStorage))).toEqual([]);

    // Workspaces: the empty state says what to do, then one is created.
    await expect.poll(() => page.getByText('No workspace here yet').isVisible()).toBe(true);
    // The page opens with its list; the form is behind its button.
    expect(await page.getByRole('form', { name: 'Create a workspace' }).count()).toBe(0);
    await unfold(page, 'New workspace');
    const createWs = page.getByRole('form', { name: 'Create a workspace' });
    await createWs.getByLabel('Name').fill('Acme production');
    await createWs.getByRole('button', { name: 'Create workspace' }).click();
    await page.getByRole('link', { name: 'Acme production' }).waitFor();
    // The header's picker hears of the new workspace without a reload.
    await expect.poll(() => page.getByRole('combobox', { name: 'Workspace' }).textContent()).toContain('Acme production');
    await shot('02-workspaces');
    await page.getByRole('link', { name: 'Acme production' }).click();

    // Provider connections: tested before saving, created, verified.
    await expect.poll(() => page.getByRole('heading', { name: 'Provider connections', level: 1 }).isVisible()).toBe(true);
    // The page opens with its list; the form is behind its button.
    expect(await page.getByRole('form', { name: 'Create a connection' }).count()).toBe(0);
    await page.getByRole('button', { name: 'New connection' }).click();
    const createConn = page.getByRole('form', { name: 'Create a connection' });
    await createConn.getByLabel('Name').fill('OpenAI (fake)');
    await createConn.getByLabel('Upstream base URL').fill(upstream.url);
    await createConn.getByLabel('Provider API key').fill(providerKey);
    await createConn.getByRole('button', { name: 'Test before saving' }).click();
    await expect.poll(() => page.getByRole('status').filter({ hasText: 'Test:' }).textContent()).toMatch(/Test: \w+/);
    await createConn.getByRole('button', { name: 'Create connection' }).click();
    await page.getByRole('cell', { name: /OpenAI \(fake\)/ }).waitFor();
    await page.getByRole('button', { name: 'Verify' }).click();
    await expect.poll(() => page.getByRole('status').filter({ hasText: 'Verify' }).textContent()).toContain('Verify OpenAI (fake)');
    await shot('03-connections');

    // Plans and strategies: a strategy drafted and published, a plan drafted, bound from now, published.
    await go('Plans and strategies');
    await unfold(page, 'New quota strategy');
    const draftStrategy = page.getByRole('form', { name: 'Draft a quota strategy' });
    await draftStrategy.getByLabel('Key').fill('standard-quota');
    await draftStrategy.getByLabel('Units per period').fill('100000');
    await draftStrategy.getByRole('button', { name: 'Draft strategy' }).click();
    await page.getByRole('button', { name: 'Publish standard-quota v1' }).click();
    await page.getByRole('cell', { name: 'PUBLISHED' }).waitFor();
    // The form starts again after a draft; multipliers read as factors, not parts per million.
    expect(await draftStrategy.getByLabel('Key').inputValue()).toBe('');
    await page.getByRole('cell', { name: '×1 / ×1 / ×1' }).waitFor();
    // An actions cell stays a table cell, so its borders line up with its row's.
    expect(
      await page
        .locator('td.actions')
        .first()
        .evaluate((el) => getComputedStyle(el).display),
    ).toBe('table-cell');
    await unfold(page, 'New plan');
    const draftPlan = page.getByRole('form', { name: 'Draft a plan' });
    await draftPlan.getByLabel('Key').fill('standard');
    await draftPlan.getByLabel('Name').fill('Standard');
    await draftPlan.getByRole('button', { name: 'Draft plan' }).click();
    const bind = page.getByRole('form', { name: 'Bind a strategy to Standard' });
    await bind.getByRole('button', { name: 'Bind strategy' }).click();
    await page.getByRole('table', { name: 'Bindings of Standard' }).getByRole('cell', { name: 'standard-quota v1' }).waitFor();
    await page.getByRole('button', { name: 'Publish Standard' }).click();
    // The list shows the strategy each plan is on.
    await page.getByRole('row', { name: /Standard.*ACTIVE.*standard-quota v1/ }).waitFor();
    await shot('04-plans');

    // Users and accesses: while the plans load it says so, not "No published plan yet".
    let releasePlans = () => {};
    const plansHeld = new Promise<void>((resolve) => (releasePlans = resolve));
    await page.route(/\/plans(\?|$)/, async (route) => {
      await plansHeld;
      await route.fallback();
    });
    await go('Users and accesses');
    expect(await page.getByRole('form', { name: 'Provision a user' }).count()).toBe(0);
    await unfold(page, 'New user');
    await page.getByText('Loading plans…').waitFor();
    expect(await page.getByText('No published plan yet').count()).toBe(0);
    releasePlans();
    await page.getByRole('form', { name: 'Provision a user' }).waitFor();
    await page.unroute(/\/plans(\?|$)/);
    // Provisioned with a key, shown once.
    const provision = page.getByRole('form', { name: 'Provision a user' });
    await provision.getByLabel('External user id').fill('alice');
    await provision.getByLabel('Email').fill('alice@example.com');
    await provision.getByRole('button', { name: 'Provision user' }).click();
    const secret = (await page.getByTestId('shown-once').textContent())!.trim();
    expect(secret).toMatch(/^nx-/);
    await page.getByRole('region', { name: 'Quota' }).or(page.getByLabel('Quota')).first().waitFor();
    await expect.poll(() => page.getByLabel('Quota').textContent()).toContain('Granted100,000');
    // The list's quota column: consumed of granted, formatted.
    await page.getByRole('row', { name: /alice.*0 \/ 100,000/ }).waitFor();
    await shot('05-users');
    await page.getByRole('button', { name: 'I have stored it' }).click();

    // The gateway, called as a user's application calls it.
    const { data: connections } = await listProviderConnections({
      client: t.client,
      path: { workspaceId: (await page.evaluate(() => location.hash)).split('/')[2]! },
    });
    const openai = new OpenAI({ baseURL: `${connections![0]!.gatewayBaseUrl}/v1`, apiKey: secret, maxRetries: 0 });
    // Twelve calls: enough rows that the first call's is far down the list.
    for (let i = 0; i < 12; i++) {
      const completion = await openai.chat.completions.create({
        model: 'gpt-console',
        messages: [{ role: 'user', content: `hello ${i}` }],
      });
      expect(completion.choices.length).toBeGreaterThan(0);
    }
    await t.nexus.gateway.drain();

    // Invocations: the call, and its detail with the latency split and usage events.
    await go('Invocations');
    await page.getByRole('cell', { name: 'gpt-console' }).first().waitFor();
    const table = page.getByRole('table', { name: 'Invocations' });
    // Each row's link names its call (the request id): no label repeats; the user is named, not a UUID.
    const labels = await table.locator('tbody tr td:nth-child(2) a').allTextContents();
    expect(labels).toHaveLength(12);
    expect(new Set(labels).size).toBe(12);
    await expect.poll(() => table.getByRole('link', { name: 'alice' }).count()).toBe(12);
    // The oldest call, from the bottom of a page scrolled down: its detail comes into view, at its own URL.
    await page.setViewportSize({ width: 1360, height: 600 });
    const last = table.locator('tbody tr').last().getByRole('link').first();
    await last.scrollIntoViewIfNeeded();
    await last.click();
    const detail = page.getByRole('heading', { name: /^Call / });
    await detail.waitFor();
    await expect.poll(() => detail.evaluate(inView)).toBe(true);
    await page.setViewportSize({ width: 1360, height: 900 });
    const detailUrl = page.url();
    expect(detailUrl).toMatch(/#\/w\/[0-9a-f-]+\/invocations\/[0-9a-f-]{36}$/);
    // The URL opens the same detail after a reload, with the user linked.
    await page.goto('about:blank');
    await page.goto(detailUrl);
    await page.getByRole('heading', { name: 'Latency' }).waitFor();
    await expect.poll(() => page.locator('.detail').getByRole('link', { name: 'alice' }).isVisible()).toBe(true);
    await page.getByRole('heading', { name: 'Usage events' }).waitFor();
    await expect.poll(() => page.getByRole('cell', { name: 'USAGE' }).isVisible()).toBe(true);
    await shot('06-invocations');
    // Filtered by a status no call has: the empty state says so, and offers to clear the filters.
    await page.getByLabel('Status').selectOption('REJECTED');
    await page.getByText('No invocation matches these filters').waitFor();
    // The filters are in the URL (after the open call's path): the link opens the same filtered list.
    await expect.poll(() => page.url()).toMatch(/\/invocations\/[0-9a-f-]{36}\?status=REJECTED$/);
    const filteredUrl = page.url();
    await page.goto('about:blank');
    await page.goto(filteredUrl);
    await page.getByText('No invocation matches these filters').waitFor();
    expect(await page.getByLabel('Status').inputValue()).toBe('REJECTED');
    await page.getByRole('button', { name: 'Clear the filters' }).click();
    await page.getByRole('cell', { name: 'gpt-console' }).first().waitFor();
    await expect.poll(() => page.url()).toMatch(/\/invocations\/[0-9a-f-]{36}$/);
    // A link with a model's beginning and a status lists those calls; a status the list does not know is left out.
    await page.goto(`${detailUrl.replace(/\/[0-9a-f-]{36}$/, '')}?model=gpt-con&status=NOT_A_STATUS`);
    await page.getByRole('cell', { name: 'gpt-console' }).first().waitFor();
    expect(await page.getByLabel('Model (begins with)').inputValue()).toBe('gpt-con');
    expect(await page.getByLabel('Status').inputValue()).toBe('');
    await expect.poll(() => page.url()).toMatch(/\/invocations\?model=gpt-con$/);
    await page.getByRole('button', { name: 'Clear filters' }).click();

    // Usage over time: the chart draws the call, and the totals name its model.
    await go('Usage over time');
    const chart = page.getByTestId('usage-chart');
    await chart.locator('canvas').waitFor();
    await page.getByRole('cell', { name: /gpt/ }).first().waitFor();
    // The fake upstream reports 10 input and 5 output tokens a call; the strategy charges a unit a token (units,
    // input, output and events are the last columns, after spend and the call counts).
    const totals = page.getByRole('table', { name: /Totals/ });
    await expect.poll(() => totals.getByRole('row').nth(1).textContent()).toMatch(/^gpt\S*.*1801206012$/);
    // A total row, formatted as the rows are.
    await expect.poll(() => totals.locator('tfoot tr').textContent()).toMatch(/^Total.*1801206012$/);
    // Buckets are bars; uPlot's legend keeps its own case and stays inside the chart's card.
    expect(await chart.getAttribute('data-draw')).toBe('bars');
    const legend = chart.locator('.u-legend th').first();
    expect(await legend.evaluate((el) => getComputedStyle(el).textTransform)).toBe('none');
    const inside = await chart.evaluate((box) => {
      const outer = box.getBoundingClientRect();
      const legendBox = box.querySelector('.u-legend')!.getBoundingClientRect();
      return legendBox.right <= outer.right + 0.5 && legendBox.left >= outer.left - 0.5;
    });
    expect(inside).toBe(true);
    // Days are summed in the browser's time zone (UTC here), and are labelled as such.
    const byDay = page.waitForRequest((r) => r.url().includes('/usage-summary?') && r.url().includes('granularity=day'));
    await page.getByLabel('Per').selectOption('day');
    expect(new URL((await byDay).url()).searchParams.get('timeZone')).toBe('UTC');
    await expect.poll(() => chart.getAttribute('data-zone')).toBe('UTC');
    await page.getByText('Day (UTC)').first().waitFor();
    await page.getByLabel('Per').selectOption('hour');
    await page.getByLabel('By').selectOption('access');
    await page.getByRole('cell', { name: 'alice' }).waitFor();
    await shot('07-usage');

    // Inference keys: the user's key, listed without its plaintext.
    await go('Inference keys');
    // A user is found by external id, however many there are (no list capped at 100).
    await page.getByRole('combobox', { name: 'User' }).fill('alice');
    await page.getByRole('button', { name: 'Find' }).click();
    await page.getByRole('button', { name: 'Revoke' }).waitFor();
    expect(await page.content()).not.toContain(secret);
    await shot('08-keys');

    // Billing and audit pages.
    await go('Billing');
    await page.getByText('No billing connection').waitFor();
    await shot('09-billing-empty');
    await go('Audit log');
    await page
      .getByRole('cell', { name: /workspace_access/ })
      .first()
      .waitFor();
    await shot('10-audit');
    // The action placeholder is an action that exists; the date range filters.
    expect(await page.getByLabel('Action').getAttribute('placeholder')).toBe('access.suspended');
    await page.getByLabel('Since (your local time)').fill('2099-01-01T00:00');
    await page.getByText('No audit entry matches these filters').waitFor();
    await page.getByRole('button', { name: 'Clear the filters' }).click();
    await page
      .getByRole('cell', { name: /workspace_access/ })
      .first()
      .waitFor();

    // Suspend the access: the gateway refuses the key's next call.
    await go('Users and accesses');
    await page.getByRole('button', { name: 'Manage alice' }).click();
    await page.getByRole('button', { name: 'Suspend access' }).click();
    await page.getByRole('row', { name: /alice.*SUSPENDED/ }).waitFor();
    // Asked first (the dialog is accepted by the handler above).
    expect(dialogs.at(-1)).toMatch(/^Suspend alice\?/);
    await shot('11-suspended');
    const refused = await openai.chat.completions.create({ model: 'gpt-console', messages: [{ role: 'user', content: 'again' }] }).then(
      () => undefined,
      (err: { status?: number }) => err.status,
    );
    expect(refused).toBe(403);

    expect(existsSync(join(shots, '07-usage.png'))).toBe(true);

    // A key scoped to this workspace sees it, and not another one.
    const workspaceId = (await page.evaluate(() => location.hash)).split('/')[2]!;
    const other = await createWorkspace({ client: t.client, body: { name: 'Someone else' } });
    expect(other.response.status).toBe(201);
    const { key: scopedKey } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
      name: 'console-scoped',
      workspaceIds: [workspaceId],
    });
    await page.getByRole('button', { name: 'Sign out' }).click();
    expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual([]);
    await page.getByLabel('Management Key').fill(scopedKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Acme production' }).waitFor();
    expect(await page.getByRole('link', { name: 'Someone else' }).count()).toBe(0);
    expect(await page.getByRole('combobox', { name: 'Workspace' }).textContent()).not.toContain('Someone else');

    expect(browserErrors).toEqual([]);
  }, 180_000);

  it('billing: connects Stripe, verifies its credential, maps a product, and replays a webhook that failed until it is processed', async () => {
    // Signed in (with the workspace's scoped key) from the test before.
    await page.getByRole('link', { name: 'Acme production' }).click();
    const workspaceId = (await page.evaluate(() => location.hash)).split('/')[2]!;
    const { data: plans } = await listPlans({ client: t.client, path: { workspaceId } });
    const bob = await provisionWorkspaceUser({
      client: t.client,
      path: { workspaceId },
      body: { externalUserId: 'bob', email: 'bob@example.com', planId: plans![0]!.id },
    });
    expect(bob.response.status).toBe(201);
    await go('Billing');

    const credential = `sk_test_console_${Date.now()}`;
    stripe.validKeys.add(credential);
    const secret = 'whsec_console_0123456789abcdef';
    const create = page.getByRole('form', { name: 'Connect a billing provider' });
    await create.getByLabel('Name').fill('Stripe test');
    await create.getByRole('button', { name: 'Create billing connection' }).click();
    await page.getByRole('form', { name: 'Provider credential' }).getByLabel('Credential').fill(credential);
    await page.getByRole('button', { name: 'Save credential' }).click();
    await page.getByRole('button', { name: 'Verify credential' }).click();
    await page.getByRole('row', { name: /Stripe test.*VERIFIED/ }).waitFor();
    await page.getByRole('form', { name: 'Webhook signing secret' }).getByLabel('Secret').fill(secret);
    await page.getByRole('button', { name: 'Save secret' }).click();
    await page.getByRole('row', { name: /Stripe test.*VERIFIED set/ }).waitFor();
    expect(await page.content()).not.toContain(credential);
    expect(await page.content()).not.toContain(secret);

    const mapping = page.getByRole('form', { name: 'Map a product to a plan' });
    await mapping.getByLabel('External product id').fill('prod_console');
    await mapping.getByRole('button', { name: 'Add mapping' }).click();
    await page.getByRole('cell', { name: 'prod_console' }).first().waitFor();

    // Stripe reports bob's subscription; the first read of it fails, so the event is FAILED until replayed.
    stripe.prices.set('price_console', 'prod_console');
    const now = Date.now();
    const sub = stripe.createSubscription({
      price: 'price_console',
      metadata: { [ACCESS_ID_METADATA_KEY]: bob.data!.access.id },
      // From now: the plan's strategy is bound from the moment the test before published it.
      period: { start: new Date(now), end: new Date(now + 30 * 86_400_000) },
    });
    stripe.failReads = 1;
    const { data: connections } = await listBillingConnections({ client: t.client, path: { workspaceId } });
    const connection = connections![0]!;
    const event = stripe.event('customer.subscription.created', stripe.snapshot(sub.id), new Date(now));
    const delivered = await t.fetch(connection.webhookUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': FakeStripe.sign(event.body, secret, new Date()) },
      body: event.body,
    });
    expect(delivered.status).toBe(200);
    await expect
      .poll(async () => (await listBillingWebhookEvents({ client: t.client, path: { connectionId: connection.id } })).data?.[0]?.status)
      .toBe('FAILED');

    await page.getByLabel('Status').selectOption('FAILED');
    await page.getByRole('row', { name: /^customer\.subscription\.created.*FAILED/ }).waitFor();
    await shot('09-billing');
    await page.getByRole('button', { name: 'Replay' }).click();
    await page.getByText('No webhook event with status failed').waitFor();
    await page.getByLabel('Status').selectOption('');
    await page.getByRole('row', { name: /^customer\.subscription\.created.*PROCESSED/ }).waitFor();

    // The subscription the event reported, for bob, found by external id.
    const subscriptions = page.getByRole('region', { name: 'External subscriptions' });
    await subscriptions.getByRole('combobox', { name: 'User' }).fill('bob');
    await subscriptions.getByRole('button', { name: 'Find' }).click();
    await page
      .getByRole('cell', { name: new RegExp(sub.id) })
      .first()
      .waitFor();
    await shot('12-billing-processed');
    expect(browserErrors).toEqual([]);
  }, 120_000);

  it('plans: a model rule, an allow-list and a rate limit set in the UI apply to the next gateway call', async () => {
    // Signed in with the workspace's scoped key, in Acme production, from the tests before.
    await go('Plans and strategies');
    await unfold(page, 'New quota strategy');
    const draftStrategy = page.getByRole('form', { name: 'Draft a quota strategy' });
    await draftStrategy.getByLabel('Key').fill('strict-quota');
    await draftStrategy.getByLabel('Allowed models').fill('gpt-allowed*');
    await draftStrategy.getByRole('button', { name: 'Add a model rule' }).click();
    const rule = draftStrategy.getByRole('group', { name: 'Model rule 1' });
    await rule.getByLabel('Model pattern').fill('gpt-allowed*');
    await rule.getByLabel('Input ×', { exact: true }).fill('2');
    await rule.getByLabel('Cached input ×').fill('2');
    await rule.getByLabel('Output ×', { exact: true }).fill('2');
    await draftStrategy.getByRole('button', { name: 'Draft strategy' }).click();
    await page.getByRole('button', { name: 'Publish strict-quota v1' }).click();
    await page.getByRole('row', { name: /strict-quota.*PUBLISHED.*gpt-allowed\*: ×2 \/ ×2 \/ ×2.*only gpt-allowed\*/ }).waitFor();

    await unfold(page, 'New plan');
    const draftPlan = page.getByRole('form', { name: 'Draft a plan' });
    await draftPlan.getByLabel('Key').fill('strict');
    await draftPlan.getByLabel('Name').fill('Strict');
    await draftPlan.getByLabel('Requests per minute').fill('1');
    await draftPlan.getByRole('button', { name: 'Draft plan' }).click();
    const bind = page.getByRole('form', { name: 'Bind a strategy to Strict' });
    await bind.getByLabel('Published strategy version').selectOption({ label: 'strict-quota v1 (100,000 units / month)' });
    await bind.getByRole('button', { name: 'Bind strategy' }).click();
    await page.getByRole('button', { name: 'Publish Strict' }).click();
    await page.getByRole('row', { name: /Strict.*ACTIVE.*strict-quota v1.*1 requests\/min/ }).waitFor();
    await shot('13-plans-rules');

    await go('Users and accesses');
    await unfold(page, 'New user');
    const provision = page.getByRole('form', { name: 'Provision a user' });
    await provision.getByLabel('External user id').fill('carol');
    await provision.getByLabel('Email').fill('carol@example.com');
    await provision.getByLabel('Plan').selectOption({ label: 'Strict' });
    await provision.getByRole('button', { name: 'Provision user' }).click();
    const secret = (await page.getByTestId('shown-once').textContent())!.trim();
    await page.getByRole('button', { name: 'I have stored it' }).click();

    const workspaceId = (await page.evaluate(() => location.hash)).split('/')[2]!;
    const { data: connections } = await listProviderConnections({ client: t.client, path: { workspaceId } });
    const openai = new OpenAI({ baseURL: `${connections![0]!.gatewayBaseUrl}/v1`, apiKey: secret, maxRetries: 0 });
    const call = (model: string) =>
      openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }).then(
        () => 200,
        (err: { status?: number; code?: string }) => `${err.status} ${err.code}`,
      );
    // The allow-list: refused before the provider is called (and before the rate limit counts it).
    expect(await call('gpt-other')).toBe('403 model_not_allowed');
    // Both allowed calls in one UTC minute, the rate limit's window.
    const second = new Date().getUTCSeconds();
    if (second > 50) await new Promise((r) => setTimeout(r, (61 - second) * 1000));
    expect(await call('gpt-allowed-1')).toBe(200);
    // The rate limit: one request a minute.
    expect(await call('gpt-allowed-1')).toBe('429 rate_limited');
    await t.nexus.gateway.drain();

    // The model rule: 10 input and 5 output tokens at ×2 are 30 units.
    await go('Invocations');
    await page.getByRole('row', { name: /carol.*gpt-allowed-1.*SUCCEEDED.*30/ }).waitFor();
    expect(browserErrors).toEqual([]);
  }, 120_000);

  it('every page: no serious or critical axe-core violation in light and dark mode; dark toggle, 390 px, skip link, docs link', async () => {
    const workspaceId = (await page.evaluate(() => location.hash)).split('/')[2]!;
    const pages = [
      'Provider connections',
      'Routes',
      'Plans and strategies',
      'Users and accesses',
      'Inference keys',
      'Invocations',
      'Usage over time',
      'Prices',
      'Budget',
      'Billing',
      'Webhooks',
      'Audit log',
      'Workspace settings',
    ];
    const found: Record<string, string[]> = {};
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const name of pages) {
        await go(name);
        await page.waitForLoadState('networkidle');
        await page
          .getByRole('status')
          .filter({ hasText: /Loading|…/ })
          .waitFor({ state: 'detached' })
          .catch(() => undefined);
        const violations = await axeViolations(page);
        if (violations.length) found[`${name} (${scheme})`] = violations;
      }
      await go('Workspaces');
      await page.getByRole('link', { name: 'Acme production' }).waitFor();
      const violations = await axeViolations(page);
      if (violations.length) found[`Workspaces (${scheme})`] = violations;
      await page.getByRole('link', { name: 'Acme production' }).click();
      await page.getByRole('heading', { name: 'Provider connections', level: 1 }).waitFor();
    }
    // An invocation's detail, by its URL.
    await go('Invocations');
    await page.getByRole('table', { name: 'Invocations' }).locator('tbody tr').first().getByRole('link').first().click();
    await page.getByRole('heading', { name: 'Latency' }).waitFor();
    const detailViolations = await axeViolations(page);
    if (detailViolations.length) found['Invocation detail (dark)'] = detailViolations;
    expect(found).toEqual({});

    // Dark: the system's choice (emulated above), and the toggle overrides it either way.
    const background = () => page.evaluate(() => getComputedStyle(document.body.parentElement!).backgroundColor);
    expect(await background()).toBe('rgb(11, 17, 32)');
    await page.emulateMedia({ colorScheme: 'light' });
    expect(await background()).toBe('rgb(249, 250, 251)');
    await page.getByRole('button', { name: 'Theme: system' }).click();
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
    expect(await background()).toBe('rgb(11, 17, 32)');
    await shot('14-dark');
    await page.getByRole('button', { name: 'Theme: dark' }).click();
    await page.getByRole('button', { name: 'Theme: light' }).click();
    expect(await page.getByRole('button', { name: 'Theme: system' }).count()).toBe(1);

    // The API reference is linked from the header, and answers.
    const docs = await page.getByRole('link', { name: 'API reference' }).evaluate((a) => (a as HTMLAnchorElement).href);
    expect((await fetch(docs)).status).toBe(200);

    // The skip link: the first thing Tab reaches, and it moves the focus to the page's content.
    await page.goto(`${t.url}/console/#/w/${workspaceId}/usage`);
    await page.reload();
    await page.getByRole('heading', { name: 'Usage over time', level: 1 }).waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('main');

    // 390 px wide: Sign out is on screen, and nothing is wider than the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    const signOut = await page.getByRole('button', { name: 'Sign out' }).boundingBox();
    expect(signOut!.x + signOut!.width).toBeLessThanOrEqual(390);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await shot('15-phone');
    await page.setViewportSize({ width: 1360, height: 900 });
    expect(browserErrors).toEqual([]);
  }, 180_000);

  it('a Management Key revoked mid-session sends the console back to sign-in, saying why', async () => {
    const workspaceId = (await page.evaluate(() => location.hash)).split('/')[2]!;
    const { key, id } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
      name: 'console-revoked',
      workspaceIds: [workspaceId],
    });
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Management Key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'Acme production' }).click();
    await page.getByRole('heading', { name: 'Provider connections', level: 1 }).waitFor();
    await t.nexus.services.managementKeys.revoke(systemActor('test'), id);
    await go('Plans and strategies').catch(() => undefined);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.getByText('Your Management Key was refused (401): sign in again.').waitFor();
    expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual([]);
  }, 60_000);
});

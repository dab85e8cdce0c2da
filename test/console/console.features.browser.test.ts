/**
 * The console's money, health and events pages in a real browser (Debian's Chromium through playwright-core), on a
 * live Nexus with a fake upstream and a webhook receiver that verifies signatures: a webhook endpoint is created, its
 * test event delivered, verified and replayed; a route is created, called through the gateway and its targets'
 * health read; a route edited and saved keeps every field its form does not edit (checked with getRoute and the
 * audit of what was sent); prices are added, imported and closed; spend by model for the last week is read off the
 * usage page after priced calls; switching its grouping reads each name once and is refused nothing; the chart's
 * axes follow the theme; a budget is set and shows the spend. Each page is scanned by axe-core in light and dark mode.
 *
 * Screenshots go to test-results/console/; with CONSOLE_SCREENSHOTS=<dir> (docs/screenshots for the README) each
 * page is also written there at 1440x900.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import type { Browser, Locator, Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../events/receiver.js';
import { startOpenAiUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { projectRoot } from '../support/paths.js';
import {
  createProviderConnection,
  createRoute,
  createWebhookEndpoint,
  getRoute,
  getRouteHealth,
  getUsageSummary,
  listAuditLogs,
  listRoutes,
  sendTestWebhookEvent,
} from '../support/sdk.js';
import { provisionTenant, type Tenant } from '../support/tenant.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import {
  axeViolations,
  chromiumOrWarn,
  signIn,
  watchedPage,
  unfold,
  signedInChromium,
  goByNav,
  openConnections,
} from './console-support.js';

const executablePath = chromiumOrWarn("the console's features browser test");
const shots = join(projectRoot, 'test-results', 'console');
const docShots = process.env.CONSOLE_SCREENSHOTS ? join(projectRoot, process.env.CONSOLE_SCREENSHOTS) : undefined;

describe.skipIf(!executablePath)('the console: webhooks, routes, prices, budget and spend, in Chromium', () => {
  let t: TestApp;
  let upstream: FakeUpstream;
  let receiver: Receiver;
  let browser: Browser;
  let page: Page;
  let tenant: Tenant;
  let backupId: string;
  const browserErrors: string[] = [];
  const dialogs: string[] = [];
  const providerKey = testProviderKey('console-features');

  const shot = async (name: string) => {
    await page.screenshot({ path: join(shots, `features-${name}.png`), fullPage: true });
    if (docShots) await page.screenshot({ path: join(docShots, `${name}.png`) });
  };
  const go = (link: string) => goByNav(page, link);
  /** Calls through a gateway base URL with the tenant's key, as a user's application does; the records are written before it returns. */
  const call = async (baseUrl: string, model: string, times: number) => {
    const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: tenant.apiKey, maxRetries: 0 });
    for (let i = 0; i < times; i++) {
      const completion = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: `hello ${i}` }] });
      expect(completion.choices.length).toBeGreaterThan(0);
    }
    await t.nexus.gateway.drain();
  };

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    if (docShots) mkdirSync(docShots, { recursive: true });
    t = await startTestApp();
    upstream = await startOpenAiUpstream({ apiKey: providerKey });
    receiver = await startReceiver();
    tenant = await provisionTenant(t.client, { name: 'features', baseUrl: upstream.url, providerKey });
    const backup = await createProviderConnection({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: { name: 'backup', protocolProfile: 'openai', baseUrl: upstream.url, apiKey: providerKey },
    });
    expect(backup.response.status).toBe(201);
    backupId = backup.data!.id;

    // The default context: en-US, so amounts in USD read "$0.06"; UTC, so the hours are labelled in a zone the assertions know.
    ({ browser, page } = await signedInChromium(executablePath!, t.url, browserErrors, { dialogs }));
    await openConnections(page, t.url, tenant.workspaceId);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await upstream?.close();
    await receiver?.close();
  });

  it('webhooks: an endpoint is created with its secret shown once, a test event delivered, verified and replayed, the secret rotated, the endpoint edited, disabled, enabled and deleted', async () => {
    await go('Webhooks');
    await page.getByText('No webhook endpoint yet').waitFor();
    await unfold(page, 'New webhook endpoint');
    const add = page.getByRole('form', { name: 'Add a webhook endpoint' });
    // Bad input: the API's message, naming the field.
    await add.getByLabel('URL').fill('ftp://127.0.0.1/hooks');
    await add.getByRole('button', { name: 'Add endpoint' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/^url .*Request id/);

    await add.getByLabel('URL').fill(receiver.url);
    await add.getByLabel('Description').fill('Test receiver');
    await add.getByRole('checkbox', { name: /webhook\.test/ }).check();
    await add.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = (await page.getByTestId('shown-once').textContent())!.trim();
    expect(secret).toMatch(/^whsec_/);
    receiver.secrets.push(secret);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    expect(await page.content()).not.toContain(secret);
    await page.getByRole('row', { name: /Test receiver.*webhook\.test.*ACTIVE/ }).waitFor();

    // A test event: its message opens, and is delivered to the receiver, which verifies its signature.
    await page.getByRole('button', { name: 'Send test event' }).click();
    const messages = page.getByRole('table', { name: `Messages to ${receiver.url}` });
    await expect
      .poll(
        async () => {
          await page.getByRole('button', { name: 'Refresh' }).click();
          return messages.getByRole('row', { name: /webhook\.test.*DELIVERED/ }).count();
        },
        { timeout: 20_000 },
      )
      .toBe(1);
    const messageId = (await messages.locator('tbody tr').first().locator('.id').first().textContent())!.trim();
    expect(receiver.accepted().map((d) => d.id)).toEqual([messageId]);
    expect(receiver.accepted()[0]!.verified).toMatchObject({ type: 'webhook.test' });
    // Its attempt: the receiver's status and answer.
    await messages.getByRole('button', { name: 'Attempts (1)' }).click();
    await page
      .getByRole('table', { name: `Attempts of ${messageId}` })
      .getByRole('row', { name: /SUCCEEDED.*200.*ok/ })
      .waitFor();
    // The event as it was sent.
    await page.getByText('The event as sent').click();
    await expect.poll(() => page.locator('pre').textContent()).toContain('"type": "webhook.test"');
    await shot('webhooks');

    // Replayed: the same event (the same webhook-id) delivered again.
    await messages.getByRole('button', { name: 'Replay', exact: true }).click();
    await page.getByText(`Message ${messageId} is queued again.`).waitFor();
    await expect.poll(() => receiver.accepted().map((d) => d.id), { timeout: 20_000 }).toEqual([messageId, messageId]);
    // Every failed one since a time: none failed.
    await page.getByRole('button', { name: 'Replay failed' }).click();
    await page.getByText('0 failed messages queued again.').waitFor();

    // A rotated secret, asked first and shown once; the next delivery verifies with it.
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    expect(dialogs.at(-1)).toMatch(/^Rotate the signing secret of /);
    const rotated = (await page.getByTestId('shown-once').textContent())!.trim();
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    receiver.secrets.splice(0, 1, rotated);
    await page.getByRole('button', { name: 'I have stored it' }).click();
    await page.getByRole('button', { name: 'Send test event' }).click();
    await expect.poll(() => receiver.accepted().length, { timeout: 20_000 }).toBe(3);

    // Edited: every type (none ticked), a new description.
    await page.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('form', { name: `Edit ${receiver.url}` });
    await edit.getByLabel('Description').fill('Receiver, every event');
    await edit.getByRole('checkbox', { name: /webhook\.test/ }).uncheck();
    await edit.getByRole('button', { name: 'Save endpoint' }).click();
    await page.getByRole('row', { name: /Receiver, every event.*every type.*ACTIVE/ }).waitFor();
    // Disabled and enabled again; the disable is asked first.
    await page.getByRole('button', { name: 'Disable' }).click();
    expect(dialogs.at(-1)).toMatch(/^Disable http:/);
    await page.getByRole('row', { name: /Receiver, every event.*DISABLED.*admin/ }).waitFor();
    await page.getByRole('button', { name: 'Enable' }).click();
    await page.getByRole('row', { name: /Receiver, every event.*ACTIVE/ }).waitFor();
    // Deleted, asked first: the list is empty again.
    await page.getByRole('button', { name: 'Delete' }).click();
    expect(dialogs.at(-1)).toMatch(/^Delete http:.*cannot be undone/);
    await page.getByText('No webhook endpoint yet').waitFor();
    // One to scan with its messages below.
    const kept = await createWebhookEndpoint({ client: t.client, path: { workspaceId: tenant.workspaceId }, body: { url: receiver.url } });
    expect(kept.response.status).toBe(201);
    receiver.secrets.push(kept.data!.secret);
    await sendTestWebhookEvent({ client: t.client, path: { webhookEndpointId: kept.data!.id } });
    expect(browserErrors).toEqual([]);
  }, 120_000);

  it("routes: a route over two connections is created, called through the gateway, and its targets' health read; another is edited", async () => {
    await go('Routes');
    // The page opens with its list; the form is behind its button.
    expect(await page.getByRole('form', { name: 'Create a route' }).count()).toBe(0);
    await unfold(page, 'New route');
    const form = page.getByRole('form', { name: 'Create a route' });
    await form.getByLabel('Name').fill('chat');
    await form.getByRole('group', { name: 'Target 1' }).getByLabel('Connection').selectOption({ label: 'features upstream (openai)' });
    await form.getByRole('button', { name: 'Add a target' }).click();
    const second = form.getByRole('group', { name: 'Target 2' });
    await second.getByLabel('Connection').selectOption({ label: 'backup (openai)' });
    // A model map line that is not asked=sent is named before anything is sent.
    await second.getByLabel('Model map').fill('nonsense');
    await form.getByRole('button', { name: 'Create route' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Target 2, model map line 1');
    await second.getByLabel('Model map').fill('gpt-console=gpt-backup');
    await form.getByRole('button', { name: 'Create route' }).click();
    await page.getByRole('row', { name: /chat.*fallback.*features upstream.*backup.*gpt-console → gpt-backup.*ACTIVE/ }).waitFor();

    const { data: routes } = await listRoutes({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    await call(routes![0]!.gatewayBaseUrl, 'gpt-console', 3);
    // The health panel opened with the new route; read again, it counts the calls on the first target.
    const health = page.getByRole('table', { name: "Health of chat's targets" });
    await health.waitFor();
    await page.getByRole('region', { name: 'Health of chat' }).getByRole('button', { name: 'Refresh' }).click();
    await health.getByRole('row', { name: /features upstream.*ACTIVE.*closed.*3 calls, 0 errors.*3 calls, 0 errors/ }).waitFor();
    await health.getByRole('row', { name: /backup.*ACTIVE.*closed.*0 calls/ }).waitFor();
    // Beside the route's attempts, each target's connection over every call that reached it: the 3 made now, at least.
    const connectionHealth = health.getByRole('row', { name: /features upstream/ }).getByTestId('connection-health');
    await expect.poll(() => connectionHealth.locator('.status').textContent()).toMatch(/^(healthy|degraded|failing)$/);
    // The route's attempts on each target over 5 minutes, an hour and a day, with their percentiles as the API gives them.
    const windows = (await getRouteHealth({ client: t.client, path: { routeId: routes![0]!.id } })).data!.targets[0]!.windows;
    const ms = (v: number) => `${Math.round(v).toLocaleString('en-US')} ms`;
    const over = page.getByRole('table', { name: 'features upstream through chat: its attempts over time' });
    for (const [i, name] of ['Last 5 minutes', 'Last hour', 'Last day'].entries()) {
      const { p50, p95, p99 } = windows[i]!.latencyMs!;
      await over.getByRole('row', { name: `${name} 3 0 0 % ${ms(p50)} ${ms(p95)} ${ms(p99)}`, exact: false }).waitFor();
    }
    await page
      .getByRole('table', { name: 'backup through chat: its attempts over time' })
      .getByRole('row', { name: /Last day 0 0 —/ })
      .waitFor();
    await shot('routes');

    await page.getByRole('button', { name: 'Archive' }).click();
    expect(dialogs.at(-1)).toMatch(/^Archive chat\?/);
    await page.getByRole('row', { name: /chat.*ARCHIVED/ }).waitFor();

    // Load balanced: each target with its weight.
    await form.getByLabel('Name').fill('balanced');
    await form.getByLabel('Strategy').selectOption('loadbalance');
    await form.getByRole('group', { name: 'Target 1' }).getByLabel('Connection').selectOption({ label: 'features upstream (openai)' });
    await form.getByRole('group', { name: 'Target 1' }).getByLabel('Weight').fill('3');
    await form.getByRole('button', { name: 'Add a target' }).click();
    await form.getByRole('group', { name: 'Target 2' }).getByLabel('Connection').selectOption({ label: 'backup (openai)' });
    await form.getByRole('button', { name: 'Create route' }).click();
    await page.getByRole('row', { name: /balanced.*loadbalance.*features upstream \(weight 3\).*backup \(weight 1\).*ACTIVE/ }).waitFor();

    // Edited: the form takes the route as it is, and saves what changed (the same route, its URL kept).
    await page.getByRole('button', { name: 'Edit balanced' }).click();
    const editing = page.getByRole('form', { name: 'Edit balanced' });
    expect(await editing.getByLabel('Name').inputValue()).toBe('balanced');
    expect(await editing.getByRole('group', { name: 'Target 1' }).getByLabel('Weight').inputValue()).toBe('3');
    await editing.getByLabel('Name').fill('first only');
    await editing.getByLabel('Strategy').selectOption('fallback');
    await editing.getByRole('button', { name: 'Remove target 2' }).click();
    await editing.getByRole('button', { name: 'Save route' }).click();
    const edited = page.getByRole('row', { name: /first only.*fallback.*features upstream.*ACTIVE/ });
    await edited.waitFor();
    expect(await edited.textContent()).not.toContain('backup');
    // Saved, the form folds again behind its button.
    await page.getByRole('button', { name: 'New route', exact: true, expanded: false }).waitFor();
    const { data: after } = await listRoutes({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    const balanced = after!.find((r) => r.name === 'first only')!;
    expect(balanced.strategy).toBe('fallback');
    expect(balanced.targets).toHaveLength(1);
    expect(after!.filter((r) => r.status === 'ACTIVE')).toHaveLength(1);
    expect(browserErrors).toEqual([]);
  }, 120_000);

  it('routes: every setting is edited in the form, a save changes only what the form changed, and metadata is shown and kept', async () => {
    // A route with every setting away from its default, made through the API.
    const created = await createRoute({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      body: {
        name: 'kept',
        strategy: 'fallback',
        targets: [
          {
            providerConnectionId: tenant.connectionId,
            weight: 4,
            attempts: 2,
            timeoutMs: 20_000,
            firstTokenTimeoutMs: 5_000,
            modelMap: { 'gpt-kept': 'gpt-kept-1' },
          },
          { providerConnectionId: backupId, weight: 2, attempts: 3, timeoutMs: 15_000 },
        ],
        retryOn: [429, 503],
        retry: { baseDelayMs: 100, maxDelayMs: 1000, retryAfterCapMs: 3000, budgetMs: 7000 },
        breaker: { consecutiveFailures: 3, errorRatePercent: 40, minimumCalls: 10, windowMs: 30_000, cooldownMs: 15_000 },
        tryWhenAllOpen: false,
        metadata: { team: 'search' },
      },
    });
    expect(created.response.status).toBe(201);
    const routeId = created.data!.id;
    const read = async () => (await getRoute({ client: t.client, path: { routeId } })).data!;
    const before = await read();
    // What each update sent, as Nexus audited it (the fields the request gave), oldest first.
    const sent = async () =>
      (
        await listAuditLogs({
          client: t.client,
          path: { workspaceId: tenant.workspaceId },
          query: { action: 'route.updated', resourceId: routeId },
        })
      )
        .data!.map((entry) => Object.keys(entry.changes).sort())
        .reverse();
    // Routes opened anew (the page may be on it already, with its list read before this route was made).
    await go('Prices');
    await go('Routes');
    const editing = page.getByRole('form', { name: 'Edit kept' });
    // Once saved (or with nothing to save), the edit folds again behind the New route button.
    const create = page.getByRole('button', { name: 'New route', exact: true, expanded: false });

    // Edit, then Save with nothing changed: the route is as it was, to its last field (nothing is sent).
    await page.getByRole('button', { name: 'Edit kept' }).click();
    await expect.poll(() => editing.getByLabel('Name').inputValue()).toBe('kept');
    await editing.getByRole('button', { name: 'Save route' }).click();
    await create.waitFor();
    expect(await read()).toEqual(before);
    expect(await sent()).toEqual([]);

    // Each target's attempts and timeouts, and the route's retries and breaker, are in the form as they are; the
    // metadata it does not edit is shown.
    await page.getByRole('button', { name: 'Edit kept' }).click();
    const target = (n: number) => editing.getByRole('group', { name: `Target ${n}` });
    const values = (group: ReturnType<typeof target>) =>
      group.locator('input[type="number"]').evaluateAll((inputs) => inputs.map((i) => (i as HTMLInputElement).value));
    await expect.poll(() => values(target(1))).toEqual(['2', '20000', '5000']);
    expect(await values(target(2))).toEqual(['3', '15000', '']);
    expect(await editing.getByLabel('Statuses that move a call on').inputValue()).toBe('429, 503');
    expect(await values(editing.getByRole('group', { name: 'Retry waits', exact: true }))).toEqual(['100', '1000', '3000', '7000']);
    expect(await values(editing.getByRole('group', { name: 'Breaker thresholds', exact: true }))).toEqual([
      '3',
      '40',
      '10',
      '30000',
      '15000',
    ]);
    expect(await editing.getByRole('region', { name: /Metadata/ }).textContent()).toContain('{"team":"search"}');
    expect(await editing.getByRole('checkbox', { name: /With every breaker open/ }).isChecked()).toBe(false);
    expect(await axeViolations(page)).toEqual([]);
    // The list says what differs from the defaults in each target.
    await page
      .getByRole('row', { name: /kept.*2 attempts · timeout 20 s · first byte of a stream within 5 s.*3 attempts · timeout 15 s/ })
      .waitFor();

    // A model map changed: the targets are sent (they replace the list), each with what the form does not edit.
    await editing.getByRole('group', { name: 'Target 2' }).getByLabel('Model map').fill('gpt-kept=gpt-backup');
    await editing.getByRole('button', { name: 'Save route' }).click();
    await create.waitFor();
    const mapped = await read();
    expect(await sent()).toEqual([['targets']]);
    expect(mapped).toEqual({
      ...before,
      targets: [before.targets[0], { ...before.targets[1], modelMap: { 'gpt-kept': 'gpt-backup' } }],
      updatedAt: mapped.updatedAt,
    });

    // The name changed: only the name is sent; a weight the form shows (load balance) is the target's own.
    await page.getByRole('button', { name: 'Edit kept' }).click();
    await editing.getByLabel('Name').fill('kept renamed');
    await editing.getByLabel('Strategy').selectOption('loadbalance');
    expect(await editing.getByRole('group', { name: 'Target 1' }).getByLabel('Weight').inputValue()).toBe('4');
    await editing.getByLabel('Strategy').selectOption('fallback');
    await editing.getByRole('button', { name: 'Save route' }).click();
    await create.waitFor();
    const renamed = await read();
    expect(await sent()).toEqual([['targets'], ['name']]);
    expect(renamed).toEqual({ ...mapped, name: 'kept renamed', updatedAt: renamed.updatedAt });

    // The breaker, the statuses and a target's timeout changed: those are sent, the rest of the route is as it was.
    await page.getByRole('button', { name: 'Edit kept renamed' }).click();
    await editing.getByLabel('Opens after failures in a row').fill('7');
    await editing.getByLabel('Statuses that move a call on').fill('429, 502, 503');
    await target(2).getByLabel('Timeout (ms)').fill('9000');
    await editing.getByRole('button', { name: 'Save route' }).click();
    await create.waitFor();
    const tuned = await read();
    expect(await sent()).toEqual([['targets'], ['name'], ['breaker', 'retryOn', 'targets']]);
    expect(tuned).toEqual({
      ...renamed,
      retryOn: [429, 502, 503],
      breaker: { ...renamed.breaker, consecutiveFailures: 7 },
      targets: [renamed.targets[0], { ...renamed.targets[1], timeoutMs: 9000 }],
      updatedAt: tuned.updatedAt,
    });
    expect(await axeViolations(page)).toEqual([]);
    expect(browserErrors).toEqual([]);
  }, 120_000);

  it('prices: a price is added (an overlapping one refused), LiteLLM prices imported and one closed', async () => {
    await go('Prices');
    await page.getByText('No price yet').waitFor();
    expect(await page.getByRole('form', { name: 'Workspace currency' }).getByLabel('Currency').inputValue()).toBe('USD');
    await unfold(page, 'New price');
    const add = page.getByRole('form', { name: 'Add a price' });
    await add.getByLabel('Model pattern').fill('gpt-priced*');
    await add.getByLabel('Input per million (USD)', { exact: true }).fill('1000');
    await add.getByLabel('Output per million (USD)', { exact: true }).fill('2000');
    await add.getByRole('button', { name: 'Add price' }).click();
    await page.getByRole('row', { name: /gpt-priced\*.*every connection.*1000 \/ 1000 \/ 2000 USD.*open.*manual/ }).waitFor();
    // The same pattern and scope again: the API's message.
    await add.getByLabel('Model pattern').fill('gpt-priced*');
    await add.getByLabel('Input per million (USD)', { exact: true }).fill('1');
    await add.getByLabel('Output per million (USD)', { exact: true }).fill('1');
    await add.getByRole('button', { name: 'Add price' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain("A price of 'gpt-priced*' for this scope is in force");

    // The currency cannot change once there are prices: the API's message.
    const currency = page.getByRole('form', { name: 'Workspace currency' });
    await currency.getByLabel('Currency').fill('EUR');
    await currency.getByRole('button', { name: 'Set currency' }).click();
    await page.getByRole('alert').filter({ hasText: 'its currency cannot change' }).waitFor();
    await currency.getByLabel('Currency').fill('USD');

    // LiteLLM's file, pasted: the entry priced per token is imported, the one per image skipped.
    const litellm = {
      'gpt-lite': { input_cost_per_token: 0.000001, output_cost_per_token: 0.000002, litellm_provider: 'openai', mode: 'chat' },
      'image-maker': { input_cost_per_image: 0.04, litellm_provider: 'openai', mode: 'image_generation' },
    };
    await page.getByText("Import LiteLLM's price file").click();
    const importing = page.getByRole('form', { name: 'Import LiteLLM prices' });
    await importing.getByLabel('Prices JSON').fill(JSON.stringify(litellm));
    await importing.getByRole('button', { name: 'Import prices' }).click();
    await page.getByText('Imported 1 price; skipped 1 not priced per token (image-maker).').waitFor();
    await page.getByRole('row', { name: /gpt-lite.*1 \/ 1 \/ 2 USD.*open.*litellm/ }).waitFor();

    await page.getByRole('button', { name: 'Close gpt-lite' }).click();
    expect(dialogs.at(-1)).toMatch(/^Close the price of gpt-lite now\?/);
    await expect.poll(() => page.getByRole('button', { name: 'Close gpt-lite' }).count()).toBe(0);
    // Folded again, the book in view.
    await page.getByText("Import LiteLLM's price file").click();
    await page.getByRole('table', { name: 'Price book' }).scrollIntoViewIfNeeded();
    await shot('prices');
    await page.getByRole('checkbox', { name: 'Only the prices in force now' }).check();
    await expect.poll(() => page.getByRole('row', { name: /gpt-lite/ }).count()).toBe(0);
    await page.getByRole('row', { name: /gpt-priced\*/ }).waitFor();
    // Not JSON: said so, nothing sent.
    await page.getByText("Import LiteLLM's price file").click();
    await importing.getByLabel('Prices JSON').fill('{ not json');
    await importing.getByRole('button', { name: 'Import prices' }).click();
    await page.getByRole('alert').filter({ hasText: 'The prices are not JSON' }).waitFor();
    expect(browserErrors).toEqual([]);
  }, 120_000);

  it('usage: reads spend by model for the last week after priced calls through the gateway', async () => {
    // Three calls priced at 1000 and 2000 a million: 10 input and 5 output tokens are 0.01 + 0.01 each.
    await call(tenant.gatewayBaseUrl, 'gpt-priced-1', 3);
    await go('Usage over time');
    await page.getByLabel('Range').selectOption('7d');
    await page.getByLabel('By').selectOption('model');
    const totals = page.getByRole('table', { name: /Totals/ });
    // Spend is shown first where calls have a price, in the workspace's currency, in one format.
    await expect.poll(() => page.getByLabel('Show').inputValue()).toBe('cost');
    // A model's spend is its second cell (the provider answers with a dated model: gpt-priced-1-2026-01-01).
    const spendOf = (model: string) => totals.locator('tbody tr').filter({ hasText: model }).locator('td').nth(1).textContent();
    await expect.poll(() => spendOf('gpt-priced-1')).toBe('$0.06');
    // The route's calls had no price: their spend is nothing, and they are counted as unpriced.
    await expect.poll(() => spendOf('gpt-console')).toBe('$0.00 (3 unpriced)');
    await expect.poll(() => totals.locator('tfoot td').first().textContent()).toBe('$0.06 (3 unpriced)');
    // Calls, errors and refusals, where this Nexus's summary counts them (the page reads them from the answer).
    const { data: summary } = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { since: new Date(Date.now() - 7 * 86_400_000).toISOString(), groupBy: 'model' },
    });
    const counts = summary!.buckets.length > 0 && summary!.buckets.every((b) => 'calls' in b);
    const headers = await totals.locator('thead th').allTextContents();
    if (counts) {
      expect(headers.slice(0, 6)).toEqual(['Model', 'Spend (USD)', 'Calls', 'Errors', 'Error rate', 'Refused']);
      const row = await totals.locator('tbody tr').filter({ hasText: 'gpt-priced-1' }).locator('td').allTextContents();
      expect(row.slice(2, 6)).toEqual(['3', '0', '0 %', '0']);
    } else {
      expect(headers).toEqual(['Model', 'Spend (USD)', 'Units', 'Input tokens', 'Output tokens', 'Events']);
    }
    // The key and plan groupings, where this Nexus answers them.
    const byPlan = await getUsageSummary({
      client: t.client,
      path: { workspaceId: tenant.workspaceId },
      query: { groupBy: 'plan' as 'model' },
    });
    const groupings = await page.getByLabel('By').locator('option').allTextContents();
    if (byPlan.response.status === 200) {
      expect(groupings).toEqual(['Model', 'Access (user)', 'Connection', 'Inference key', 'Plan']);
      await page.getByLabel('By').selectOption('plan');
      await expect.poll(() => totals.locator('tbody tr').first().locator('td').first().textContent()).toBe('features');
      // A key as its user, name and prefix (getInferenceKey, then the access), not its id.
      await page.getByLabel('By').selectOption('key');
      await expect
        .poll(() => totals.locator('tbody tr').first().locator('td').first().textContent())
        .toBe(`features-user-0 · default (${tenant.apiKey.slice(0, 14)}…)`);
      await page.getByLabel('By').selectOption('model');
    } else {
      expect(byPlan.response.status).toBe(400);
      expect(groupings).toEqual(['Model', 'Access (user)', 'Connection']);
    }
    // The biggest spender first.
    await expect.poll(() => totals.locator('tbody tr').first().textContent()).toMatch(/^gpt-priced-1/);
    const chart = page.getByTestId('usage-chart');
    await chart.locator('canvas').waitFor();
    expect(await chart.getAttribute('data-draw')).toBe('bars');
    await page.getByText('One bar per hour, in your time zone (UTC).').waitFor();
    // A year is drawn by day: by hour it would be more buckets than a summary holds.
    await page.getByLabel('Range').selectOption('365d');
    expect(await page.getByLabel('Per').inputValue()).toBe('day');
    expect(await page.getByLabel('Per').locator('option[value="hour"]').isDisabled()).toBe(true);
    await page.getByText('One bar per day, days in UTC (from its midnight).').waitFor();
    await page.getByLabel('Range').selectOption('7d');
    await page.getByText("Spend is the providers' cost from the price book, in USD.").waitFor();
    await shot('usage');
    expect(browserErrors).toEqual([]);
  }, 120_000);

  it("usage by day in the operator's time zone: Tokyo's days asked for, drawn and labelled", async () => {
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, locale: 'en-US', timezoneId: 'Asia/Tokyo' });
    try {
      const tokyo = await context.newPage();
      // The page's first summary (the last 24 hours, by hour) is made to answer after the month's, asked for
      // meanwhile: the page must keep the month, the summary asked for last, not the one that answered last.
      const isFirstSummary = (url: string) =>
        url.includes('/usage-summary?') && url.includes('granularity=hour') && url.includes('timeZone=');
      await tokyo.route('**/usage-summary?*', async (route) => {
        if (isFirstSummary(route.request().url())) await new Promise((resolve) => setTimeout(resolve, 1500));
        await route.continue();
      });
      const firstAnswered = tokyo.waitForResponse((r) => isFirstSummary(r.url()));
      await signIn(tokyo, t.url);
      await tokyo.goto(`${t.url}/console/#/w/${tenant.workspaceId}/usage`);
      await tokyo.getByRole('heading', { name: 'Usage over time', level: 1 }).waitFor();
      const byDay = tokyo.waitForRequest((r) => r.url().includes('/usage-summary?') && r.url().includes('granularity=day'));
      await tokyo.getByLabel('Range').selectOption('30d');
      expect(new URL((await byDay).url()).searchParams.get('timeZone')).toBe('Asia/Tokyo');
      const chart = tokyo.getByTestId('usage-chart');
      await chart.locator('canvas').waitFor();
      await expect.poll(() => chart.getAttribute('data-zone')).toBe('Asia/Tokyo');
      await tokyo.getByText('Day (Asia/Tokyo)').first().waitFor();
      await tokyo.getByText('One bar per day, days in Asia/Tokyo (from its midnight).').waitFor();
      // The late answer arrives, and has had time to be drawn if it were going to be: the month by day stays.
      await firstAnswered;
      await tokyo.waitForTimeout(500);
      expect(await chart.getByText('Day (Asia/Tokyo)').count()).toBeGreaterThan(0);
      expect(await chart.getByText('Hour (Asia/Tokyo)').count()).toBe(0);
    } finally {
      await context.close();
    }
  }, 60_000);

  /** A page of its own (its theme and its requests untouched by the other tests), signed in, on a workspace's usage. */
  const usagePage = async (workspaceId: string, errors: string[], onPage?: (page: Page) => void | Promise<void>): Promise<Page> => {
    const own = await watchedPage(browser, { viewport: { width: 1440, height: 900 }, locale: 'en-US', timezoneId: 'UTC' }, errors);
    await onPage?.(own);
    await signIn(own, t.url);
    await own.goto(`${t.url}/console/#/w/${workspaceId}/usage`);
    await own.getByRole('heading', { name: 'Usage over time', level: 1 }).waitFor();
    return own;
  };

  it('usage: switching "By" reads names for the grouping shown only, a list read for the users, each key once; nothing refused', async () => {
    // Three users, each with a key, each calling a model of their own.
    const other = await provisionTenant(t.client, { name: 'switch', baseUrl: upstream.url, providerKey, users: 3 });
    for (const [i, user] of other.users.entries()) {
      const openai = new OpenAI({ baseURL: `${other.gatewayBaseUrl}/v1`, apiKey: user.apiKey, maxRetries: 0 });
      await openai.chat.completions.create({ model: `gpt-switch-${i}`, messages: [{ role: 'user', content: 'hello' }] });
    }
    await t.nexus.gateway.drain();

    const errors: string[] = [];
    const answers: { call: string; status: number }[] = [];
    const pending = new Set<Request>();
    const own = await usagePage(other.workspaceId, errors, (p) => {
      p.on('request', (r) => pending.add(r));
      p.on('requestfailed', (r) => pending.delete(r));
      p.on('requestfinished', async (r) => {
        const url = new URL(r.url());
        if (url.pathname.startsWith('/admin/'))
          answers.push({ call: `${r.method()} ${url.pathname}`, status: (await r.response())!.status() });
        pending.delete(r);
      });
    });
    try {
      const totals = own.getByRole('table', { name: /Totals/ });
      // The rows' names, sorted (the fake upstream answers with a dated model: gpt-switch-0-2026-01-01).
      const rows = async () => (await totals.locator('tbody tr td:first-child').allTextContents()).sort();
      const models = ['gpt-switch-0-2026-01-01', 'gpt-switch-1-2026-01-01', 'gpt-switch-2-2026-01-01'];
      await expect.poll(rows).toEqual(models);
      /** Chooses a grouping, waits for its rows' names and for every request to end; the name reads it made. */
      const switchTo = async (groupBy: string, names: string[]) => {
        await expect.poll(() => pending.size).toBe(0);
        const from = answers.length;
        await own.getByLabel('By').selectOption(groupBy);
        await expect.poll(rows).toEqual(names);
        await expect.poll(() => pending.size).toBe(0);
        return answers
          .slice(from)
          .map((a) => a.call)
          .filter((call) => /\/(workspace-accesses|inference-keys)\/|\/users$/.test(call));
      };
      // By user: the newest users in one list read, none read one by one (the model names were never asked as users).
      expect(await switchTo('access', ['switch-user-0', 'switch-user-1', 'switch-user-2'])).toEqual([
        `GET /admin/v1/workspaces/${other.workspaceId}/users`,
      ]);
      // By key: each key read once (no list names keys across a workspace); their users are known already.
      const keyReads = await switchTo(
        'key',
        other.users.map((u, i) => `switch-user-${i} · default (${u.apiKey.slice(0, 14)}…)`),
      );
      expect(keyReads.sort()).toEqual(other.users.map((u) => `GET /admin/v1/inference-keys/${u.apiKeyId}`).sort());
      // Connections and plans are named by the lists the page read once; the way back reads nothing again.
      expect(await switchTo('connection', ['switch upstream'])).toEqual([]);
      expect(await switchTo('plan', ['switch'])).toEqual([]);
      expect(await switchTo('model', models)).toEqual([]);
      expect(await switchTo('access', ['switch-user-0', 'switch-user-1', 'switch-user-2'])).toEqual([]);
      // No request of the page was refused.
      expect(answers.filter((a) => a.status >= 400)).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await own.context().close();
    }
  }, 120_000);

  /**
   * How light the chart's y axis is drawn: the mean lightness (0 to 255) of the opaque pixels of the canvas's left 80
   * px, where the axis's values and label are (uPlot draws them on the canvas, which no stylesheet reaches).
   */
  const axisLightness = (chart: Locator) =>
    chart.evaluate((box) => {
      const canvas = box.querySelector('canvas')!;
      const width = Math.round(80 * (canvas.width / canvas.getBoundingClientRect().width));
      const { data } = canvas.getContext('2d')!.getImageData(0, 0, width, canvas.height);
      let sum = 0;
      let count = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3]! < 200) continue;
        sum += 0.2126 * data[i]! + 0.7152 * data[i + 1]! + 0.0722 * data[i + 2]!;
        count++;
      }
      return count ? sum / count : -1;
    });

  it("usage chart: its axes are drawn in the theme's text colour, and again when the theme changes", async () => {
    await call(tenant.gatewayBaseUrl, 'gpt-ink', 1);
    const errors: string[] = [];
    const own = await usagePage(tenant.workspaceId, errors, (p) => p.emulateMedia({ colorScheme: 'dark' }));
    try {
      const chart = own.getByTestId('usage-chart');
      await chart.locator('canvas').waitFor();
      const light = (v: number) => v > 160;
      const dark = (v: number) => v >= 0 && v < 96;
      // The system's dark scheme: light text on the dark card.
      await expect.poll(async () => light(await axisLightness(chart))).toBe(true);
      // The Theme button: system, dark, light, system again; the chart follows each without being drawn anew.
      const theme = own.getByRole('button', { name: /^Theme:/ });
      await theme.click();
      await expect.poll(() => theme.textContent()).toBe('Theme: dark');
      await expect.poll(async () => light(await axisLightness(chart))).toBe(true);
      await theme.click();
      await expect.poll(() => theme.textContent()).toBe('Theme: light');
      await expect.poll(async () => dark(await axisLightness(chart))).toBe(true);
      await theme.click();
      await expect.poll(() => theme.textContent()).toBe('Theme: system');
      await expect.poll(async () => light(await axisLightness(chart))).toBe(true);
      // The system's scheme changing while the page is open.
      await own.emulateMedia({ colorScheme: 'light' });
      await expect.poll(async () => dark(await axisLightness(chart))).toBe(true);
      expect(errors).toEqual([]);
    } finally {
      await own.context().close();
    }
  }, 60_000);

  it('budget: none set says so; a bad amount is named; a budget set shows the spend and a crossed level', async () => {
    await go('Budget');
    await page.getByText('No budget set').waitFor();
    const form = page.getByRole('form', { name: 'Set the budget' });
    await form.getByLabel('Soft level').fill('abc');
    await form.getByRole('button', { name: 'Save budget' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Soft level: write an amount in USD');
    await form.getByLabel('Soft level').fill('0.05');
    await form.getByLabel('Hard level').fill('100');
    await form.getByRole('button', { name: 'Save budget' }).click();
    await expect.poll(() => page.getByTestId('budget-spent').textContent()).toBe('$0.06');
    await page.getByText('crossed', { exact: true }).waitFor();
    // Read again from the API: as it was set.
    await go('Prices');
    await go('Budget');
    await expect.poll(() => page.getByRole('form', { name: 'Set the budget' }).getByLabel('Hard level').inputValue()).toBe('100');
    await page.getByText('$100.00 · 0.06 % spent').waitFor();
    await page.getByText('$0.05 · 120 % spent').waitFor();
    await shot('budget');
    expect(browserErrors).toEqual([]);
  }, 60_000);

  it('each page: no serious or critical axe-core violation, in light and dark mode', async () => {
    const found: Record<string, string[]> = {};
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const name of ['Routes', 'Prices', 'Budget', 'Webhooks', 'Usage over time']) {
        await go(name);
        await page.waitForLoadState('networkidle');
        await page
          .getByRole('status')
          .filter({ hasText: /Loading|…/ })
          .waitFor({ state: 'detached' })
          .catch(() => undefined);
        // The panels open too: a route's health, an endpoint's messages.
        if (name === 'Routes') await page.getByRole('button', { name: 'Health of chat' }).click();
        if (name === 'Webhooks') await page.getByRole('button', { name: 'Messages' }).click();
        await page.waitForLoadState('networkidle');
        const violations = await axeViolations(page);
        if (violations.length) found[`${name} (${scheme})`] = violations;
      }
    }
    expect(found).toEqual({});

    // 390 px wide: no page is wider than the screen (a wide table scrolls in its own box).
    await page.setViewportSize({ width: 390, height: 844 });
    const wider: Record<string, number> = {};
    for (const name of ['Routes', 'Prices', 'Budget', 'Webhooks', 'Usage over time']) {
      await go(name);
      await page.waitForLoadState('networkidle');
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      if (width > 390) wider[name] = width;
    }
    await page.setViewportSize({ width: 1440, height: 900 });
    expect(wider).toEqual({});
    expect(browserErrors).toEqual([]);
  }, 120_000);
});

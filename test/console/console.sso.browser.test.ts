/**
 * Single sign-on in the console, in Chromium (playwright-core, Debian's Chromium) on a live Nexus, against a real
 * OpenID provider on 127.0.0.1 (oidc-provider, test/support/oidc-idp.ts): the sign-in page's button, the provider's
 * login page, back to the console signed in with the session cookie the browser itself kept, a change made from
 * the console (its CSRF token), and sign-out here and at the provider. The sign-in page is scanned by axe-core.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIdp, type Idp } from '../support/oidc-idp.js';
import { projectRoot } from '../support/paths.js';
import { listWorkspaces } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { axeViolations, chromiumOrWarn, unfold, chromiumPage } from './console-support.js';

const executablePath = chromiumOrWarn("the console's single sign-on browser test");
const shots = join(projectRoot, 'test-results', 'console');

describe.skipIf(!executablePath)('the console: single sign-on with OpenID Connect, in Chromium', () => {
  let idp: Idp;
  let t: TestApp;
  let browser: Browser;
  let page: Page;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    idp = await startIdp();
    t = await startTestApp({
      env: {
        NEXUS_OIDC_ID: 'acme',
        NEXUS_OIDC_NAME: 'Acme Okta',
        NEXUS_OIDC_ISSUER: idp.issuer,
        NEXUS_OIDC_CLIENT_ID: idp.clientId,
        NEXUS_OIDC_CLIENT_SECRET: idp.clientSecret,
        NEXUS_OWNER_EMAILS: 'alice@acme.example',
      },
    });
    idp.configure(t.url, 'acme');
    idp.people.set('alice', { email: 'alice@acme.example', name: 'Alice Owner' });
    ({ browser, page } = await chromiumPage(executablePath!, browserErrors, { context: { viewport: { width: 1280, height: 800 } } }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await idp?.close();
  });

  it('signs in at the provider, works with the session, and signs out here and at the provider', async () => {
    await page.goto(`${t.url}/console/`);
    const button = page.getByRole('link', { name: 'Sign in with Acme Okta' });
    await button.waitFor();
    expect(await page.getByLabel('Management Key').isVisible()).toBe(true);
    await page.screenshot({ path: join(shots, 'sso-sign-in.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);

    await button.click();
    // The provider's own login page.
    await page.waitForURL((url) => url.origin === idp.issuer);
    await page.locator('input[name="login"]').fill('alice');
    await page.locator('input[name="password"]').fill('any password');
    await page.locator('button[type="submit"]').click();
    await page.getByRole('heading', { name: 'Workspaces', level: 1 }).waitFor();
    expect(page.url()).toBe(`${t.url}/console/`);

    // The browser kept the cookie as sent: __Host-, HttpOnly, Secure, SameSite=Lax; no key in the page's storage.
    const cookies = await page.context().cookies(t.url);
    const session = cookies.find((c) => c.name === '__Host-nexus_session');
    expect(session).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Lax', path: '/' });
    expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual([]);
    expect(await page.evaluate(() => document.cookie)).not.toContain('nexus_session');

    // A change from the console: its request carries the session's CSRF token.
    await unfold(page, 'New workspace');
    const createWs = page.getByRole('form', { name: 'Create a workspace' });
    await createWs.getByLabel('Name').fill('Made by Alice');
    await createWs.getByRole('button', { name: 'Create workspace' }).click();
    await expect.poll(async () => (await listWorkspaces({ client: t.client })).data!.map((w) => w.name)).toContain('Made by Alice');

    // Sign out: the session ends here, then the provider asks to confirm its own sign-out and sends the browser back.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL((url) => url.origin === idp.issuer);
    expect(idp.endSessions.at(-1)?.get('id_token_hint')).toBeTruthy();
    await page.locator('button[autofocus], button[type="submit"]').first().click();
    await page.getByRole('link', { name: 'Sign in with Acme Okta' }).waitFor();
    expect(page.url()).toBe(`${t.url}/console/`);
    expect((await page.context().cookies(t.url)).some((c) => c.name === '__Host-nexus_session')).toBe(false);
    const stale = await fetch(`${t.url}/admin/v1/workspaces`, { headers: { Cookie: `__Host-nexus_session=${session!.value}` } });
    expect(stale.status).toBe(401);
    // The provider's own development pages import a web font from the internet, which this host may not reach.
    expect(browserErrors.filter((e) => !e.includes('net::ERR_NAME_NOT_RESOLVED'))).toEqual([]);
  });
});

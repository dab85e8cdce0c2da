/**
 * What the console's browser tests share: finding Debian's Chromium, a watched page, the sign-in, and axe-core's
 * scan of a page (in both colour schemes). The console they load is built once per run (test/support/build-setup.ts).
 */
import { execFileSync } from 'node:child_process';
import axe from 'axe-core';
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { TEST_ROOT_KEY } from '../support/test-app.js';

/** The Chromium on this host's PATH, if any (no browser is downloaded). */
function findChromium(): string | undefined {
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    try {
      const path = execFileSync('which', [name], { encoding: 'utf8' }).trim();
      if (path) return path;
    } catch {
      // not this one
    }
  }
  return undefined;
}

/** No Chromium: CI (CI=true) fails; elsewhere the suite is skipped with a loud warning. */
export function chromiumOrWarn(suite: string): string | undefined {
  const executablePath = findChromium();
  if (!executablePath) {
    const line = '='.repeat(78);
    const message = `NO CHROMIUM: ${suite} cannot run. Install it (apt-get install -y chromium).`;
    if (process.env.CI === 'true') throw new Error(message);
    console.warn(`\n${line}\n${message}\nIt is SKIPPED here; CI runs it.\n${line}\n`);
  }
  return executablePath;
}

/** The serious and critical violations axe-core finds in the page as it is now: rule, impact and the first elements. */
export async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated through the DevTools protocol, which the console's CSP (script-src 'self') does not govern.
  await page.evaluate(axe.source);
  return page.evaluate(async () => {
    const engine = (window as unknown as { axe: { run: (ctx: Document, opts: object) => Promise<AxeResults> } }).axe;
    interface AxeResults {
      violations: { id: string; impact?: string; nodes: { target: string[] }[] }[];
      passes: unknown[];
    }
    const results = await engine.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] },
    });
    // A scan that checked nothing (axe not run on the page) must not pass as a clean one.
    if (results.passes.length === 0) return ['axe-core checked no rule'];
    return results.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map(
        (v) =>
          `${v.id} (${v.impact}): ${v.nodes
            .slice(0, 3)
            .map((n) => n.target.join(' '))
            .join(', ')}`,
      );
  });
}

/** The serious and critical axe findings in the light and then the dark scheme, each named by its scheme; the page left light. */
export async function axeViolationsInBothSchemes(page: Page): Promise<string[]> {
  const found: string[] = [];
  for (const colorScheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme });
    found.push(...(await axeViolations(page)).map((v) => `${colorScheme}: ${v}`));
  }
  await page.emulateMedia({ colorScheme: 'light' });
  return found;
}

/**
 * A page of a new context of `browser`, watched: its script errors and console errors go to `errors` (a refused API
 * call, which the browser logs as a resource error with its 4xx, is one the test provokes); with `dialogs`, each
 * dialog (a confirmation) is accepted and its question kept there.
 */
export async function watchedPage(browser: Browser, options: BrowserContextOptions, errors: string[], dialogs?: string[]): Promise<Page> {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  if (dialogs) {
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
  }
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of (4\d\d)/.test(msg.text())) errors.push(`console: ${msg.text()}`);
  });
  // The console's own line names no request: a server error is listed with its request and the code it answered.
  page.on('response', (res) => {
    if (res.status() < 500) return;
    const line = `response: ${res.status()} ${res.request().method()} ${res.url()}`;
    errors.push(line);
    void res.text().then(
      (body) => {
        const at = errors.indexOf(line);
        if (at >= 0) errors[at] = `${line} ${body.slice(0, 300)}`;
      },
      () => {},
    );
  });
  return page;
}

/** Signs in with a Management Key (the test's root key unless told) and waits for the workspaces page. */
export async function signIn(page: Page, url: string, key = TEST_ROOT_KEY): Promise<void> {
  await page.goto(`${url}/console/`);
  await page.getByLabel('Management Key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Workspaces', level: 1 }).waitFor();
}

/** The browser context the console tests open unless told otherwise: 1440 x 900, en-US, UTC. */
const CONSOLE_CONTEXT: BrowserContextOptions = { viewport: { width: 1440, height: 900 }, locale: 'en-US', timezoneId: 'UTC' };

/** How a test's Chromium page differs: its context's options over CONSOLE_CONTEXT's, and where its dialogs go. */
interface PageOptions {
  context?: BrowserContextOptions;
  dialogs?: string[];
}

/** Chromium launched from `executablePath`, and a watched page of it (see watchedPage), not signed in. */
export async function chromiumPage(
  executablePath: string,
  errors: string[],
  o: PageOptions = {},
): Promise<{ browser: Browser; page: Page }> {
  const browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
  try {
    return { browser, page: await watchedPage(browser, { ...CONSOLE_CONTEXT, ...o.context }, errors, o.dialogs) };
  } catch (err) {
    await browser.close();
    throw err;
  }
}

/** Chromium and a watched page of it, as chromiumPage, signed in to the console at `url` with the test's root key. */
export async function signedInChromium(
  executablePath: string,
  url: string,
  errors: string[],
  o: PageOptions = {},
): Promise<{ browser: Browser; page: Page }> {
  const { browser, page } = await chromiumPage(executablePath, errors, o);
  try {
    await signIn(page, url);
  } catch (err) {
    await browser.close();
    throw err;
  }
  return { browser, page };
}

/** Follows a link of the console's page navigation and waits until the page's heading is the link's name. */
export async function goByNav(page: Page, link: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: link, exact: true }).click();
  await expect.poll(() => page.getByRole('heading', { level: 1 }).first().textContent()).toBe(link);
}

/** Goes to a workspace's provider connections page on the console at `url` and waits for its heading. */
export async function openConnections(page: Page, url: string, workspaceId: string): Promise<void> {
  await page.goto(`${url}/console/#/w/${workspaceId}/connections`);
  await page.getByRole('heading', { name: 'Provider connections', level: 1 }).waitFor();
}

/** Opens a create form folded behind its button (a list page's New …), unless it is open already. */
export async function unfold(page: Page, button: string): Promise<void> {
  const toggle = page.getByRole('button', { name: button, exact: true });
  if ((await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click();
}

/** Chromium as the tests launch it (Debian's, no sandbox: the tests may run as root). */
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-dev-shm-usage'];

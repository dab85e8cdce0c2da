/**
 * The API reference page (/docs) in Chromium, under its Content-Security-Policy: the page renders the contract's
 * operations, and the browser reports no violation of the policy (no script, style, font or request it refuses)
 * and no script error. The renderer is the vendored Scalar bundle (dist/docs/standalone.js).
 *
 * No Chromium: CI (CI=true) fails here; elsewhere the suite is skipped with a loud warning.
 */
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { CHROMIUM_ARGS, chromiumOrWarn, watchedPage } from './console-support.js';

const executablePath = chromiumOrWarn('the API reference page’s browser test');

describe.skipIf(!executablePath)('the API reference page in Chromium', () => {
  let t: TestApp;
  let browser: Browser;

  beforeAll(async () => {
    t = await startTestApp();
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('is served with a Content-Security-Policy', async () => {
    const res = await fetch(`${t.url}/docs`);
    expect(res.status).toBe(200);
    const policy = res.headers.get('content-security-policy');
    expect(policy).toContain("default-src 'none'");
    expect(policy).toContain("script-src 'self'");
    expect(policy).not.toMatch(/script-src[^;]*'unsafe-(inline|eval)'/);
    expect(policy).toContain("frame-ancestors 'none'");
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it.each(['/docs', '/docs/'])('renders the operations at %s, with no violation of its policy and no script error', async (path) => {
    const errors: string[] = [];
    const page = await watchedPage(browser, { viewport: { width: 1360, height: 900 } }, errors);
    const refused: string[] = [];
    page.on('console', (msg) => {
      if (/Content Security Policy/i.test(msg.text())) refused.push(msg.text());
    });
    // Every violation the page meets, as the browser reports it to the page (set before the page's own scripts run).
    await page.addInitScript(() => {
      const seen: string[] = [];
      (window as unknown as { violations: string[] }).violations = seen;
      document.addEventListener('securitypolicyviolation', (e) => seen.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    await page.goto(`${t.url}${path}`);
    await page.getByText('Create a workspace').first().waitFor({ timeout: 30_000 });
    // The bundle's zod asks once whether it may compile code (`new Function("")` in a try): refused, it validates
    // without, and the browser reports that refusal. The page needs nothing else the policy refuses.
    const probe = (v: string) => v === 'script-src eval' || /'unsafe-eval'|evaluate a string as JavaScript/.test(v);
    expect(
      await page.evaluate(() => (window as unknown as { violations: string[] }).violations).then((v) => v.filter((x) => !probe(x))),
    ).toEqual([]);
    expect(refused.filter((x) => !probe(x))).toEqual([]);
    expect(errors.filter((x) => !probe(x))).toEqual([]);
    await page.context().close();
  });
});

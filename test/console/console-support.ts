/**
 * What the console's browser tests share: finding Debian's Chromium, and axe-core's scan of a page.
 */
import { execFileSync } from 'node:child_process';
import axe from 'axe-core';
import type { Page } from 'playwright-core';

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

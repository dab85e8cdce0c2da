/**
 * Management keys and the audit's actors in the console, in Chromium (playwright-core, Debian's Chromium) on a live
 * Nexus: a root key creates a scoped key (its plaintext shown once, then never again), renames and revokes it, and
 * the audit log names the key that made a change, each checked against the database and the Admin API. A scoped
 * key is told the page is a root key's. Each page is scanned by axe-core, in light and dark.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../support/paths.js';
import { createManagementKey, getWorkspace, listManagementKeys, updateWorkspace } from '../support/sdk.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { chromiumOrWarn, unfold, axeViolationsInBothSchemes, signedInChromium } from './console-support.js';

const executablePath = chromiumOrWarn("the console's management keys browser test");
const shots = join(projectRoot, 'test-results', 'console');

describe.skipIf(!executablePath)('the console: management keys and the audit by name, in Chromium', () => {
  let t: TestApp;
  let browser: Browser;
  let page: Page;
  let workspaceId: string;
  /** The plaintext of the key the first test creates. */
  let shown: string;
  const browserErrors: string[] = [];
  const dialogs: string[] = [];

  const storedKeys = async () => (await listManagementKeys({ client: t.client, query: { limit: 100 } })).data!;

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    t = await startTestApp();
    const ws = await t.fetch(`${t.url}/admin/v1/workspaces`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.config.managementKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Keys and audit' }),
    });
    workspaceId = ((await ws.json()) as { id: string }).id;
    ({ browser, page } = await signedInChromium(executablePath!, t.url, browserErrors, {
      context: { viewport: { width: 1360, height: 900 } },
      dialogs,
    }));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('creates a scoped key, shows its plaintext once, renames it, and the audit names the key that made a change', async () => {
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Management keys', exact: true }).click();
    await page.getByRole('heading', { name: 'Management keys', level: 1 }).waitFor();
    expect(await page.title()).toBe('Management keys · Nexus console');

    expect(await page.getByRole('form', { name: 'Create a Management Key' }).count()).toBe(0);
    await unfold(page, 'New Management Key');
    const form = page.getByRole('form', { name: 'Create a Management Key' });
    await form.getByLabel('Name').fill('ci deploy');
    await form.getByRole('checkbox', { name: 'Keys and audit' }).check();
    await form.getByRole('button', { name: 'Create key' }).click();
    shown = (await page.getByTestId('shown-once').textContent())!.trim();
    expect(shown).toMatch(/^nx-mgmt-/);

    // The key as stored: by that name, seeing that workspace, its hash and never its plaintext.
    const stored = (await storedKeys()).find((k) => k.name === 'ci deploy')!;
    expect(stored).toMatchObject({ root: false, workspaceIds: [workspaceId] });
    expect(shown.startsWith(stored.prefix)).toBe(true);
    const row = await t.database.db('management_keys').where({ id: stored.id }).first();
    expect(row.key_hash).not.toContain(shown);
    expect(JSON.stringify(row)).not.toContain(shown);
    expect((await getWorkspace({ client: t.clientWith(shown), path: { workspaceId } })).response.status).toBe(200);
    await page.getByRole('row', { name: /ci deploy/ }).waitFor();
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    await page.screenshot({ path: join(shots, 'management-keys.png'), fullPage: true });

    // Dismissed, the plaintext is gone, and no reload brings it back.
    await page.getByRole('button', { name: 'I have stored it' }).click();
    expect(await page.content()).not.toContain(shown);
    await page.reload();
    await page.getByRole('row', { name: /ci deploy/ }).waitFor();
    expect(await page.content()).not.toContain(shown);

    // Renamed here, named so by the API.
    await page
      .getByRole('row', { name: /ci deploy/ })
      .getByRole('button', { name: 'Rename' })
      .click();
    await page.getByLabel('New name').fill('ci deploy (prod)');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('row', { name: /ci deploy \(prod\)/ }).waitFor();
    expect((await storedKeys()).find((k) => k.id === stored.id)!.name).toBe('ci deploy (prod)');

    // A change made with the key: the audit page names it, as the database records its id.
    expect(
      (await updateWorkspace({ client: t.clientWith(shown), path: { workspaceId }, body: { metadata: { by: 'ci' } } })).response.status,
    ).toBe(200);
    const recorded = await t.database.db('audit_logs').where({ workspace_id: workspaceId, action: 'workspace.updated' }).first();
    expect(recorded.actor_key_id).toBe(stored.id);
    await page.goto(`${t.url}/console/#/w/${workspaceId}/audit`);
    await page.getByRole('heading', { name: 'Audit log', level: 1 }).waitFor();
    const updatedRow = page.getByRole('row', { name: /workspace\.updated/ });
    await expect.poll(() => updatedRow.getByTestId('audit-actor').textContent()).toBe(`ci deploy (prod)${stored.id}`);
    // The root key of the environment by what it is; the resource links to its page.
    await expect
      .poll(() =>
        page
          .getByRole('row', { name: /workspace\.created/ })
          .getByTestId('audit-actor')
          .textContent(),
      )
      .toBe('root key (NEXUS_MANAGEMENT_KEY)root');
    expect(await updatedRow.getByRole('link', { name: 'workspace' }).getAttribute('href')).toBe(`#/w/${workspaceId}/settings`);
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
    await page.screenshot({ path: join(shots, 'audit-actors.png'), fullPage: true });
    expect(browserErrors).toEqual([]);
  }, 120_000);

  it('revokes a key after a confirmation: the API refuses it at once, and the audit names who revoked it', async () => {
    // An operator signed in with a root key of their own: the audit names them.
    const alice = await createManagementKey({ client: t.client, body: { name: 'ops-alice', root: true } });
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Management Key').fill(alice.data!.key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Workspaces', level: 1 }).waitFor();
    await page.goto(`${t.url}/console/#/management-keys`);
    const row = page.getByRole('row', { name: /ci deploy \(prod\)/ });
    await row.getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => row.textContent()).toMatch(/revoked/);
    expect(dialogs.at(-1)).toBe('Revoke ci deploy (prod)? Requests with it are refused from the next one on.');
    const stored = (await storedKeys()).find((k) => k.name === 'ci deploy (prod)')!;
    expect(stored.revokedAt).toBeDefined();
    const row2 = await t.database.db('management_keys').where({ id: stored.id }).first();
    expect(row2.revoked_at).not.toBeNull();
    expect(await row.getByRole('button', { name: 'Revoke' }).count()).toBe(0);
    const refused = await getWorkspace({ client: t.clientWith(shown), path: { workspaceId } });
    expect(refused.response.status).toBe(401);

    // Who revoked it: the audit page names the key, as the database records its id.
    const entry = await t.database.db('audit_logs').where({ workspace_id: workspaceId, action: 'management_key.revoked' }).first();
    expect(entry).toMatchObject({ actor_key_id: alice.data!.id, resource_id: stored.id });
    await page.goto(`${t.url}/console/#/w/${workspaceId}/audit`);
    const revokedRow = page.getByRole('row', { name: /management_key\.revoked/ });
    await expect.poll(() => revokedRow.getByTestId('audit-actor').textContent()).toBe(`ops-alice${alice.data!.id}`);
    expect(await revokedRow.getByRole('link', { name: 'management_key' }).getAttribute('href')).toBe('#/management-keys');
    expect(browserErrors).toEqual([]);
  });

  it('a scoped key is told the page is a root key’s', async () => {
    const { key } = await t.nexus.services.managementKeys.createScoped(
      { keyId: 'test', isRoot: true, workspaceIds: null, requestId: 'test', clientAddress: null },
      { name: 'console-scoped', workspaceIds: [workspaceId] },
    );
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Management Key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Workspaces', level: 1 }).waitFor();
    await page.goto(`${t.url}/console/#/management-keys`);
    await page.getByText('Only a root Management Key manages keys: sign in with one to see and create them.').waitFor();
    expect(await page.getByRole('form', { name: 'Create a Management Key' }).count()).toBe(0);
    expect(await axeViolationsInBothSchemes(page)).toEqual([]);
  });
});

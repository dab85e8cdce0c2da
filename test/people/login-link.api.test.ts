/**
 * With no OpenID Connect provider, `nexus login-link` (the CLI, run as a process on this test's schema) prints a
 * link that signs its bearer in as the owner, once, within its minutes. Also: what the sign-in page is told, and
 * the session cookie's development fallback (NEXUS_SESSION_COOKIE_SECURE=false).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/actor.js';
import { projectRoot } from '../support/paths.js';
import { startTestApp, TEST_ENCRYPTION_KEY, type TestApp } from '../support/test-app.js';
import { Browser } from './browser-jar.js';

let offsetMs = 0;
const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };
let t: TestApp;

beforeAll(async () => {
  t = await startTestApp({ clock });
});

afterAll(async () => {
  await t?.close();
});

/** `nexus login-link`, as an operator runs it on the server's machine. */
async function loginLinkFromCli(): Promise<string> {
  const { stdout } = await promisify(execFile)(join(projectRoot, 'node_modules', '.bin', 'tsx'), ['src/cli.ts', 'login-link'], {
    cwd: projectRoot,
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: t.database.url ?? '',
      NEXUS_DATABASE_SCHEMA: t.database.schema ?? '',
      NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      NEXUS_PUBLIC_URL: t.url,
    },
  });
  const link = new RegExp(`${t.url}/auth/link\\?token=nx-link-[A-Za-z0-9_-]{43}`).exec(stdout)?.[0];
  expect(link, stdout).toBeDefined();
  return link!;
}

describe('nexus login-link', () => {
  it('prints a link that signs the owner in once; a preview fetching it uses nothing', async () => {
    const link = await loginLinkFromCli();
    const preview = await new Browser().visit(link);
    expect(preview.status).toBe(200);
    expect(preview.body).toContain('<button type="submit">Sign in</button>');
    expect(preview.headers.get('content-security-policy')).toContain("default-src 'none'");

    const browser = new Browser();
    const page = await browser.visit(link);
    const signedIn = await browser.submit(page, {}, (url) => url.endsWith('/console/'));
    expect(signedIn.status).toBe(303);
    expect(signedIn.location).toBe(`${t.url}/console/`);
    const session = JSON.parse((await browser.request(`${t.url}/auth/session`)).body) as Record<string, any>;
    expect(session).toMatchObject({ owner: true, provider: null, person: { issuer: 'nexus:login-link', subject: 'owner' } });
    const workspaces = await browser.request(`${t.url}/admin/v1/workspaces`);
    expect(workspaces.status).toBe(200);

    // Used: a second browser with the same link is refused.
    const again = new Browser();
    const refused = await again.submit(await again.visit(link), {});
    expect(refused.status).toBe(400);
    expect(refused.body).toContain('This sign-in link is not valid');
    expect(again.cookies.size).toBe(0);

    // Signing out of a link's session ends it here; there is no provider to end it at.
    const out = await browser.request(`${t.url}/auth/sign-out`, { method: 'POST', headers: { 'X-CSRF-Token': session.csrfToken } });
    expect(JSON.parse(out.body)).toEqual({ signedOut: true });
    expect((await browser.request(`${t.url}/admin/v1/workspaces`)).status).toBe(401);
  });

  it('refuses a link past its minutes, and a token that is not a link', async () => {
    const link = await t.nexus.services.people.signIn.createLoginLink();
    offsetMs = 16 * 60_000;
    try {
      const browser = new Browser();
      const page = await browser.visit(`${t.url}/auth/link?token=${link.token}`);
      expect((await browser.submit(page, {})).status).toBe(400);
    } finally {
      offsetMs = 0;
    }
    const browser = new Browser();
    const forged = await browser.submit(await browser.visit(`${t.url}/auth/link?token=%22%3E%3Cscript%3E`), {});
    expect(forged.status).toBe(400);
    expect(forged.body).not.toContain('<script>');
  });
});

describe('the sign-in page', () => {
  it('offers the login link when no provider is configured, and the key sign-in unless turned off', async () => {
    expect(await (await fetch(`${t.url}/auth/providers`)).json()).toEqual({ providers: [], keySignIn: true, loginLink: true });
    const noKeys = await t.withEnv({ NEXUS_CONSOLE_KEY_SIGN_IN: 'false' });
    try {
      expect(await (await fetch(`${noKeys.url}/auth/providers`)).json()).toMatchObject({ keySignIn: false });
    } finally {
      await noKeys.close();
    }
  });

  it('without a session: /auth/session and sign-out answer 401, and a stale cookie is cleared', async () => {
    const none = await fetch(`${t.url}/auth/session`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe('missing_credentials');
    const stale = await fetch(`${t.url}/auth/session`, { headers: { Cookie: '__Host-nexus_session=not-a-session' } });
    expect(stale.status).toBe(401);
    expect(((await stale.json()) as { error: { code: string } }).error.code).toBe('invalid_session');
    expect(stale.headers.getSetCookie()[0]).toMatch(/^__Host-nexus_session=; Path=\/; Max-Age=0; HttpOnly; SameSite=Lax; Secure$/);
    expect((await fetch(`${t.url}/auth/sign-out`, { method: 'POST' })).status).toBe(401);
  });
});

describe('the development fallback of the cookie', () => {
  it('is nexus_session without Secure when NEXUS_SESSION_COOKIE_SECURE=false', async () => {
    const dev = await t.withEnv({ NEXUS_SESSION_COOKIE_SECURE: 'false' });
    try {
      const link = await dev.nexus.services.people.signIn.createLoginLink();
      const browser = new Browser();
      await browser.submit(await browser.visit(`${dev.url}/auth/link?token=${link.token}`), {}, () => true);
      const cookie = browser.setCookies.find((c) => c.startsWith('nexus_session='))!;
      expect(cookie).toMatch(/; HttpOnly; SameSite=Lax$/);
      expect((await browser.request(`${dev.url}/admin/v1/workspaces`)).status).toBe(200);
    } finally {
      await dev.close();
    }
  });
});

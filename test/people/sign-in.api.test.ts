/**
 * People sign in with OpenID Connect against a real provider on 127.0.0.1 (oidc-provider, test/support/oidc-idp.ts),
 * through HTTP as a browser would (test/people/browser-jar.ts): the code flow with PKCE, the session cookie, CSRF,
 * idle and absolute expiry, revocation, sign-out here and at the provider, and who may sign in.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/actor.js';
import { startIdp, type Idp } from '../support/oidc-idp.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { Browser, type Page } from './browser-jar.js';

const PROVIDER = 'acme';
const SESSION_COOKIE = '__Host-nexus_session';

/** The server's clock, moved forward by the expiry tests. */
let offsetMs = 0;
const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };

let idp: Idp;
let t: TestApp;

beforeAll(async () => {
  idp = await startIdp();
  t = await startTestApp({
    clock,
    env: {
      NEXUS_OIDC_PROVIDERS: JSON.stringify([
        { id: PROVIDER, name: 'Acme Okta', issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret },
      ]),
      NEXUS_OWNER_EMAILS: 'alice@acme.example, Bob@Acme.example',
      NEXUS_SESSION_IDLE_MINUTES: '30',
      NEXUS_SESSION_MAX_HOURS: '2',
    },
  });
  idp.configure(t.url, PROVIDER);
  idp.people.set('alice', { email: 'alice@acme.example', name: 'Alice Owner' });
  idp.people.set('bob', { email: 'bob@acme.example', name: 'Bob Owner' });
  idp.people.set('mallory', { email: 'mallory@acme.example', name: 'Mallory' });
  idp.people.set('eve', { email: 'alice@acme.example', name: 'Eve', emailVerified: false });
});

afterAll(async () => {
  await t?.close();
  await idp?.close();
});

const isNexusCallback = (url: string) => url.startsWith(`${t.url}/auth/sso/`);

/** The whole flow: Nexus's redirect, the IdP's login page, its redirect back to Nexus's callback (answered, not followed). */
async function signIn(browser: Browser, login: string): Promise<Page> {
  const loginPage = await browser.visit(`${t.url}/auth/sso/${PROVIDER}`, isNexusCallback);
  // A browser still signed in at the IdP comes straight back with a code.
  if (loginPage.location && isNexusCallback(loginPage.location)) return browser.request(loginPage.location);
  expect(loginPage.status).toBe(200);
  const back = await browser.submit(loginPage, { login, password: 'any' }, isNexusCallback);
  expect(back.location).toMatch(/\/auth\/sso\/acme\/callback\?code=/);
  return browser.request(back.location!);
}

async function signedIn(login: string): Promise<Browser> {
  const browser = new Browser();
  const callback = await signIn(browser, login);
  expect(callback.status).toBe(303);
  expect(callback.location).toBe(`${t.url}/console/`);
  return browser;
}

async function admin(browser: Browser, path: string, init: RequestInit = {}) {
  const page = await browser.request(`${t.url}/admin/v1${path}`, {
    ...init,
    headers: { 'Content-Type': 'application/json', ...(init.headers as Record<string, string>) },
  });
  return { status: page.status, body: page.body ? (JSON.parse(page.body) as Record<string, any>) : undefined };
}

async function sessionOf(browser: Browser) {
  const page = await browser.request(`${t.url}/auth/session`);
  return { status: page.status, body: JSON.parse(page.body) as Record<string, any> };
}

describe('sign-in with OpenID Connect', () => {
  it('lists the providers for the sign-in page, and the key sign-in', async () => {
    const res = await fetch(`${t.url}/auth/providers`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(await res.json()).toEqual({ providers: [{ id: PROVIDER, name: 'Acme Okta' }], keySignIn: true, loginLink: false });
  });

  it('sends the browser to the provider with PKCE (S256), state and nonce, and a short-lived __Host- cookie', async () => {
    const browser = new Browser();
    const start = await browser.request(`${t.url}/auth/sso/${PROVIDER}`);
    expect(start.status).toBe(302);
    const authorize = new URL(start.location!);
    expect(authorize.origin).toBe(idp.issuer);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(authorize.searchParams.get('state')).toBeTruthy();
    expect(authorize.searchParams.get('nonce')).toBeTruthy();
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${t.url}/auth/sso/${PROVIDER}/callback`);
    expect(authorize.searchParams.get('scope')).toBe('openid email profile');
    const cookie = browser.setCookies.find((c) => c.startsWith('__Host-nexus_sign_in='))!;
    expect(cookie).toMatch(/; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax; Secure$/);
  });

  it('signs an owner in: the session cookie (__Host-, HttpOnly, Secure, SameSite=Lax) opens the Admin API', async () => {
    const browser = await signedIn('alice');
    const cookie = browser.setCookies.find((c) => c.startsWith(`${SESSION_COOKIE}=`))!;
    expect(cookie).toMatch(/^__Host-nexus_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax; Secure$/);
    // The sign-in's own cookie is cleared once used.
    expect(browser.cookies.has('__Host-nexus_sign_in')).toBe(false);

    const session = await sessionOf(browser);
    expect(session.status).toBe(200);
    expect(session.body).toMatchObject({
      person: { email: 'alice@acme.example', name: 'Alice Owner', subject: 'alice', issuer: idp.issuer },
      owner: true,
      provider: PROVIDER,
    });
    expect(session.body.csrfToken).toMatch(/^[0-9a-f]{64}$/);
    expect(Date.parse(session.body.expiresAt)).toBeGreaterThan(Date.now());

    const list = await admin(browser, '/workspaces');
    expect(list.status).toBe(200);
  });

  it('refuses a change made with the session without its CSRF token, and takes it with the token', async () => {
    const browser = await signedIn('alice');
    const body = JSON.stringify({ name: 'made-by-alice' });
    const none = await admin(browser, '/workspaces', { method: 'POST', body });
    expect(none.status).toBe(403);
    expect(none.body!.error.code).toBe('csrf_token_invalid');
    const wrong = await admin(browser, '/workspaces', { method: 'POST', body, headers: { 'X-CSRF-Token': '0'.repeat(64) } });
    expect(wrong.body!.error.code).toBe('csrf_token_invalid');
    // Another session's token is no token of this one.
    const other = await sessionOf(await signedIn('bob'));
    const crossed = await admin(browser, '/workspaces', { method: 'POST', body, headers: { 'X-CSRF-Token': other.body.csrfToken } });
    expect(crossed.body!.error.code).toBe('csrf_token_invalid');

    const { csrfToken } = (await sessionOf(browser)).body;
    const made = await admin(browser, '/workspaces', { method: 'POST', body, headers: { 'X-CSRF-Token': csrfToken } });
    expect(made.status).toBe(201);
    // The audit names the session the change was made with.
    const audit = await t.client.get({ url: '/admin/v1/workspaces/{workspaceId}/audit-logs', path: { workspaceId: made.body!.id } });
    const entries = audit.data as { actorKeyId: string }[];
    expect(entries[0]!.actorKeyId).toMatch(/^session:[0-9a-f-]{36}$/);
  });

  it('leaves requests made with a Management Key as they were: no CSRF token, the key wins over a cookie', async () => {
    const browser = await signedIn('alice');
    const made = await admin(browser, '/workspaces', {
      method: 'POST',
      body: JSON.stringify({ name: 'made-by-key' }),
      headers: { Authorization: `Bearer ${TEST_ROOT_KEY}` },
    });
    expect(made.status).toBe(201);
    const wrongKey = await admin(browser, '/workspaces', { headers: { Authorization: 'Bearer nx-mgmt-not-a-key-0000000000000000' } });
    expect(wrongKey.body!.error.code).toBe('invalid_management_key');
  });

  it('refuses a person who is not an owner, and an email the provider does not say is verified', async () => {
    for (const login of ['mallory', 'eve']) {
      const browser = new Browser();
      const callback = await signIn(browser, login);
      expect(callback.status).toBe(403);
      expect(callback.headers.get('content-type')).toMatch(/^text\/html/);
      expect(callback.body).toContain('is not a member of this Nexus');
      expect(browser.cookies.has(SESSION_COOKIE)).toBe(false);
    }
  });

  it('refuses a callback in a browser that did not begin the sign-in, and the same callback twice', async () => {
    const browser = new Browser();
    const loginPage = await browser.visit(`${t.url}/auth/sso/${PROVIDER}`, isNexusCallback);
    const back = await browser.submit(loginPage, { login: 'alice', password: 'any' }, isNexusCallback);
    // Another browser (an attacker's link, say) brings the code without the sign-in's cookie.
    const stranger = await new Browser().request(back.location!);
    expect(stranger.status).toBe(400);
    expect(stranger.body).toContain('This browser began no sign-in');
    const first = await browser.request(back.location!);
    expect(first.status).toBe(303);
    // Used once: the sign-in's cookie is gone, and with it the attempt.
    browser.cookies.delete(SESSION_COOKIE);
    const again = await browser.request(back.location!);
    expect(again.status).toBe(400);
    expect(browser.cookies.has(SESSION_COOKIE)).toBe(false);
  });

  it('refuses a callback whose state is not the one sent', async () => {
    const browser = new Browser();
    const loginPage = await browser.visit(`${t.url}/auth/sso/${PROVIDER}`, isNexusCallback);
    const back = await browser.submit(loginPage, { login: 'alice', password: 'any' }, isNexusCallback);
    const forged = new URL(back.location!);
    forged.searchParams.set('state', 'not-the-state');
    const page = await browser.request(forged.href);
    expect(page.status).toBe(400);
    expect(browser.cookies.has(SESSION_COOKIE)).toBe(false);
  });

  it('answers an unknown provider with a page, not a redirect', async () => {
    const page = await new Browser().request(`${t.url}/auth/sso/nobody`);
    expect(page.status).toBe(400);
    expect(page.body).toContain("No single sign-on provider 'nobody'");
  });
});

describe('sessions end', () => {
  it('when unused for the idle time, and at the absolute end however used', async () => {
    const idle = await signedIn('alice');
    const busy = await signedIn('bob');
    try {
      offsetMs = 20 * 60_000;
      expect((await admin(busy, '/workspaces')).status).toBe(200);
      offsetMs = 31 * 60_000;
      // alice's last use was at 0: more than 30 minutes ago. bob's was at 20.
      const expired = await admin(idle, '/workspaces');
      expect(expired.status).toBe(401);
      expect(expired.body!.error.code).toBe('session_expired');
      expect((await sessionOf(idle)).status).toBe(401);
      for (let minutes = 40; minutes < 120; minutes += 20) {
        offsetMs = minutes * 60_000;
        expect((await admin(busy, '/workspaces')).status).toBe(200);
      }
      offsetMs = 121 * 60_000;
      const ended = await admin(busy, '/workspaces');
      expect(ended.status).toBe(401);
      expect(ended.body!.error.code).toBe('session_expired');
    } finally {
      offsetMs = 0;
    }
  });

  it('when an owner revokes it: refused on its next request', async () => {
    const browser = await signedIn('bob');
    const { sessionId } = (await sessionOf(browser)).body;
    const listed = await t.client.get({ url: '/admin/v1/sessions' });
    expect(listed.response.status).toBe(200);
    const row = (listed.data as { id: string; person: { email: string } }[]).find((s) => s.id === sessionId);
    expect(row?.person.email).toBe('bob@acme.example');
    const revoked = await t.client.delete({ url: '/admin/v1/sessions/{sessionId}', path: { sessionId } });
    expect(revoked.response.status).toBe(204);
    const refused = await admin(browser, '/workspaces');
    expect(refused.status).toBe(401);
    expect(refused.body!.error.code).toBe('invalid_session');
    const again = await t.client.delete({ url: '/admin/v1/sessions/{sessionId}', path: { sessionId } });
    expect(again.response.status).toBe(404);
  });

  it('when its person signs out, and at the provider too', async () => {
    const browser = await signedIn('alice');
    const { csrfToken } = (await sessionOf(browser)).body;
    const refused = await browser.request(`${t.url}/auth/sign-out`, { method: 'POST' });
    expect(refused.status).toBe(403);

    const out = await browser.request(`${t.url}/auth/sign-out`, { method: 'POST', headers: { 'X-CSRF-Token': csrfToken } });
    expect(out.status).toBe(200);
    const { signedOut, providerSignOutUrl } = JSON.parse(out.body) as { signedOut: boolean; providerSignOutUrl: string };
    expect(signedOut).toBe(true);
    expect(browser.cookies.has(SESSION_COOKIE)).toBe(false);
    const token = browser.setCookies
      .filter((c) => c.startsWith(`${SESSION_COOKIE}=`))
      .at(-2)!
      .split(';')[0]!
      .split('=')[1]!;
    expect((await admin(Object.assign(new Browser(), { cookies: new Map([[SESSION_COOKIE, token]]) }), '/workspaces')).status).toBe(401);

    // The provider's end_session_endpoint, with the ID token as hint and the console to come back to.
    const end = new URL(providerSignOutUrl);
    expect(end.origin).toBe(idp.issuer);
    expect(end.searchParams.get('id_token_hint')).toMatch(/^eyJ/);
    expect(end.searchParams.get('post_logout_redirect_uri')).toBe(`${t.url}/console/`);
    const confirm = await browser.visit(providerSignOutUrl);
    expect(confirm.status).toBe(200);
    const back = await browser.submit(confirm, { logout: 'yes' }, (url) => url.startsWith(t.url));
    expect(back.location).toBe(`${t.url}/console/`);
    // Signed out at the provider: the next sign-in asks for the login again.
    const loginPage = await browser.visit(`${t.url}/auth/sso/${PROVIDER}`, isNexusCallback);
    expect(loginPage.status).toBe(200);
    expect(loginPage.body).toContain('name="login"');
  });
});

describe('no secret leaves Nexus', () => {
  it('logs no cookie, code, token or client secret', async () => {
    const browser = await signedIn('alice');
    const token = browser.cookies.get(SESSION_COOKIE)!;
    const log = t.logs.join('\n');
    expect(log).not.toContain(token);
    expect(log).not.toContain(idp.clientSecret);
    expect(log).not.toMatch(/code=|eyJ/);
  });
});

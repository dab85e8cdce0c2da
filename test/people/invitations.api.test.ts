/**
 * Invitations through HTTP, against a real OpenID provider on 127.0.0.1: an admin invites an email with a role, the
 * person opens the link and signs in with that email, and is a member; an invitation expired, revoked, used, or
 * opened by a person of another email makes no one a member.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/actor.js';
import { startIdp, type Idp } from '../support/oidc-idp.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { Browser, type Page } from './browser-jar.js';

let offsetMs = 0;
const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };
let idp: Idp;
let t: TestApp;
let workspaceId: string;

beforeAll(async () => {
  idp = await startIdp();
  t = await startTestApp({
    clock,
    env: {
      NEXUS_OIDC_ID: 'acme',
      NEXUS_OIDC_NAME: 'Acme',
      NEXUS_OIDC_ISSUER: idp.issuer,
      NEXUS_OIDC_CLIENT_ID: idp.clientId,
      NEXUS_OIDC_CLIENT_SECRET: idp.clientSecret,
    },
  });
  idp.configure(t.url, 'acme');
  for (const login of ['ivy', 'jon', 'kim', 'lee']) idp.people.set(login, { email: `${login}@acme.example`, name: login });
  const made = await t.client.post({ url: '/admin/v1/workspaces', body: { name: 'invitations' } });
  workspaceId = (made.data as { id: string }).id;
});

afterAll(async () => {
  await t?.close();
  await idp?.close();
});

async function invite(email: string, role = 'developer') {
  const res = await t.client.post({ url: '/admin/v1/workspaces/{workspaceId}/invitations', path: { workspaceId }, body: { email, role } });
  expect(res.response.status).toBe(201);
  return res.data as { id: string; url: string; expiresAt: string; email: string; role: string };
}

const isCallback = (url: string) => url.startsWith(`${t.url}/auth/sso/`);

/** Opens the invitation's link, follows its sign-in button to the IdP, signs in as `login`: the callback's answer. */
async function accept(url: string, login: string): Promise<{ browser: Browser; callback: Page }> {
  const browser = new Browser();
  const invitation = await browser.visit(url);
  expect(invitation.status).toBe(200);
  const link = /<a href="([^"]+)">Sign in with Acme<\/a>/.exec(invitation.body)?.[1];
  expect(link).toBeDefined();
  const loginPage = await browser.visit(new URL(link!, url).href, isCallback);
  const back = await browser.submit(loginPage, { login, password: 'any' }, isCallback);
  return { browser, callback: await browser.request(back.location!) };
}

const membersOf = async () =>
  (await t.client.get({ url: '/admin/v1/workspaces/{workspaceId}/members', path: { workspaceId } })).data as {
    email: string;
    role: string;
  }[];

describe('invitations', () => {
  it('accepted: the person who signs in with the invited email is a member with its role', async () => {
    const invitation = await invite('ivy@acme.example');
    expect(invitation.url).toMatch(new RegExp(`^${t.url}/auth/invitation\\?token=nx-invite-[A-Za-z0-9_-]{43}$`));
    const listed = await t.client.get({ url: '/admin/v1/workspaces/{workspaceId}/invitations', path: { workspaceId } });
    const row = (listed.data as Record<string, unknown>[]).find((i) => i.id === invitation.id);
    expect(row).toMatchObject({ email: 'ivy@acme.example', role: 'developer' });
    expect(row).not.toHaveProperty('url');

    const { browser, callback } = await accept(invitation.url, 'ivy');
    expect(callback.status).toBe(303);
    expect(await membersOf()).toEqual(expect.arrayContaining([expect.objectContaining({ email: 'ivy@acme.example', role: 'developer' })]));
    const plans = await browser.request(`${t.url}/admin/v1/workspaces/${workspaceId}/plans`);
    expect(plans.status).toBe(200);
    // Accepted: no longer pending, and not usable again.
    const after = await t.client.get({ url: '/admin/v1/workspaces/{workspaceId}/invitations', path: { workspaceId } });
    expect((after.data as { id: string }[]).some((i) => i.id === invitation.id)).toBe(false);
    const again = await accept(invitation.url, 'ivy');
    expect(again.callback.status).toBe(400);
    expect(again.callback.body).toContain('This invitation is not valid');
  });

  it('expired: refused, and no one is a member', async () => {
    const invitation = await invite('jon@acme.example');
    offsetMs = 8 * 24 * 3600_000;
    try {
      const { callback } = await accept(invitation.url, 'jon');
      expect(callback.status).toBe(400);
      expect(callback.body).toContain('This invitation has expired');
    } finally {
      offsetMs = 0;
    }
    expect((await membersOf()).some((m) => m.email === 'jon@acme.example')).toBe(false);
  });

  it('opened by a person of another email: refused', async () => {
    const invitation = await invite('kim@acme.example');
    const { callback } = await accept(invitation.url, 'lee');
    expect(callback.status).toBe(400);
    expect(callback.body).toContain('for another email');
    expect((await membersOf()).some((m) => m.email === 'lee@acme.example' || m.email === 'kim@acme.example')).toBe(false);
  });

  it('revoked: refused; revoking twice is 404', async () => {
    const invitation = await invite('lee@acme.example', 'viewer');
    const revoked = await t.client.delete({ url: '/admin/v1/invitations/{invitationId}', path: { invitationId: invitation.id } });
    expect(revoked.response.status).toBe(204);
    const twice = await t.client.delete({ url: '/admin/v1/invitations/{invitationId}', path: { invitationId: invitation.id } });
    expect(twice.response.status).toBe(404);
    const { callback } = await accept(invitation.url, 'lee');
    expect(callback.status).toBe(400);
    expect((await membersOf()).some((m) => m.email === 'lee@acme.example')).toBe(false);
  });
});

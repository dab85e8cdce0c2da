/**
 * Memberships given at sign-in by the provider's rules (docs/people.md, "Provisioning at sign-in"), against a real
 * OpenID provider on 127.0.0.1 whose directory puts people in groups (the `groups` claim): a group mapped to a role
 * in a workspace, a group mapped to owner, an email domain mapped to a role; a membership given by hand stays as it
 * is; a person no rule names is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIdp, type Idp } from '../support/oidc-idp.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { Browser } from './browser-jar.js';

let idp: Idp;
let base: TestApp;
let t: TestApp;
let workspaceId: string;

beforeAll(async () => {
  idp = await startIdp();
  base = await startTestApp();
  const made = await base.client.post({ url: '/admin/v1/workspaces', body: { name: 'provisioned' } });
  workspaceId = (made.data as { id: string }).id;
  const roleMappings = [
    { group: 'nexus-support', role: 'support', workspaceId },
    { group: 'nexus-owners', role: 'owner' },
    { emailDomain: 'partner.example', role: 'viewer', workspaceId },
  ];
  t = await base.withEnv({
    NEXUS_OIDC_PROVIDERS: JSON.stringify([
      { id: 'acme', name: 'Acme', issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, roleMappings },
    ]),
  });
  idp.configure(t.url, 'acme');
  idp.people.set('sam', { email: 'sam@acme.example', name: 'Sam Support', groups: ['staff', 'nexus-support'] });
  idp.people.set('olga', { email: 'olga@acme.example', name: 'Olga Owner', groups: ['nexus-owners'] });
  idp.people.set('pat', { email: 'pat@partner.example', name: 'Pat Partner' });
  idp.people.set('ada', { email: 'ada@acme.example', name: 'Ada Admin', groups: ['nexus-support'] });
  idp.people.set('nobody', { email: 'nobody@acme.example', name: 'No Body', groups: ['staff'] });
});

afterAll(async () => {
  await t?.close();
  await base?.close();
  await idp?.close();
});

const isCallback = (url: string) => url.startsWith(`${t.url}/auth/sso/`);

/** Signs in at the IdP as `login`; the callback's answer. */
async function signIn(login: string) {
  const browser = new Browser();
  const loginPage = await browser.visit(`${t.url}/auth/sso/acme`, isCallback);
  const back = await browser.submit(loginPage, { login, password: 'any' }, isCallback);
  const callback = await browser.request(back.location!);
  const csrf =
    callback.status === 303 ? (JSON.parse((await browser.request(`${t.url}/auth/session`)).body) as { csrfToken: string }).csrfToken : '';
  const call = async (method: string, path: string, body?: unknown) => {
    const page = await browser.request(`${t.url}/admin/v1${path}`, {
      method,
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: page.status, body: JSON.parse(page.body || '{}') as Record<string, any> };
  };
  return { callback, call };
}

const plan = { key: 'p', name: 'P', billingInterval: 'MONTH' };

describe('provisioning at sign-in', () => {
  it('a group mapped to a role in a workspace: the person signs in with that role there', async () => {
    const sam = await signIn('sam');
    expect(sam.callback.status).toBe(303);
    expect((await sam.call('GET', `/workspaces/${workspaceId}/plans`)).status).toBe(200);
    const refused = await sam.call('POST', `/workspaces/${workspaceId}/plans`, plan);
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toMatch(/createPlan needs the role .*; yours: support/);
    const members = await t.client.get({ url: '/admin/v1/workspaces/{workspaceId}/members', path: { workspaceId } });
    expect(members.data).toEqual(expect.arrayContaining([expect.objectContaining({ email: 'sam@acme.example', role: 'support' })]));
    const audit = await t.client.get({ url: '/admin/v1/workspaces/{workspaceId}/audit-logs', path: { workspaceId } });
    const entry = (audit.data as { action: string; actorKeyId: string; changes: Record<string, unknown> }[]).find(
      (e) => e.action === 'member.provisioned' && e.changes.email === 'sam@acme.example',
    );
    expect(entry).toMatchObject({ actorKeyId: 'sign-in:acme', changes: { role: 'support' } });
  });

  it('a group mapped to owner: the person may do what the root key may', async () => {
    const olga = await signIn('olga');
    expect(olga.callback.status).toBe(303);
    expect((await olga.call('POST', '/workspaces', { name: "Olga's" })).status).toBe(201);
  });

  it('an email domain mapped to a role', async () => {
    const pat = await signIn('pat');
    expect(pat.callback.status).toBe(303);
    expect((await pat.call('GET', `/workspaces/${workspaceId}`)).status).toBe(200);
    expect((await pat.call('PATCH', `/workspaces/${workspaceId}`, { name: 'renamed' })).body.error.code).toBe('role_forbidden');
  });

  it('keeps a membership given by hand: the rule gives nothing where the person is a member already', async () => {
    const added = await t.client.post({
      url: '/admin/v1/workspaces/{workspaceId}/members',
      path: { workspaceId },
      body: { email: 'ada@acme.example', role: 'admin' },
    });
    expect(added.response.status).toBe(201);
    const ada = await signIn('ada');
    expect((await ada.call('POST', `/workspaces/${workspaceId}/plans`, { ...plan, key: 'ada' })).status).toBe(201);
  });

  it('refuses a person no rule names and no one added', async () => {
    const nobody = await signIn('nobody');
    expect(nobody.callback.status).toBe(403);
    expect(nobody.callback.body).toContain('is not a member of this Nexus');
  });
});

/**
 * Members and roles through HTTP: the table of each operation's roles (src/http/roles.ts) names every Admin
 * operation of the contract, and a sweep calls every one of them with the session of a member of each role: a role
 * the table allows is let through (the answer is the operation's own: a 2xx, or a refusal of the request itself),
 * any other is refused 403 `role_forbidden` naming the roles needed. Then, with real requests: what each role may
 * change, a person with two roles in two workspaces, the owners' operations, the member operations, and a member
 * removed, refused on their next request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadContract } from '../../src/app.js';
import { WORKSPACE_ROLES, type WorkspaceRole } from '../../src/domain/people/member-service.js';
import { neededRoles, OPERATION_ROLES, rolesFor } from '../../src/http/roles.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

interface Operation {
  operationId: string;
  method: string;
  path: string;
}

/** The contract's Admin operations (those called with a Management Key or a session). */
function adminOperations(): Operation[] {
  const contract = loadContract() as { paths: Record<string, Record<string, { operationId?: string; security?: unknown[] }>> };
  const found: Operation[] = [];
  for (const [path, item] of Object.entries(contract.paths)) {
    if (!path.startsWith('/admin/v1/')) continue;
    for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
      const op = item[method];
      if (op?.operationId) found.push({ operationId: op.operationId, method: method.toUpperCase(), path });
    }
  }
  return found;
}

const OPERATIONS = adminOperations();
/** A resource no one has: the call reaches its service, which answers 404. */
const NOBODY = '01a20000-0000-7000-8000-00000000beef';
const QUERIES: Record<string, string> = {
  exportInvocations: '?since=2031-01-01T00:00:00Z&until=2031-02-01T00:00:00Z',
  exportUsageSummary: '?since=2031-01-01T00:00:00Z&until=2031-02-01T00:00:00Z',
};

let t: TestApp;

interface Person {
  cookie: string;
  csrf: string;
}

/** A person's session, as a sign-in with their provider makes it (the flow itself: sign-in.api.test.ts). */
async function sessionOf(email: string, name: string | null = null): Promise<Person> {
  const started = await t.nexus.services.people.sessions.start({
    person: { issuer: 'https://idp.acme.example', subject: email, email, name },
    provider: 'acme',
    isOwner: false,
  });
  const cookie = `__Host-nexus_session=${started.token}`;
  const res = await fetch(`${t.url}/auth/session`, { headers: { Cookie: cookie } });
  return { cookie, csrf: ((await res.json()) as { csrfToken: string }).csrfToken };
}

async function call(person: Person, method: string, path: string, body?: unknown) {
  const res = await t.fetch(`${t.url}${path}`, {
    method,
    headers: {
      Cookie: person.cookie,
      'X-CSRF-Token': person.csrf,
      ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  // A CSV export answers CSV.
  const isJson = res.headers.get('content-type')?.startsWith('application/json') && text;
  const json = isJson ? (JSON.parse(text) as { error?: { code: string; message: string } } & Record<string, unknown>) : {};
  return { status: res.status, error: json.error, body: json };
}

async function root(method: string, path: string, body?: unknown) {
  const res = await fetch(`${t.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${TEST_ROOT_KEY}`, 'Content-Type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (res.status === 204 ? {} : await res.json()) as Record<string, any> };
}

async function workspace(name: string): Promise<string> {
  const made = await root('POST', '/admin/v1/workspaces', { name });
  expect(made.status).toBe(201);
  return made.body.id as string;
}

async function addMember(workspaceId: string, email: string, role: WorkspaceRole): Promise<string> {
  const added = await root('POST', `/admin/v1/workspaces/${workspaceId}/members`, { email, role });
  expect(added.status).toBe(201);
  return added.body.id as string;
}

beforeAll(async () => {
  t = await startTestApp();
  // The installation's owner, made through the API (NEXUS_OWNER_EMAILS is the other way: sign-in.api.test.ts).
  expect((await root('POST', '/admin/v1/owners', { email: 'Owner@acme.example' })).status).toBe(201);
});

afterAll(async () => {
  await t?.close();
});

describe('the table of roles', () => {
  it('names every Admin operation of the contract, and no other', () => {
    expect(Object.keys(OPERATION_ROLES).sort()).toEqual(OPERATIONS.map((op) => op.operationId).sort());
  });
});

/** What a role's call of an operation answered, when it is not what the table says: undefined when it is. */
async function sweepOne(person: Person, workspaceId: string, role: WorkspaceRole, op: Operation): Promise<string | undefined> {
  const path =
    op.path.replace(/\{(\w+)\}/g, (_, name: string) => (name === 'workspaceId' ? workspaceId : NOBODY)) + (QUERIES[op.operationId] ?? '');
  const allowed = rolesFor(op.operationId);
  // Archiving the workspace would end the sweep's own: its role is checked on a workspace that is not there.
  const target = op.operationId === 'archiveWorkspace' && allowed.includes(role) ? path.replace(workspaceId, NOBODY) : path;
  const res = await call(person, op.method, target);
  const answer = `${op.operationId}: ${res.status} ${JSON.stringify(res.error)}`;
  if (allowed.includes(role)) {
    const letThrough = res.status !== 401 && res.error?.code !== 'role_forbidden' && res.status < 500;
    return letThrough ? undefined : `allowed, but ${answer}`;
  }
  const refused =
    res.status === 403 &&
    res.error?.code === 'role_forbidden' &&
    res.error.message.includes(`${op.operationId} needs the role ${neededRoles(allowed)}`);
  return refused ? undefined : `not allowed, but ${answer}`;
}

/** `run` over every item, at most eight at once (the database's connections are shared with the app's own work). */
async function inTurns<T, R>(items: readonly T[], run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const at = next++;
      results[at] = await run(items[at]!);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return results;
}

describe('the sweep: every operation with the session of each role', () => {
  // One role's operations eight at a time (each reaches its own resource, or none): the table is checked for all of them.
  it.each(WORKSPACE_ROLES)(
    '%s',
    async (role) => {
      const workspaceId = await workspace(`sweep ${role}`);
      const email = `${role}@acme.example`;
      await addMember(workspaceId, email, role);
      const person = await sessionOf(email);
      const wrong = await inTurns(OPERATIONS, (op) => sweepOne(person, workspaceId, role, op));
      expect(wrong.filter(Boolean)).toEqual([]);
    },
    120_000,
  );
});

describe('what each role may change, with real requests', () => {
  it('a developer creates a plan, a billing member sets the budget, an admin adds a member; the others are refused', async () => {
    const workspaceId = await workspace('roles at work');
    const people: Record<WorkspaceRole, Person> = {} as never;
    for (const role of WORKSPACE_ROLES) {
      await addMember(workspaceId, `${role}.work@acme.example`, role);
      people[role] = await sessionOf(`${role}.work@acme.example`);
    }
    const plan = (key: string) => ({ key, name: key, billingInterval: 'MONTH' });
    expect((await call(people.developer, 'POST', `/admin/v1/workspaces/${workspaceId}/plans`, plan('dev'))).status).toBe(201);
    expect((await call(people.billing, 'POST', `/admin/v1/workspaces/${workspaceId}/plans`, plan('bill'))).error?.code).toBe(
      'role_forbidden',
    );
    const budget = { period: 'DAY', hardLimitMicros: '1000000' };
    expect((await call(people.billing, 'PUT', `/admin/v1/workspaces/${workspaceId}/budget`, budget)).status).toBe(200);
    expect((await call(people.developer, 'PUT', `/admin/v1/workspaces/${workspaceId}/budget`, budget)).error?.code).toBe('role_forbidden');
    const member = { email: 'new@acme.example', role: 'viewer' };
    expect((await call(people.developer, 'POST', `/admin/v1/workspaces/${workspaceId}/members`, member)).error?.code).toBe(
      'role_forbidden',
    );
    const added = await call(people.admin, 'POST', `/admin/v1/workspaces/${workspaceId}/members`, member);
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ email: 'new@acme.example', role: 'viewer', workspaceId });
    for (const role of WORKSPACE_ROLES) {
      expect((await call(people[role], 'GET', `/admin/v1/workspaces/${workspaceId}/plans`)).status, role).toBe(200);
    }
    const list = await call(people.viewer, 'GET', `/admin/v1/workspaces/${workspaceId}/members`);
    expect((list.body as unknown as { email: string }[]).map((m) => m.email)).toContain('new@acme.example');
  });

  it('a person with two roles in two workspaces: each workspace checks its own', async () => {
    const mine = await workspace('where I am admin');
    const theirs = await workspace('where I am a viewer');
    await addMember(mine, 'two.hats@acme.example', 'admin');
    await addMember(theirs, 'two.hats@acme.example', 'viewer');
    const person = await sessionOf('two.hats@acme.example');
    const plan = { key: 'p', name: 'P', billingInterval: 'MONTH' };
    expect((await call(person, 'POST', `/admin/v1/workspaces/${mine}/plans`, plan)).status).toBe(201);
    const refused = await call(person, 'POST', `/admin/v1/workspaces/${theirs}/plans`, plan);
    expect(refused.status).toBe(403);
    expect(refused.error).toMatchObject({ code: 'role_forbidden' });
    expect(refused.error?.message).toContain('yours in this workspace: viewer');
    // A workspace they are no member of is not there, for them.
    const other = await workspace('not mine');
    expect((await call(person, 'GET', `/admin/v1/workspaces/${other}`)).error?.code).toBe('workspace_not_found');
    const listed = await call(person, 'GET', '/admin/v1/workspaces?limit=100');
    expect((listed.body as unknown as { id: string }[]).map((w) => w.id).sort()).toEqual([mine, theirs].sort());
  });

  it("the owners' operations: an owner's session makes a workspace and lists sessions, a member's is refused naming the owner", async () => {
    const owner = await sessionOf('owner@acme.example');
    expect((await call(owner, 'POST', '/admin/v1/workspaces', { name: 'by the owner' })).status).toBe(201);
    expect((await call(owner, 'GET', '/admin/v1/sessions')).status).toBe(200);
    const workspaceId = await workspace('an admin here');
    await addMember(workspaceId, 'just.admin@acme.example', 'admin');
    const admin = await sessionOf('just.admin@acme.example');
    const refused = await call(admin, 'POST', '/admin/v1/workspaces', { name: 'not allowed' });
    expect(refused.status).toBe(403);
    expect(refused.error?.message).toContain('createWorkspace needs the role owner');
  });
});

describe('member operations', () => {
  it('refuses a second membership, a bad role, an unknown member; lists newest first', async () => {
    const workspaceId = await workspace('members');
    await addMember(workspaceId, 'First@Acme.example', 'viewer');
    await addMember(workspaceId, 'second@acme.example', 'support');
    const twice = await root('POST', `/admin/v1/workspaces/${workspaceId}/members`, { email: 'first@acme.example', role: 'admin' });
    expect(twice.status).toBe(409);
    expect(twice.body.error.code).toBe('conflict');
    const badRole = await root('POST', `/admin/v1/workspaces/${workspaceId}/members`, { email: 'x@acme.example', role: 'owner' });
    expect(badRole.status).toBe(400);
    const badEmail = await root('POST', `/admin/v1/workspaces/${workspaceId}/members`, { email: 'not an email', role: 'viewer' });
    expect(badEmail.status).toBe(400);
    const listed = await t.client.get({ url: '/admin/v1/workspaces/{workspaceId}/members', path: { workspaceId } });
    expect((listed.data as { email: string }[]).map((m) => m.email)).toEqual(['second@acme.example', 'first@acme.example']);
    expect((await root('DELETE', `/admin/v1/members/${NOBODY}`)).status).toBe(404);
    expect((await root('POST', `/admin/v1/workspaces/${NOBODY}/members`, { email: 'x@acme.example', role: 'viewer' })).status).toBe(404);
  });

  it('a member removed is refused on their next request', async () => {
    const workspaceId = await workspace('leaving');
    const memberId = await addMember(workspaceId, 'leaver@acme.example', 'developer');
    const person = await sessionOf('leaver@acme.example');
    expect((await call(person, 'GET', `/admin/v1/workspaces/${workspaceId}/plans`)).status).toBe(200);
    const removed = await t.client.delete({ url: '/admin/v1/members/{memberId}', path: { memberId } });
    expect(removed.response.status).toBe(204);
    const after = await call(person, 'GET', `/admin/v1/workspaces/${workspaceId}/plans`);
    expect(after.status).toBe(403);
    expect(after.error?.code).toBe('not_a_member');
    expect((await root('DELETE', `/admin/v1/members/${memberId}`)).status).toBe(404);
    const audit = await t.client.get({ url: '/admin/v1/workspaces/{workspaceId}/audit-logs', path: { workspaceId } });
    expect((audit.data as { action: string }[]).map((e) => e.action).slice(0, 2)).toEqual(['member.removed', 'member.added']);
  });
});

describe('the audit names the person', () => {
  it("records a session's person and role; the list names them, and filters by their email", async () => {
    const workspaceId = await workspace('whodunit');
    await addMember(workspaceId, 'ada@acme.example', 'developer');
    await addMember(workspaceId, 'bob@acme.example', 'billing');
    const ada = await sessionOf('ada@acme.example', 'Ada Lovelace');
    const bob = await sessionOf('bob@acme.example');
    const owner = await sessionOf('owner@acme.example', 'Olive Owner');
    expect(
      (await call(ada, 'POST', `/admin/v1/workspaces/${workspaceId}/plans`, { key: 'a', name: 'A', billingInterval: 'MONTH' })).status,
    ).toBe(201);
    expect((await call(bob, 'PUT', `/admin/v1/workspaces/${workspaceId}/budget`, { period: 'DAY', hardLimitMicros: '5' })).status).toBe(
      200,
    );
    expect((await call(owner, 'PATCH', `/admin/v1/workspaces/${workspaceId}`, { name: 'renamed' })).status).toBe(200);

    const all = await root('GET', `/admin/v1/workspaces/${workspaceId}/audit-logs`);
    const who = (all.body as unknown as Record<string, unknown>[]).map((e) => [e.action, e.actorName, e.actorEmail, e.actorRole]);
    expect(who.slice(0, 3)).toEqual([
      ['workspace.updated', 'Olive Owner', 'owner@acme.example', 'owner'],
      ['workspace.budget_set', 'bob@acme.example', 'bob@acme.example', 'billing'],
      ['plan.created', 'Ada Lovelace', 'ada@acme.example', 'developer'],
    ]);
    // What the root key did: no person, no role.
    expect(who.filter(([action]) => action === 'member.added')).toEqual([
      ['member.added', null, null, null],
      ['member.added', null, null, null],
    ]);
    const adas = (all.body as unknown as { actorKeyId: string; actorEmail: string; actorSubject: string }[]).find(
      (e) => e.actorEmail === 'ada@acme.example',
    )!;
    expect(adas.actorKeyId).toMatch(/^session:[0-9a-f-]{36}$/);
    expect(adas).toMatchObject({ actorSubject: 'ada@acme.example' });

    // A viewer reads the log too, filtered by a person (the email in any case).
    await addMember(workspaceId, 'vic@acme.example', 'viewer');
    const vic = await sessionOf('vic@acme.example');
    const hers = await call(vic, 'GET', `/admin/v1/workspaces/${workspaceId}/audit-logs?actorEmail=ADA@acme.example`);
    expect((hers.body as unknown as { action: string }[]).map((e) => e.action)).toEqual(['plan.created']);
    const bySession = await root('GET', `/admin/v1/workspaces/${workspaceId}/audit-logs?actorKeyId=${adas.actorKeyId}`);
    expect((bySession.body as unknown as { actorEmail: string }[]).map((e) => e.actorEmail)).toEqual(['ada@acme.example']);
  });
});

describe('owners through the API', () => {
  it('an owner adds and removes owners, the last one stays, members may not; each change audited', async () => {
    const owner = await sessionOf('owner@acme.example');
    const added = await call(owner, 'POST', '/admin/v1/owners', { email: 'carol@acme.example' });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ email: 'carol@acme.example', configured: false, id: expect.any(String) });
    expect((await call(owner, 'POST', '/admin/v1/owners', { email: 'CAROL@acme.example' })).error?.code).toBe('conflict');
    const listed = await call(owner, 'GET', '/admin/v1/owners');
    expect((listed.body as unknown as { email: string }[]).map((o) => o.email)).toEqual(['owner@acme.example', 'carol@acme.example']);

    // Carol is an owner on her next request: every workspace, every operation.
    const carol = await sessionOf('carol@acme.example');
    expect((await call(carol, 'POST', '/admin/v1/workspaces', { name: "carol's" })).status).toBe(201);
    // A member, even an admin, may not make or remove owners.
    const workspaceId = await workspace('owners');
    await addMember(workspaceId, 'admin.owners@acme.example', 'admin');
    const admin = await sessionOf('admin.owners@acme.example');
    const refused = await call(admin, 'POST', '/admin/v1/owners', { email: 'admin.owners@acme.example' });
    expect(refused.error?.message).toContain('addOwner needs the role owner');

    // Carol removes the first owner; she is the last, and stays.
    const first = (listed.body as unknown as { id: string; email: string }[]).find((o) => o.email === 'owner@acme.example')!;
    expect((await call(carol, 'DELETE', `/admin/v1/owners/${first.id}`)).status).toBe(204);
    expect((await call(owner, 'GET', '/admin/v1/owners')).error?.code).toBe('not_a_member');
    const last = await call(carol, 'DELETE', `/admin/v1/owners/${added.body.id as string}`);
    expect(last.status).toBe(409);
    expect(last.error?.code).toBe('last_owner');
    expect((await call(carol, 'DELETE', `/admin/v1/owners/${NOBODY}`)).error?.code).toBe('member_not_found');
    // A workspace's member is no owner to remove.
    const memberId = ((await root('GET', `/admin/v1/workspaces/${workspaceId}/members`)).body as unknown as { id: string }[])[0]!.id;
    expect((await call(carol, 'DELETE', `/admin/v1/owners/${memberId}`)).error?.code).toBe('member_not_found');

    const changes = await t.database.db('audit_logs').whereIn('action', ['owner.added', 'owner.removed']).orderBy('id');
    expect(changes.map((e) => [e.action, e.changes.email, e.actor_email])).toEqual([
      ['owner.added', 'owner@acme.example', null],
      ['owner.added', 'carol@acme.example', 'owner@acme.example'],
      ['owner.removed', 'owner@acme.example', 'carol@acme.example'],
    ]);
    // The first owner back, for the tests after.
    expect((await root('POST', '/admin/v1/owners', { email: 'owner@acme.example' })).status).toBe(201);
  });
});

describe('getCaller', () => {
  it('tells each caller what the role table lets it call: an owner everything, a member or a key by its role in each workspace', async () => {
    const workspaceId = await workspace('caller');
    await addMember(workspaceId, 'viv@acme.example', 'viewer');
    const viewer = await call(await sessionOf('viv@acme.example'), 'GET', '/admin/v1/caller');
    expect(viewer.body).toMatchObject({ email: 'viv@acme.example', owner: false, workspaces: [{ workspaceId, role: 'viewer' }] });
    const operations = (viewer.body.workspaces as { operations: string[] }[])[0]!.operations;
    expect(operations).toEqual(expect.arrayContaining(['listPlans', 'getCaller', 'listAuditLogs']));
    expect(operations).not.toContain('createPlan');
    expect(operations).toEqual(Object.keys(OPERATION_ROLES).filter((op) => rolesFor(op).includes('viewer')));

    expect((await root('GET', '/admin/v1/caller')).body).toEqual({ credential: 'root', email: null, owner: true, workspaces: [] });
    const billingKey = await root('POST', '/admin/v1/management-keys', { name: 'bills', workspaceIds: [workspaceId], role: 'billing' });
    const scopedKey = await root('POST', '/admin/v1/management-keys', { name: 'ops', workspaceIds: [workspaceId] });
    const asKey = async (key: string) =>
      (
        (await (await fetch(`${t.url}/admin/v1/caller`, { headers: { Authorization: `Bearer ${key}` } })).json()) as {
          workspaces: { role: string | null; operations: string[] }[];
        }
      ).workspaces[0]!;
    const billing = await asKey(billingKey.body.key as string);
    expect(billing.role).toBe('billing');
    expect(billing.operations).toContain('setWorkspaceBudget');
    expect(billing.operations).not.toContain('createPlan');
    // A key without a role: its scope alone, every operation but the owners'.
    const scoped = await asKey(scopedKey.body.key as string);
    expect(scoped.role).toBeNull();
    expect(scoped.operations).toEqual(expect.arrayContaining(['createPlan', 'addMember', 'setWorkspaceBudget']));
    expect(scoped.operations).not.toContain('createWorkspace');
  });
});

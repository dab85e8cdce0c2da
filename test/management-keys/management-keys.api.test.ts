/**
 * Management Keys through the Admin API: a root key lists, creates (the plaintext once), renames and revokes
 * them; a scoped key is refused every one of these; the audit names each entry's key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreatedManagementKeyDto, ManagementKeyDto } from '../../generated/client/types.gen.js';
import {
  createManagementKey,
  createWorkspace,
  getWorkspace,
  listAuditLogs,
  listManagementKeys,
  revokeManagementKey,
  updateManagementKey,
  updateWorkspace,
} from '../support/sdk.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

async function workspace(name: string): Promise<string> {
  const ws = await createWorkspace({ client: t.client, body: { name } });
  expect(ws.response.status).toBe(201);
  return ws.data!.id;
}

async function scopedKey(name: string, workspaceIds: string[]): Promise<CreatedManagementKeyDto> {
  const res = await createManagementKey({ client: t.client, body: { name, workspaceIds } });
  expect(res.response.status).toBe(201);
  return res.data!;
}

/** Every key the root key lists, page after page. */
async function listAll(): Promise<ManagementKeyDto[]> {
  const all: ManagementKeyDto[] = [];
  let cursor: string | undefined;
  do {
    const res = await listManagementKeys({ client: t.client, query: { limit: 100, ...(cursor ? { cursor } : {}) } });
    expect(res.response.status).toBe(200);
    all.push(...res.data!);
    cursor = res.response.headers.get('x-next-cursor') ?? undefined;
  } while (cursor);
  return all;
}

async function rawRequest(method: string, path: string, body?: string, token = TEST_ROOT_KEY) {
  const res = await fetch(`${t.url}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  return { status: res.status, text, body: text ? (JSON.parse(text) as { error?: { code: string; param?: string | null } }) : {} };
}

describe('createManagementKey', () => {
  it('creates a scoped key that sees its workspaces only, and shows its plaintext in this answer alone', async () => {
    const mine = await workspace('mk-mine');
    const theirs = await workspace('mk-theirs');
    const created = await scopedKey('billing backend', [mine]);
    expect(created).toMatchObject({ name: 'billing backend', root: false, workspaceIds: [mine], createdAt: expect.any(String) });
    expect(created.key).toMatch(/^nx-mgmt-/);
    expect(created.key.startsWith(created.prefix)).toBe(true);
    expect(created.revokedAt).toBeUndefined();

    const scoped = t.clientWith(created.key);
    expect((await getWorkspace({ client: scoped, path: { workspaceId: mine } })).response.status).toBe(200);
    expect((await getWorkspace({ client: scoped, path: { workspaceId: theirs } })).response.status).toBe(404);

    // Only the hash is stored.
    const row = await t.database.db('management_keys').where({ id: created.id }).first();
    expect(JSON.stringify(row)).not.toContain(created.key);
  });

  it('creates a root key that sees every workspace and manages keys', async () => {
    const res = await createManagementKey({ client: t.client, body: { name: 'second root', root: true } });
    expect(res.response.status).toBe(201);
    expect(res.data).toMatchObject({ root: true, workspaceIds: [] });
    const root = t.clientWith(res.data!.key);
    expect((await createWorkspace({ client: root, body: { name: 'by the second root' } })).response.status).toBe(201);
    expect((await listManagementKeys({ client: root })).response.status).toBe(200);
  });

  it('replays the first answer for the same Idempotency-Key, and makes one key', async () => {
    const ws = await workspace('mk-idem');
    const headers = { 'Idempotency-Key': crypto.randomUUID() };
    const first = await createManagementKey({ client: t.client, body: { name: 'once', workspaceIds: [ws] }, headers });
    const again = await createManagementKey({ client: t.client, body: { name: 'once', workspaceIds: [ws] }, headers });
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(again.data!.id).toBe(first.data!.id);
    expect((await listAll()).filter((k) => k.name === 'once')).toHaveLength(1);
  });

  describe.each([
    ['an empty name', { name: '', workspaceIds: ['W'] }, 'invalid_parameter', 'name'],
    ['a blank name', { name: '  ', workspaceIds: ['W'] }, 'invalid_parameter', 'name'],
    ['no name', { workspaceIds: ['W'] }, 'invalid_parameter', 'name'],
    ['no workspace and not root', { name: 'a' }, 'invalid_parameter', 'workspaceIds'],
    ['an empty workspace list', { name: 'a', workspaceIds: [] }, 'invalid_parameter', 'workspaceIds'],
    ['root with workspaces', { name: 'a', root: true, workspaceIds: ['W'] }, 'invalid_parameter', 'workspaceIds'],
    ['a workspace id that is no UUID', { name: 'a', workspaceIds: ['nope'] }, 'invalid_parameter', 'workspaceIds.0'],
    ['an unknown field', { name: 'a', workspaceIds: ['W'], isRoot: true }, 'invalid_parameter', 'isRoot'],
  ])('refuses %s with 400', (_label, body, code, param) => {
    it('and creates no key', async () => {
      const ws = await workspace('mk-bad');
      const before = (await listAll()).length;
      const text = JSON.stringify(body).replaceAll('"W"', JSON.stringify(ws));
      const res = await rawRequest('POST', '/management-keys', text);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code, param });
      expect((await listAll()).length).toBe(before);
    });
  });

  it('refuses an unknown workspace (404) and an archived one (409)', async () => {
    const unknown = await createManagementKey({
      client: t.client,
      body: { name: 'a', workspaceIds: ['01a20000-0000-7000-8000-000000000000'] },
    });
    expect(unknown.response.status).toBe(404);
    expect((unknown.error as any).error.code).toBe('workspace_not_found');
    const ws = await workspace('mk-archived');
    await t.fetch(`${t.url}/admin/v1/workspaces/${ws}`, { method: 'DELETE', headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
    const archived = await createManagementKey({ client: t.client, body: { name: 'a', workspaceIds: [ws] } });
    expect(archived.response.status).toBe(409);
    expect((archived.error as any).error.code).toBe('workspace_archived');
  });
});

describe('listManagementKeys', () => {
  it('lists every stored key newest first, revoked ones with revokedAt, and never a plaintext or a hash', async () => {
    const ws = await workspace('mk-list');
    const a = await scopedKey('list-a', [ws]);
    const b = await scopedKey('list-b', [ws]);
    expect((await revokeManagementKey({ client: t.client, path: { managementKeyId: a.id } })).response.status).toBe(204);
    const all = await listAll();
    const ids = all.map((k) => k.id);
    expect(ids.indexOf(b.id)).toBeLessThan(ids.indexOf(a.id));
    expect(all.find((k) => k.id === a.id)).toMatchObject({ name: 'list-a', revokedAt: expect.any(String), workspaceIds: [ws] });
    expect(all.find((k) => k.id === b.id)!.revokedAt).toBeUndefined();
    const text = JSON.stringify(all);
    expect(text).not.toContain(a.key);
    expect(text).not.toContain(b.key);
    expect(text).not.toMatch(/key_hash|"key"/);
  });

  it('pages with limit and cursor, without gap or duplicate', async () => {
    const ws = await workspace('mk-pages');
    for (const n of [1, 2, 3]) await scopedKey(`page-${n}`, [ws]);
    const all = await listAll();
    const paged: string[] = [];
    let cursor: string | undefined;
    do {
      const res = await listManagementKeys({ client: t.client, query: { limit: 2, ...(cursor ? { cursor } : {}) } });
      paged.push(...res.data!.map((k) => k.id));
      cursor = res.response.headers.get('x-next-cursor') ?? undefined;
    } while (cursor);
    expect(paged).toEqual(all.map((k) => k.id));
  });
});

describe('updateManagementKey', () => {
  it("renames a key: the audit names it so in every entry it made, and logs the rename in the key's workspaces", async () => {
    const ws = await workspace('mk-rename');
    const created = await scopedKey('old name', [ws]);
    const scoped = t.clientWith(created.key);
    expect((await updateWorkspace({ client: scoped, path: { workspaceId: ws }, body: { metadata: { by: 'key' } } })).response.status).toBe(
      200,
    );
    const renamed = await updateManagementKey({ client: t.client, path: { managementKeyId: created.id }, body: { name: 'new name' } });
    expect(renamed.response.status).toBe(200);
    expect(renamed.data).toMatchObject({ id: created.id, name: 'new name', workspaceIds: [ws] });
    expect(JSON.stringify(renamed.data)).not.toContain(created.key);

    const entries = (await listAuditLogs({ client: t.client, path: { workspaceId: ws } })).data!;
    expect(entries.map((e) => [e.action, e.actorKeyId, e.actorName])).toEqual([
      ['management_key.renamed', 'root', null],
      ['workspace.updated', created.id, 'new name'],
      ['management_key.created', 'root', null],
      ['workspace.created', 'root', null],
    ]);
    expect(entries[0]).toMatchObject({ resourceType: 'management_key', resourceId: created.id, changes: { name: 'new name' } });
  });

  it('renames a revoked key (its entries stay named), and answers 404 for an unknown one', async () => {
    const ws = await workspace('mk-rename-revoked');
    const created = await scopedKey('gone', [ws]);
    await revokeManagementKey({ client: t.client, path: { managementKeyId: created.id } });
    const renamed = await updateManagementKey({ client: t.client, path: { managementKeyId: created.id }, body: { name: 'gone (ci)' } });
    expect(renamed.data).toMatchObject({ name: 'gone (ci)', revokedAt: expect.any(String) });
    const unknown = await updateManagementKey({
      client: t.client,
      path: { managementKeyId: '01a20000-0000-7000-8000-000000000000' },
      body: { name: 'x' },
    });
    expect(unknown.response.status).toBe(404);
    expect((unknown.error as any).error.code).toBe('management_key_not_found');
    const blank = await rawRequest('PATCH', `/management-keys/${created.id}`, '{"name":" "}');
    expect(blank).toMatchObject({ status: 400, body: { error: { code: 'invalid_parameter', param: 'name' } } });
  });
});

describe('revokeManagementKey', () => {
  it('refuses the key from its next request, logs it once, and a second revoke changes nothing', async () => {
    const ws = await workspace('mk-revoke');
    const created = await scopedKey('to revoke', [ws]);
    const scoped = t.clientWith(created.key);
    expect((await getWorkspace({ client: scoped, path: { workspaceId: ws } })).response.status).toBe(200);
    expect((await revokeManagementKey({ client: t.client, path: { managementKeyId: created.id } })).response.status).toBe(204);
    const refused = await getWorkspace({ client: scoped, path: { workspaceId: ws } });
    expect(refused.response.status).toBe(401);
    expect((refused.error as any).error.code).toBe('invalid_management_key');
    expect((await revokeManagementKey({ client: t.client, path: { managementKeyId: created.id } })).response.status).toBe(204);
    const entries = (await listAuditLogs({ client: t.client, path: { workspaceId: ws }, query: { action: 'management_key.revoked' } }))
      .data!;
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ resourceId: created.id, actorKeyId: 'root' });
  });

  it('answers 404 for an unknown key', async () => {
    const res = await revokeManagementKey({ client: t.client, path: { managementKeyId: '01a20000-0000-7000-8000-000000000000' } });
    expect(res.response.status).toBe(404);
    expect((res.error as any).error.code).toBe('management_key_not_found');
  });

  it('keeps the last stored root key while no NEXUS_MANAGEMENT_KEY is set (409 last_root_key)', async () => {
    const first = await createManagementKey({ client: t.client, body: { name: 'root one', root: true } });
    // Another Nexus on the same database, without the environment's root key: the stored root keys are all there is.
    const bare = await t.withEnv({ NEXUS_MANAGEMENT_KEY: undefined as unknown as string });
    try {
      const one = bare.clientWith(first.data!.key);
      const stored = (await listManagementKeys({ client: one, query: { limit: 100 } })).data!.filter((k) => k.root && !k.revokedAt);
      // Revoke every stored root key but the first (other tests made some), then the first is the last.
      for (const k of stored.filter((k) => k.id !== first.data!.id)) {
        expect((await revokeManagementKey({ client: one, path: { managementKeyId: k.id } })).response.status).toBe(204);
      }
      const last = await revokeManagementKey({ client: one, path: { managementKeyId: first.data!.id } });
      expect(last.response.status).toBe(409);
      expect((last.error as any).error.code).toBe('last_root_key');
      const second = await createManagementKey({ client: one, body: { name: 'root two', root: true } });
      expect((await revokeManagementKey({ client: one, path: { managementKeyId: first.data!.id } })).response.status).toBe(204);
      expect((await listManagementKeys({ client: one })).response.status).toBe(401);
      expect((await listManagementKeys({ client: bare.clientWith(second.data!.key) })).response.status).toBe(200);
    } finally {
      await bare.close();
    }
  });
});

describe('a scoped key manages no key', () => {
  it('is refused 403 root_key_required on every operation, even on a key of its own workspace, and changes nothing', async () => {
    const ws = await workspace('mk-scoped');
    const own = await scopedKey('own', [ws]);
    const other = await scopedKey('other', [ws]);
    const scoped = t.clientWith(own.key);
    const answers = [
      await listManagementKeys({ client: scoped }),
      await createManagementKey({ client: scoped, body: { name: 'escalate', root: true } }),
      await createManagementKey({ client: scoped, body: { name: 'sideways', workspaceIds: [ws] } }),
      await updateManagementKey({ client: scoped, path: { managementKeyId: other.id }, body: { name: 'hijacked' } }),
      await revokeManagementKey({ client: scoped, path: { managementKeyId: other.id } }),
      await revokeManagementKey({ client: scoped, path: { managementKeyId: own.id } }),
    ];
    for (const res of answers) {
      expect(res.response.status).toBe(403);
      expect((res.error as any).error.code).toBe('root_key_required');
      expect(JSON.stringify(res.error)).not.toMatch(/nx-mgmt-/);
    }
    const all = await listAll();
    expect(all.find((k) => k.id === other.id)).toMatchObject({ name: 'other' });
    expect(all.find((k) => k.id === other.id)!.revokedAt).toBeUndefined();
    expect(all.filter((k) => k.name === 'escalate' || k.name === 'sideways')).toEqual([]);
  });
});

describe('a key with a role', () => {
  it('is held to the role table as a person is: a viewer key reads and is refused every change, a billing key sets the budget', async () => {
    const workspaceId = await workspace('mk-roles');
    const viewer = await createManagementKey({
      client: t.client,
      body: { name: 'dashboards', workspaceIds: [workspaceId], role: 'viewer' },
    });
    expect(viewer.response.status).toBe(201);
    expect(viewer.data).toMatchObject({ role: 'viewer', root: false, workspaceIds: [workspaceId] });
    const billing = await scopedKeyWithRole('invoicing', [workspaceId], 'billing');
    const plan = JSON.stringify({ key: 'p', name: 'P', billingInterval: 'MONTH' });

    expect((await rawRequest('GET', `/workspaces/${workspaceId}/plans`, undefined, viewer.data!.key)).status).toBe(200);
    const refused = await rawRequest('POST', `/workspaces/${workspaceId}/plans`, plan, viewer.data!.key);
    expect(refused.status).toBe(403);
    expect(refused.body.error?.code).toBe('role_forbidden');
    expect(refused.text).toContain('createPlan needs the role one of: owner, admin, developer; yours: viewer');
    expect((await rawRequest('POST', '/workspaces', JSON.stringify({ name: 'x' }), viewer.data!.key)).body.error?.code).toBe(
      'role_forbidden',
    );
    expect((await rawRequest('GET', '/management-keys', undefined, viewer.data!.key)).body.error?.code).toBe('role_forbidden');

    const budget = JSON.stringify({ period: 'DAY', hardLimitMicros: '7' });
    expect((await rawRequest('PUT', `/workspaces/${workspaceId}/budget`, budget, billing.key)).status).toBe(200);
    expect((await rawRequest('POST', `/workspaces/${workspaceId}/plans`, plan, billing.key)).body.error?.code).toBe('role_forbidden');
    // Another workspace is not there, for either.
    const other = await workspace('mk-roles-other');
    expect((await rawRequest('GET', `/workspaces/${other}/plans`, undefined, viewer.data!.key)).body.error?.code).toBe(
      'workspace_not_found',
    );

    // The audit names the key and the role it acted with; nothing of the refused changes.
    const audit = await listAuditLogs({ client: t.client, path: { workspaceId } });
    expect(audit.data!.map((e) => [e.action, e.actorName, e.actorRole]).slice(0, 1)).toEqual([
      ['workspace.budget_set', 'invoicing', 'billing'],
    ]);
    expect(audit.data!.some((e) => e.action === 'plan.created')).toBe(false);
    expect((await listAll()).find((k) => k.id === billing.id)).toMatchObject({ role: 'billing' });
  });

  it('owner makes a root key; a role that does not fit its scope is refused 400 and makes no key', async () => {
    const owner = await createManagementKey({ client: t.client, body: { name: 'platform', role: 'owner' } });
    expect(owner.response.status).toBe(201);
    expect(owner.data).toMatchObject({ role: 'owner', root: true, workspaceIds: [] });
    expect((await rawRequest('POST', '/workspaces', JSON.stringify({ name: 'by an owner key' }), owner.data!.key)).status).toBe(201);
    expect((await rawRequest('GET', '/management-keys', undefined, owner.data!.key)).status).toBe(200);

    const workspaceId = await workspace('mk-roles-bad');
    const before = (await listAll()).length;
    const bad = [
      { name: 'a', root: true, role: 'viewer' },
      { name: 'b', role: 'owner', workspaceIds: [workspaceId] },
      { name: 'c', role: 'admin' },
      { name: 'd', role: 'boss', workspaceIds: [workspaceId] },
    ];
    for (const body of bad) expect((await rawRequest('POST', '/management-keys', JSON.stringify(body))).status, body.name).toBe(400);
    expect((await listAll()).length).toBe(before);
  });
});

async function scopedKeyWithRole(name: string, workspaceIds: string[], role: 'admin' | 'developer' | 'billing' | 'support' | 'viewer') {
  const res = await createManagementKey({ client: t.client, body: { name, workspaceIds, role } });
  expect(res.response.status).toBe(201);
  return res.data!;
}

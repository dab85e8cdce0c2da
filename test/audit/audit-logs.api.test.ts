import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  archiveProviderConnection,
  archiveWorkspace,
  createProviderConnection,
  createWorkspace,
  listAuditLogs,
  rotateProviderSecret,
  updateProviderConnection,
  updateWorkspace,
} from '../support/sdk.js';
import type { AuditLogDto } from '../../generated/client/types.gen.js';
import { systemActor, type Clock } from '../../src/domain/actor.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { SECRET_MARKER, startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';

let t: TestApp;
let upstream: FakeUpstream;
let now = new Date('2026-11-22T10:00:00.000Z');
const clock: Clock = { now: () => new Date(now) };
const at = (iso: string) => {
  now = new Date(iso);
};

/** Every successful mutating request of this file. */
const mutations: { requestId: string; action: string; resourceId: string }[] = [];
function track(res: { response: Response }, action: string, resourceId: string): void {
  mutations.push({ requestId: res.response.headers.get('x-request-id')!, action, resourceId });
}

beforeAll(async () => {
  t = await startTestApp({ clock });
  upstream = await startFakeUpstream('openai', []);
});
afterAll(async () => {
  await upstream?.close();
  await t?.close();
});

/** A workspace with a known history: created 10:00, renamed 10:05, a connection 10:10, rotated 10:15, archived 10:20. */
async function workspaceWithHistory() {
  at('2026-11-22T10:00:00.000Z');
  const ws = await createWorkspace({ client: t.client, body: { name: 'audited' } });
  track(ws, 'workspace.created', ws.data!.id);
  const workspaceId = ws.data!.id;
  at('2026-11-22T10:05:00.000Z');
  const renamed = await updateWorkspace({ client: t.client, path: { workspaceId }, body: { name: 'audited-2' } });
  track(renamed, 'workspace.updated', workspaceId);
  at('2026-11-22T10:10:00.000Z');
  const conn = await createProviderConnection({
    client: t.client,
    path: { workspaceId },
    body: { name: 'c', protocolProfile: 'openai', baseUrl: upstream.url, apiKey: testProviderKey('audit') },
  });
  track(conn, 'provider_connection.created', conn.data!.id);
  const connectionId = conn.data!.id;
  at('2026-11-22T10:15:00.000Z');
  const rotated = await rotateProviderSecret({
    client: t.client,
    path: { providerConnectionId: connectionId },
    body: { apiKey: testProviderKey('audit2') },
  });
  track(rotated, 'provider_connection.secret_rotated', connectionId);
  at('2026-11-22T10:20:00.000Z');
  const archived = await archiveProviderConnection({ client: t.client, path: { providerConnectionId: connectionId } });
  track(archived, 'provider_connection.archived', connectionId);
  return {
    workspaceId,
    connectionId,
    requestIds: [ws, renamed, conn, rotated, archived].map((r) => r.response.headers.get('x-request-id')!),
  };
}

async function list(workspaceId: string, query: Record<string, string | number> = {}): Promise<AuditLogDto[]> {
  const res = await listAuditLogs({ client: t.client, path: { workspaceId }, query });
  expect(res.response.status).toBe(200);
  return res.data!;
}

describe('listAuditLogs', () => {
  it('lists every change of the workspace, newest first, with who, what, when and from where', async () => {
    const { workspaceId, connectionId, requestIds } = await workspaceWithHistory();
    const entries = await list(workspaceId);
    expect(entries.map((e) => e.action)).toEqual([
      'provider_connection.archived',
      'provider_connection.secret_rotated',
      'provider_connection.created',
      'workspace.updated',
      'workspace.created',
    ]);
    expect(entries.map((e) => e.requestId)).toEqual([...requestIds].reverse());
    expect(entries.map((e) => e.createdAt)).toEqual([
      '2026-11-22T10:20:00.000Z',
      '2026-11-22T10:15:00.000Z',
      '2026-11-22T10:10:00.000Z',
      '2026-11-22T10:05:00.000Z',
      '2026-11-22T10:00:00.000Z',
    ]);
    for (const e of entries) {
      expect(e).toMatchObject({ workspaceId, actorKeyId: 'root' });
      expect(e.clientAddress).toMatch(/127\.0\.0\.1/);
    }
    expect(entries[0]).toMatchObject({ resourceType: 'provider_connection', resourceId: connectionId, changes: { status: 'ARCHIVED' } });
    expect(entries[3]!.changes).toEqual({ name: 'audited-2' });
  });

  it('redacts secrets in the recorded changes', async () => {
    const { workspaceId } = await workspaceWithHistory();
    const entries = await list(workspaceId, { resourceType: 'provider_connection' });
    const created = entries.find((e) => e.action === 'provider_connection.created')!;
    expect(created.changes).toMatchObject({ apiKey: '[redacted]', name: 'c', protocolProfile: 'openai', baseUrl: upstream.url });
    const rotated = entries.find((e) => e.action === 'provider_connection.secret_rotated')!;
    expect(rotated.changes.apiKey).toBe('[redacted]');
    expect(rotated.changes.secretPreview).toMatch(/^sk-\.\.\..{4}$/);
    expect(JSON.stringify(entries)).not.toContain(SECRET_MARKER);
  });

  it('pages with limit and cursor, without gap or duplicate', async () => {
    const { workspaceId } = await workspaceWithHistory();
    const all = await list(workspaceId, { limit: 100 });
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const res = await listAuditLogs({ client: t.client, path: { workspaceId }, query: { limit: 2, ...(cursor ? { cursor } : {}) } });
      seen.push(...res.data!.map((e) => e.id));
      cursor = res.response.headers.get('x-next-cursor') ?? undefined;
      if (cursor) expect(res.response.headers.get('link')).toContain('rel="next"');
      pages++;
    } while (cursor);
    expect(seen).toEqual(all.map((e) => e.id));
    expect(pages).toBe(3);
    expect(await list(workspaceId, { limit: 1 })).toHaveLength(1);
  });

  it('filters by action, resource type, resource id, actor and time range', async () => {
    const { workspaceId, connectionId } = await workspaceWithHistory();
    expect((await list(workspaceId, { action: 'provider_connection.secret_rotated' })).map((e) => e.resourceId)).toEqual([connectionId]);
    expect((await list(workspaceId, { resourceType: 'workspace' })).map((e) => e.action)).toEqual([
      'workspace.updated',
      'workspace.created',
    ]);
    expect(await list(workspaceId, { resourceId: connectionId })).toHaveLength(3);
    expect(await list(workspaceId, { actorKeyId: 'root' })).toHaveLength(5);
    expect(await list(workspaceId, { actorKeyId: 'someone-else' })).toEqual([]);
    const window = await list(workspaceId, { since: '2026-11-22T10:05:00Z', until: '2026-11-22T10:15:00Z' });
    expect(window.map((e) => e.action)).toEqual(['provider_connection.created', 'workspace.updated']);
    expect((await list(workspaceId, { since: '2026-11-22T10:20:00.000Z' })).map((e) => e.action)).toEqual(['provider_connection.archived']);
    expect(await list(workspaceId, { until: '2026-11-22T10:00:00Z' })).toEqual([]);
    const combined = await list(workspaceId, {
      resourceId: connectionId,
      since: '2026-11-22T10:12:00Z',
      action: 'provider_connection.archived',
    });
    expect(combined).toHaveLength(1);
  });

  it('records the scoped key that made a change, and stays readable after the workspace is archived', async () => {
    at('2026-11-22T11:00:00.000Z');
    const ws = await createWorkspace({ client: t.client, body: { name: 'scoped-audit' } });
    track(ws, 'workspace.created', ws.data!.id);
    const { key, id: keyId } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
      name: 'audit-scoped',
      workspaceIds: [ws.data!.id],
    });
    const scoped = t.clientWith(key);
    const updated = await updateWorkspace({ client: scoped, path: { workspaceId: ws.data!.id }, body: { metadata: { a: 1 } } });
    track(updated, 'workspace.updated', ws.data!.id);
    const archived = await archiveWorkspace({ client: t.client, path: { workspaceId: ws.data!.id } });
    track(archived, 'workspace.archived', ws.data!.id);
    const entries = (await listAuditLogs({ client: scoped, path: { workspaceId: ws.data!.id } })).data!;
    expect(entries.find((e) => e.action === 'management_key.created')?.changes).toEqual({ name: 'audit-scoped' });
    expect(entries.map((e) => [e.action, e.actorKeyId])).toEqual([
      ['workspace.archived', 'root'],
      ['workspace.updated', keyId],
      ['management_key.created', 'test'],
      ['workspace.created', 'root'],
    ]);
    // The key's revocation is in the same log as its creation; no new key may see an archived workspace.
    await t.nexus.services.managementKeys.revoke(systemActor('test'), keyId);
    const after = (await listAuditLogs({ client: t.client, path: { workspaceId: ws.data!.id }, query: { limit: 1 } })).data!;
    expect(after[0]).toMatchObject({ action: 'management_key.revoked', resourceId: keyId, actorKeyId: 'test' });
    await expect(
      t.nexus.services.managementKeys.createScoped(systemActor('test'), { name: 'late', workspaceIds: [ws.data!.id] }),
    ).rejects.toMatchObject({ code: 'workspace_archived' });
  });

  it('answers 404 for an unknown workspace or another tenant, 401 without a key', async () => {
    at('2026-11-22T12:00:00.000Z');
    const mine = await createWorkspace({ client: t.client, body: { name: 'mine' } });
    track(mine, 'workspace.created', mine.data!.id);
    const theirs = await createWorkspace({ client: t.client, body: { name: 'theirs' } });
    track(theirs, 'workspace.created', theirs.data!.id);
    const { key } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
      name: 'audit-404',
      workspaceIds: [mine.data!.id],
    });
    const other = await listAuditLogs({ client: t.clientWith(key), path: { workspaceId: theirs.data!.id } });
    expect(other.response.status).toBe(404);
    expect((other.error as any).error.code).toBe('workspace_not_found');
    const missing = await listAuditLogs({ client: t.client, path: { workspaceId: '01a20000-0000-7000-8000-000000000000' } });
    expect(missing.response.status).toBe(404);
    expect((await listAuditLogs({ client: t.clientWith(undefined), path: { workspaceId: mine.data!.id } })).response.status).toBe(401);
  });

  describe.each([
    ['limit 0', 'limit=0', 'limit'],
    ['limit 101', 'limit=101', 'limit'],
    ['a forged cursor', 'cursor=bm90LWEtY3Vyc29y', 'cursor'],
    ['since not a date', 'since=yesterday', 'since'],
    ['until not a date', 'until=2026-13-45', 'until'],
    ['an empty action', 'action=', 'action'],
  ])('rejects %s', (_label, query, param) => {
    it('with 400 naming the parameter', async () => {
      const ws = await createWorkspace({ client: t.client, body: { name: 'bad-query' } });
      track(ws, 'workspace.created', ws.data!.id);
      const res = await t.fetch(`${t.url}/admin/v1/workspaces/${ws.data!.id}/audit-logs?${query}`, {
        headers: { authorization: `Bearer ${TEST_ROOT_KEY}` },
      });
      expect(res.status).toBe(400);
      expect((await res.json()).error.param).toBe(param);
    });
  });
});

describe('the audit table', () => {
  it('is append-only: UPDATE, DELETE and TRUNCATE fail in the database', async () => {
    const { workspaceId } = await workspaceWithHistory();
    const db = t.database.db;
    const before = await db('audit_logs').where({ workspace_id: workspaceId }).orderBy('id');
    await expect(db('audit_logs').where({ workspace_id: workspaceId }).update({ action: 'forged' })).rejects.toThrow(/append-only/);
    await expect(db('audit_logs').where({ workspace_id: workspaceId }).delete()).rejects.toThrow(/append-only/);
    await expect(db.raw('truncate audit_logs')).rejects.toThrow(/append-only/);
    await expect(db.raw(`update audit_logs set changes = '{}'::jsonb where id = ?`, [before[0].id])).rejects.toThrow(/append-only/);
    expect(await db('audit_logs').where({ workspace_id: workspaceId }).orderBy('id')).toEqual(before);
  });

  it('rolls back with the change: a refused change leaves no entry', async () => {
    const { workspaceId, connectionId } = await workspaceWithHistory();
    const count = async () => (await list(workspaceId, { limit: 100 })).length;
    const before = await count();
    const refused = await updateProviderConnection({ client: t.client, path: { providerConnectionId: connectionId }, body: { name: 'x' } });
    expect(refused.response.status).toBe(409);
    expect(await count()).toBe(before);
  });

  it('holds exactly one entry, with its request id, for every change this file made', async () => {
    expect(mutations.length).toBeGreaterThan(20);
    const rows = await t.database.db('audit_logs').whereIn(
      'request_id',
      mutations.map((m) => m.requestId),
    );
    for (const m of mutations) {
      const entries = rows.filter((r) => r.request_id === m.requestId);
      expect(entries, `${m.action} (request ${m.requestId})`).toHaveLength(1);
      expect(entries[0]).toMatchObject({ action: m.action, resource_id: m.resourceId });
    }
  });
});

import request from 'supertest';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveWorkspace, createWorkspace, getWorkspace, listWorkspaces, updateWorkspace } from '../support/sdk.js';
import { systemActor } from '../../src/domain/actor.js';
import { loadConfig } from '../../src/config.js';
import { startTestApp, TEST_ENCRYPTION_KEY, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

async function newWorkspace(name = 'ws') {
  const res = await createWorkspace({ client: t.client, body: { name } });
  expect(res.response.status).toBe(201);
  return res.data!;
}

async function rawPost(path: string, body: string, headers: Record<string, string> = {}, base = t.url) {
  const res = await t.fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: res.status, body: await res.json(), headers: res.headers };
}

describe('request bodies: their content type, and what validation errors say', () => {
  it.each([
    ['text/plain', 'text/plain'],
    ['a form', 'application/x-www-form-urlencoded'],
  ])('%s gets a 400 that names the content type, and creates nothing', async (_label, type) => {
    const before = (await t.database.db('workspaces').count('* as n'))[0]!.n;
    const res = await rawPost('/admin/v1/workspaces', '{"name":"typed wrong"}', { 'content-type': type });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'unsupported_content_type', type: 'invalid_request_error', param: null });
    expect(res.body.error.message).toContain('application/json');
    expect(res.body.error.message).toContain(type);
    expect((await t.database.db('workspaces').count('* as n'))[0]!.n).toBe(before);
  });

  it('validation messages name the field and what it takes', async () => {
    const noBody = await t.fetch(`${t.url}/admin/v1/workspaces`, { method: 'POST', headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
    expect((await noBody.json()).error).toMatchObject({
      code: 'invalid_parameter',
      message: 'The request body is required (JSON)',
      param: null,
    });
    expect((await rawPost('/admin/v1/workspaces', '{}')).body.error).toMatchObject({ message: 'name is required', param: 'name' });
    const badStatus = await t.fetch(`${t.url}/admin/v1/workspaces?status=GONE`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
    expect(badStatus.status).toBe(400);
    expect((await badStatus.json()).error).toMatchObject({ message: 'status must be one of ACTIVE, ARCHIVED', param: 'status' });
    expect((await rawPost('/admin/v1/workspaces', '{"name":"  "}')).body.error).toMatchObject({
      message: 'name must not be blank',
      param: 'name',
    });
    const unknownQuery = await t.fetch(`${t.url}/admin/v1/workspaces?from=2026-01-01`, {
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}` },
    });
    expect((await unknownQuery.json()).error).toMatchObject({ message: "Unknown query parameter 'from'", param: 'from' });
    expect((await rawPost('/admin/v1/workspaces', '{"name":"a","nmae":"b"}')).body.error).toMatchObject({
      message: "Unknown field 'nmae'",
    });
    const badId = await t.fetch(`${t.url}/admin/v1/workspaces/not-a-uuid`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
    expect((await badId.json()).error).toMatchObject({ message: 'workspaceId must be a UUID', param: 'workspaceId' });
    const ws = await newWorkspace('to patch');
    const emptyPatch = await t.fetch(`${t.url}/admin/v1/workspaces/${ws.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(emptyPatch.status).toBe(400);
    expect((await emptyPatch.json()).error.message).toBe('The request body must name at least one field to change');
  });

  it('types, lengths, patterns, non-object bodies and out-of-range instants are refused in plain words', async () => {
    const get = async (path: string) => {
      const res = await t.fetch(`${t.url}${path}`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
      return { status: res.status, error: (await res.json()).error };
    };
    expect(await get('/admin/v1/workspaces?limit=abc')).toMatchObject({
      status: 400,
      error: { message: 'limit must be an integer', param: 'limit' },
    });
    expect(await get('/admin/v1/workspaces?cursor=')).toMatchObject({
      status: 400,
      error: { message: 'cursor must be at least 1 character long' },
    });
    expect((await rawPost('/admin/v1/workspaces', '{"name":7}')).body.error).toMatchObject({
      message: 'name must be a string',
      param: 'name',
    });
    for (const body of ['null', '42', '"x"']) {
      expect((await rawPost('/admin/v1/workspaces', body)).body.error).toMatchObject({
        code: 'invalid_json',
        message: 'The request body must be a JSON object',
      });
    }
    expect((await rawPost('/admin/v1/workspaces', '{"name":')).body.error).toMatchObject({
      code: 'invalid_json',
      message: 'The request body is not valid JSON',
    });
    const ws = await newWorkspace('validated');
    const strategy = await rawPost(
      `/admin/v1/workspaces/${ws.id}/plan-strategies/quota`,
      JSON.stringify({
        key: 'chat',
        resetInterval: 'MONTH',
        quotaUnits: '-1',
        inputMultiplierPpm: '1000000',
        outputMultiplierPpm: '1000000',
        cachedInputMultiplierPpm: '1000000',
        maxOutputTokens: 100,
      }),
    );
    expect(strategy.status).toBe(400);
    expect(strategy.body.error).toMatchObject({
      param: 'quotaUnits',
      message: 'quotaUnits must be a whole number from 0 to 9223372036854775807 as a decimal string, such as "1000"',
    });
    // An instant that is RFC 3339 as written but outside the years 0001-9999 once in UTC.
    for (const since of ['9999-12-31T23:59:59-01:00', '0000-01-01T00:00:00+05:00']) {
      const res = await get(`/admin/v1/workspaces/${ws.id}/audit-logs?since=${encodeURIComponent(since)}`);
      expect(res).toMatchObject({ status: 400, error: { param: 'since' } });
      expect(res.error.message).toContain('in the years 0001-9999 UTC');
    }
    expect((await get(`/admin/v1/workspaces/${ws.id}/audit-logs?since=${encodeURIComponent('9999-12-31T23:59:59Z')}`)).status).toBe(200);
  });

  it('text PostgreSQL cannot store, and metadata nested too deeply, get a 400 naming the field and change nothing', async () => {
    const before = (await t.database.db('workspaces').count('* as n'))[0]!.n;
    const deep = '{"a":'.repeat(5000) + '1' + '}'.repeat(5000);
    const cases: [string, string, string][] = [
      ['{"name":"a\\u0000b"}', 'name', 'name must not contain NUL characters or unpaired UTF-16 surrogates'],
      ['{"name":"a\\ud800b"}', 'name', 'name must not contain NUL characters or unpaired UTF-16 surrogates'],
      [
        '{"name":"m","metadata":{"k":"a\\u0000b"}}',
        'metadata.k',
        'metadata.k must not contain NUL characters or unpaired UTF-16 surrogates',
      ],
      ['{"name":"m","metadata":{"k\\u0000":"x"}}', 'metadata', 'metadata must not contain NUL characters or unpaired UTF-16 surrogates'],
      [`{"name":"deep","metadata":${deep}}`, expect.stringMatching(/^metadata(\.a)+$/) as never, 'nests deeper than 32 levels'],
    ];
    for (const [body, param, message] of cases) {
      const res = await rawPost('/admin/v1/workspaces', body);
      expect(res.status, body.slice(0, 60)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_parameter', param });
      expect(res.body.error.message).toContain(message);
    }
    // A well-formed surrogate pair (an emoji) is fine.
    expect((await rawPost('/admin/v1/workspaces', '{"name":"rocket \\ud83d\\ude80"}')).body.name).toBe('rocket 🚀');
    const ws = await newWorkspace('patched with NUL');
    const query = await t.fetch(`${t.url}/admin/v1/workspaces/${ws.id}/audit-logs?action=a%00b`, {
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}` },
    });
    expect(query.status).toBe(400);
    expect((await query.json()).error).toMatchObject({ param: 'action' });
    const patch = await t.fetch(`${t.url}/admin/v1/workspaces/${ws.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
      body: '{"name":"x\\u0000"}',
    });
    expect(patch.status).toBe(400);
    expect((await getWorkspace({ client: t.client, path: { workspaceId: ws.id } })).data!.name).toBe('patched with NUL');
    expect(Number((await t.database.db('workspaces').count('* as n'))[0]!.n)).toBe(Number(before) + 2);
  });

  it('a +json media type (with a charset) is read as JSON', async () => {
    const res = await rawPost('/admin/v1/workspaces', '{"name":"merge typed"}', {
      'content-type': 'application/merge-patch+json; charset=utf-8',
    });
    expect(res.status).toBe(201);
    expect(res.body.name).toBe('merge typed');
  });
});

describe('createWorkspace', () => {
  it('creates a workspace with defaults and returns it', async () => {
    const res = await createWorkspace({ client: t.client, body: { name: 'Acme', metadata: { tier: 'gold' } } });
    expect(res.response.status).toBe(201);
    expect(res.data).toMatchObject({
      name: 'Acme',
      status: 'ACTIVE',
      metadata: { tier: 'gold' },
      allowUnmeteredPassthrough: false,
      passthroughClasses: [],
    });
    expect(res.response.headers.get('x-request-id')).toBeTruthy();
    const fetched = await getWorkspace({ client: t.client, path: { workspaceId: res.data!.id } });
    expect(fetched.data).toEqual(res.data);
  });

  it('replays the first answer for a repeated Idempotency-Key and refuses it with another body', async () => {
    const headers = { 'Idempotency-Key': `ws-${Date.now()}` };
    const first = await createWorkspace({ client: t.client, body: { name: 'Once' }, headers });
    const again = await createWorkspace({ client: t.client, body: { name: 'Once' }, headers });
    expect(again.response.status).toBe(201);
    expect(again.data!.id).toBe(first.data!.id);
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    // Stored answers are sealed: they can hold a secret shown once.
    const stored = await t.database.db('idempotency_keys').where({ idempotency_key: headers['Idempotency-Key'] }).first();
    expect(JSON.stringify(stored.response_body)).not.toContain(first.data!.id);
    const other = await createWorkspace({ client: t.client, body: { name: 'Twice' }, headers });
    expect(other.response.status).toBe(409);
    expect((other.error as any).error.code).toBe('idempotency_key_reused');
  });

  describe.each([
    ['empty name', '{"name":""}', 'invalid_parameter', 'name'],
    ['blank name', '{"name":" \\t "}', 'invalid_parameter', 'name'],
    ['missing name', '{}', 'invalid_parameter', 'name'],
    ['name too long', JSON.stringify({ name: 'x'.repeat(201) }), 'invalid_parameter', 'name'],
    ['name not a string', '{"name":5}', 'invalid_parameter', 'name'],
    ['unknown field', '{"name":"a","plan":"x"}', 'invalid_parameter', 'plan'],
    ['metadata not an object', '{"name":"a","metadata":[1]}', 'invalid_parameter', 'metadata'],
    ['passthrough not a boolean', '{"name":"a","allowUnmeteredPassthrough":"yes"}', 'invalid_parameter', 'allowUnmeteredPassthrough'],
    [
      'a passthrough class that is not one',
      '{"name":"a","passthroughClasses":["files","imgs"]}',
      'invalid_parameter',
      'passthroughClasses.1',
    ],
    ['a passthrough class twice', '{"name":"a","passthroughClasses":["files","files"]}', 'invalid_parameter', 'passthroughClasses'],
    ['malformed JSON', '{"name":', 'invalid_json', null],
    ['a JSON string instead of an object', '"name"', 'invalid_json', null],
  ])('rejects %s with 400', (_label, body, code, param) => {
    it('and creates nothing', async () => {
      const before = (await t.database.db('workspaces').count('* as n'))[0]!.n;
      const res = await rawPost('/admin/v1/workspaces', body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code, type: 'invalid_request_error', param });
      expect(res.body.error.request_id).toBe(res.headers.get('x-request-id'));
      expect(JSON.stringify(res.body)).not.toMatch(/at .*\.ts|stack|select /i);
      const after = (await t.database.db('workspaces').count('* as n'))[0]!.n;
      expect(after).toBe(before);
    });
  });

  it('rejects a body over the limit with 413', async () => {
    const res = await rawPost('/admin/v1/workspaces', JSON.stringify({ name: 'big', metadata: { blob: 'x'.repeat(2 * 1024 * 1024) } }));
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');
  });

  it.each(['gzip', 'deflate', 'br'])('rejects a body that does not decode as Content-Encoding: %s with 400, not 500', async (encoding) => {
    const before = (await t.database.db('workspaces').count('* as n'))[0]!.n;
    const res = await rawPost('/admin/v1/workspaces', '{"name":"plain"}', { 'content-encoding': encoding });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', type: 'invalid_request_error' });
    expect(res.body.error.request_id).toBe(res.headers.get('x-request-id'));
    expect((await t.database.db('workspaces').count('* as n'))[0]!.n).toBe(before);
    // A body that does decode is read as usual.
    const gzipped = await t.fetch(`${t.url}/admin/v1/workspaces`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync('{"name":"gzipped"}'),
    });
    expect(gzipped.status).toBe(201);
  });

  it('rejects a path parameter with a malformed percent-encoding with 400, not 500', async () => {
    const res = await t.fetch(`${t.url}/admin/v1/workspaces/%E0%A4%A`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
    expect(res.status).toBe(400);
    const body = await res.json();
    expect(body.error).toMatchObject({ code: 'invalid_request', type: 'invalid_request_error' });
    expect(body.error.request_id).toBe(res.headers.get('x-request-id'));
  });

  it('rejects metadata over 16 KiB', async () => {
    const res = await rawPost('/admin/v1/workspaces', JSON.stringify({ name: 'm', metadata: { blob: 'x'.repeat(17 * 1024) } }));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_parameter', param: 'metadata' });
  });
});

describe('listWorkspaces', () => {
  it('pages through 27 workspaces newest first with no gap and no duplicate', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 27; i++) ids.push((await newWorkspace(`page-${i}`)).id);
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const res = await listWorkspaces({ client: t.client, query: { limit: 5, ...(cursor ? { cursor } : {}) } });
      expect(res.response.status).toBe(200);
      expect(res.data!.length).toBeLessThanOrEqual(5);
      seen.push(...res.data!.map((w) => w.id));
      cursor = res.response.headers.get('x-next-cursor') ?? undefined;
      const link = res.response.headers.get('link');
      if (cursor) expect(link).toContain(`cursor=${encodeURIComponent(cursor)}`);
      else expect(link).toBeNull();
      pages++;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    const ours = seen.filter((id) => ids.includes(id));
    expect(ours).toEqual([...ids].reverse());
    // The page size plus one is read, so a full last page carries no cursor: never an empty page.
    expect(pages).toBe(Math.ceil(seen.length / 5));
  });

  it('refuses a cursor from another list, or from the same list of another workspace', async () => {
    for (let i = 0; i < 3; i++) await newWorkspace(`cursor-${i}`);
    const first = await listWorkspaces({ client: t.client, query: { limit: 1 } });
    const cursor = first.response.headers.get('x-next-cursor')!;
    expect((await listWorkspaces({ client: t.client, query: { limit: 1, cursor } })).response.status).toBe(200);
    const a = await newWorkspace('cursor-a');
    const b = await newWorkspace('cursor-b');
    await updateWorkspace({ client: t.client, path: { workspaceId: a.id }, body: { name: 'cursor-a2' } });
    const get = async (path: string) => {
      const res = await t.fetch(`${t.url}${path}`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
      return { status: res.status, headers: res.headers, error: (await res.json()).error };
    };
    const audit = await get(`/admin/v1/workspaces/${a.id}/audit-logs?limit=1`);
    const auditCursor = audit.headers.get('x-next-cursor');
    expect(auditCursor).toBeTruthy();
    const refused = { status: 400, error: { code: 'invalid_cursor', param: 'cursor' } };
    expect(await get(`/admin/v1/workspaces?cursor=${encodeURIComponent(auditCursor!)}`)).toMatchObject(refused);
    expect(await get(`/admin/v1/workspaces/${b.id}/audit-logs?cursor=${encodeURIComponent(auditCursor!)}`)).toMatchObject(refused);
    expect(await get(`/admin/v1/workspaces/${a.id}/plans?cursor=${encodeURIComponent(cursor)}`)).toMatchObject(refused);
    expect((await get(`/admin/v1/workspaces/${a.id}/audit-logs?limit=1&cursor=${encodeURIComponent(auditCursor!)}`)).status).toBe(200);
  });

  it('a public URL with a path prefix (Nexus behind a proxy) prefixes the Link header and the URLs it hands out', async () => {
    const env = { NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, NEXUS_PUBLIC_URL: 'https://gw.example.com/nexus/' };
    const publicUrl = loadConfig(env, () => {}).publicUrl;
    expect(publicUrl).toBe('https://gw.example.com/nexus');
    expect(() => loadConfig({ ...env, NEXUS_PUBLIC_URL: 'https://gw.example.com/nexus?x=1' }, () => {})).toThrow(
      'NEXUS_PUBLIC_URL must be an http(s) origin, optionally with a path prefix',
    );
    const proxied = await t.withEnv({ NEXUS_PUBLIC_URL: 'https://gw.example.com/nexus/' });
    expect(proxied.config.publicUrl).toBe(publicUrl);
    try {
      for (let i = 0; i < 2; i++) await newWorkspace(`prefixed-${i}`);
      const page = await listWorkspaces({ client: proxied.client, query: { limit: 1 } });
      expect(page.response.headers.get('link')).toMatch(
        /^<https:\/\/gw\.example\.com\/nexus\/admin\/v1\/workspaces\?limit=1&cursor=[^>]+>; rel="next"$/,
      );
      const ws = await newWorkspace('prefixed');
      const conn = await rawPost(
        `/admin/v1/workspaces/${ws.id}/provider-connections`,
        JSON.stringify({
          name: 'behind a proxy',
          protocolProfile: 'openai',
          baseUrl: 'http://127.0.0.1:9',
          apiKey: 'sk-prefixed-0123456789',
        }),
        {},
        proxied.url,
      );
      expect(conn.status).toBe(201);
      expect(conn.body.gatewayBaseUrl).toBe(`https://gw.example.com/nexus/providers/${conn.body.id}`);
    } finally {
      await proxied.close();
    }
  });

  it('defaults to 20 per page', async () => {
    for (let i = 0; i < 21; i++) await newWorkspace(`default-${i}`);
    const res = await listWorkspaces({ client: t.client });
    expect(res.data!.length).toBe(20);
    expect(res.response.headers.get('x-next-cursor')).toBeTruthy();
  });

  it('filters by status', async () => {
    const ws = await newWorkspace('to-archive-for-filter');
    await archiveWorkspace({ client: t.client, path: { workspaceId: ws.id } });
    const res = await listWorkspaces({ client: t.client, query: { status: 'ARCHIVED', limit: 100 } });
    expect(res.data!.map((w) => w.id)).toContain(ws.id);
    expect(res.data!.every((w) => w.status === 'ARCHIVED')).toBe(true);
  });

  describe.each([
    ['limit 0', 'limit=0', 'limit'],
    ['limit 101', 'limit=101', 'limit'],
    ['limit not a number', 'limit=ten', 'limit'],
    ['a forged cursor', 'cursor=bm90LWEtY3Vyc29y', 'cursor'],
    ['an unknown status', 'status=GONE', 'status'],
  ])('rejects %s', (_label, query, param) => {
    it('with 400 naming the parameter', async () => {
      const res = await t.fetch(`${t.url}/admin/v1/workspaces?${query}`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
      expect(res.status).toBe(400);
      expect((await res.json()).error.param).toBe(param);
    });
  });
});

describe('updateWorkspace and archiveWorkspace', () => {
  it('updates the given fields only', async () => {
    const ws = await newWorkspace('before');
    const res = await updateWorkspace({ client: t.client, path: { workspaceId: ws.id }, body: { allowUnmeteredPassthrough: true } });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({ name: 'before', allowUnmeteredPassthrough: true });
    const renamed = await updateWorkspace({ client: t.client, path: { workspaceId: ws.id }, body: { name: 'after', metadata: { a: 1 } } });
    expect(renamed.data).toMatchObject({ name: 'after', metadata: { a: 1 }, allowUnmeteredPassthrough: true, passthroughClasses: [] });
    // Passthrough classes are kept in the contract's order, each once.
    const classes = await updateWorkspace({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { passthroughClasses: ['other', 'fine_tuning', 'files'] },
    });
    expect(classes.data).toMatchObject({ name: 'after', passthroughClasses: ['files', 'fine_tuning', 'other'] });
    expect((await getWorkspace({ client: t.client, path: { workspaceId: ws.id } })).data!.passthroughClasses).toEqual([
      'files',
      'fine_tuning',
      'other',
    ]);
  });

  it('refuses an empty update', async () => {
    const ws = await newWorkspace('empty-update');
    const res = await updateWorkspace({ client: t.client, path: { workspaceId: ws.id }, body: {} });
    expect(res.response.status).toBe(400);
  });

  it('archives: readable, read-only, idempotent', async () => {
    const ws = await newWorkspace('archive-me');
    const res = await archiveWorkspace({ client: t.client, path: { workspaceId: ws.id } });
    expect(res.response.status).toBe(204);
    const got = await getWorkspace({ client: t.client, path: { workspaceId: ws.id } });
    expect(got.data).toMatchObject({ status: 'ARCHIVED' });
    expect(got.data!.archivedAt).toBeTruthy();
    const update = await updateWorkspace({ client: t.client, path: { workspaceId: ws.id }, body: { name: 'x' } });
    expect(update.response.status).toBe(409);
    expect((update.error as any).error).toMatchObject({ code: 'workspace_archived', current_status: 'ARCHIVED' });
    expect((await archiveWorkspace({ client: t.client, path: { workspaceId: ws.id } })).response.status).toBe(204);
  });

  it('answers 404 for an unknown workspace and 400 for a malformed id', async () => {
    const missing = await getWorkspace({ client: t.client, path: { workspaceId: '01a20000-0000-7000-8000-000000000000' } });
    expect(missing.response.status).toBe(404);
    expect((missing.error as any).error.code).toBe('workspace_not_found');
    const bad = await getWorkspace({ client: t.client, path: { workspaceId: 'nope' } });
    expect(bad.response.status).toBe(400);
    expect((bad.error as any).error.param).toBe('workspaceId');
    expect(
      (await archiveWorkspace({ client: t.client, path: { workspaceId: '01a20000-0000-7000-8000-000000000000' } })).response.status,
    ).toBe(404);
    expect(
      (await updateWorkspace({ client: t.client, path: { workspaceId: '01a20000-0000-7000-8000-000000000000' }, body: { name: 'n' } }))
        .response.status,
    ).toBe(404);
  });

  it('writes one audit entry per change, in the same transaction', async () => {
    const ws = await newWorkspace('audited');
    await updateWorkspace({ client: t.client, path: { workspaceId: ws.id }, body: { name: 'audited-2' } });
    await archiveWorkspace({ client: t.client, path: { workspaceId: ws.id } });
    const rows = await t.database.db('audit_logs').where({ resource_id: ws.id }).orderBy('id');
    expect(rows.map((r) => r.action)).toEqual(['workspace.created', 'workspace.updated', 'workspace.archived']);
    expect(rows[0]).toMatchObject({ actor_key_id: 'root', workspace_id: ws.id, resource_type: 'workspace' });
    expect(rows[1].changes).toEqual({ name: 'audited-2' });
    expect(rows.every((r) => r.request_id)).toBe(true);
  });
});

describe('management keys', () => {
  it('refuses a missing, malformed or unknown key with 401', async () => {
    for (const token of [undefined, 'nx-mgmt-not-a-real-key']) {
      const res = await listWorkspaces({ client: t.clientWith(token) });
      expect(res.response.status).toBe(401);
      expect((res.error as any).error.type).toBe('authentication_error');
    }
    const basic = await t.fetch(`${t.url}/admin/v1/workspaces`, { headers: { authorization: 'Basic abc' } });
    expect(basic.status).toBe(401);
  });

  it('scopes a key to its workspaces: others look missing, and root-only operations are refused', async () => {
    const mine = await newWorkspace('mine');
    const theirs = await newWorkspace('theirs');
    const { key } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), { name: 'scoped', workspaceIds: [mine.id] });
    const scoped = t.clientWith(key);

    const list = await listWorkspaces({ client: scoped, query: { limit: 100 } });
    expect(list.data!.map((w) => w.id)).toEqual([mine.id]);
    expect((await getWorkspace({ client: scoped, path: { workspaceId: mine.id } })).response.status).toBe(200);
    const other = await getWorkspace({ client: scoped, path: { workspaceId: theirs.id } });
    expect(other.response.status).toBe(404);
    expect((other.error as any).error.code).toBe('workspace_not_found');
    expect((await updateWorkspace({ client: scoped, path: { workspaceId: theirs.id }, body: { name: 'hijack' } })).response.status).toBe(
      404,
    );
    expect((await updateWorkspace({ client: scoped, path: { workspaceId: mine.id }, body: { name: 'mine-2' } })).response.status).toBe(200);
    const create = await createWorkspace({ client: scoped, body: { name: 'nope' } });
    expect(create.response.status).toBe(403);
    expect((create.error as any).error.code).toBe('root_key_required');
    expect((await archiveWorkspace({ client: scoped, path: { workspaceId: mine.id } })).response.status).toBe(403);

    const stored = await t.database.db('management_keys').where({ name: 'scoped' }).first();
    expect(stored.key_hash).not.toContain(key);
    expect(JSON.stringify(stored)).not.toContain(key.slice(12));

    await t.nexus.services.managementKeys.revoke(systemActor('test'), stored.id);
    expect((await listWorkspaces({ client: scoped })).response.status).toBe(401);
  });
});

describe('the spine', () => {
  it('answers unknown routes with a 404 Error body', async () => {
    const res = await fetch(`${t.url}/admin/v1/nothing-here`, { headers: { authorization: `Bearer ${TEST_ROOT_KEY}` } });
    expect(res.status).toBe(404);
    expect((await res.json()).error).toMatchObject({ code: 'route_not_found', type: 'not_found_error' });
  });

  it('serves health, readiness, the contract, the docs and metrics', async () => {
    expect((await t.fetch(`${t.url}/healthz`)).status).toBe(200);
    expect((await t.fetch(`${t.url}/readyz`)).status).toBe(200);
    const doc = await (await fetch(`${t.url}/openapi.json`)).json();
    expect(doc.openapi).toBe('3.1.0');
    const docs = await (await fetch(`${t.url}/docs`)).text();
    expect(docs).toContain('src="docs/standalone.js"');
    expect(docs).not.toMatch(/https?:\/\/(cdn|unpkg)/);
    const bundle = await fetch(`${t.url}/docs/standalone.js`);
    expect(bundle.status).toBe(200);
    expect(Number(bundle.headers.get('content-length'))).toBeGreaterThan(100_000);
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(/nexus_http_requests_total\{operation="createWorkspace",method="POST",status="201",source="nexus"\} \d+/);
    expect(metrics).toContain('nexus_http_request_duration_seconds_bucket');
  });

  it('the contract and the API reference name the server to call: NEXUS_PUBLIC_URL, else the listen address; their assets load by relative URL', async () => {
    /** GET with the Host header a client behind some name would send (fetch will not send one of its own). */
    const getAs = async (host: string, path: string) => (await request(t.url).get(path).set('Host', host)).text;
    const served = await (await fetch(`${t.url}/openapi.json`)).json();
    expect(served.servers).toEqual([{ url: t.url, description: 'This Nexus' }]);
    const docs = await (await fetch(`${t.url}/docs`)).text();
    expect(docs).toContain('data-url="openapi.json"');
    expect(docs).toContain('src="docs/standalone.js"');
    expect(docs).toContain(`&quot;url&quot;:&quot;${t.url}&quot;`);
    // /docs/ too: its relative URLs climb to the root first.
    const slashed = await (await fetch(`${t.url}/docs/`)).text();
    expect(slashed).toContain('src="../docs/standalone.js"');
    expect(slashed).toContain('data-url="../openapi.json"');

    // A Host header is what the client says: not believed without NEXUS_TRUST_PROXY (test/security/public-url.api.test.ts).
    expect(JSON.parse(await getAs('nexus.example.test:9999', '/openapi.json')).servers[0].url).toBe(t.url);

    const configured = await t.withEnv({ NEXUS_PUBLIC_URL: 'https://gw.example.com/nexus' });
    try {
      const doc = await (await fetch(`${configured.url}/openapi.json`)).json();
      expect(doc.servers).toEqual([{ url: 'https://gw.example.com/nexus', description: 'This Nexus' }]);
      const docs = await (await fetch(`${configured.url}/docs`)).text();
      expect(docs).toContain('&quot;url&quot;:&quot;https://gw.example.com/nexus&quot;');
      // Relative: behind the proxy, /nexus/docs loads /nexus/docs/standalone.js.
      expect(docs).toContain('src="docs/standalone.js"');
    } finally {
      await configured.close();
    }
  });

  it('logs one JSON line per request with id, status and duration, and never a credential', async () => {
    const res = await listWorkspaces({ client: t.client, query: { limit: 1 } });
    const id = res.response.headers.get('x-request-id')!;
    const lines = t.logs.filter((l) => l.includes(id));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ requestId: id, status: 200, operationId: 'listWorkspaces' });
    expect(JSON.parse(lines[0]!).durationMs).toBeTypeOf('number');
    expect(t.logs.join('\n')).not.toContain(TEST_ROOT_KEY);
    expect(t.logs.join('\n').toLowerCase()).not.toContain('authorization');
  });
});

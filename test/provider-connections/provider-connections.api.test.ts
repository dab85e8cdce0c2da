import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  archiveProviderConnection,
  archiveWorkspace,
  createProviderConnection,
  createWorkspace,
  getProviderConnection,
  listAuditLogs,
  listProviderConnections,
  rotateProviderSecret,
  testProviderConnection,
  updateProviderConnection,
  verifyProviderConnection,
} from '../support/sdk.js';
import type { ProviderConnectionDto } from '../../generated/client/types.gen.js';
import { systemActor } from '../../src/domain/actor.js';
import { openProviderApiKey } from '../../src/domain/provider-connections/provider-secret.js';
import { keyIdOf } from '../../src/domain/security/secret-box.js';
import { startTestApp, TEST_ENCRYPTION_KEY, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { refusedUrl, SECRET_MARKER, startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';

let t: TestApp;
let openaiUp: FakeUpstream;
let anthropicUp: FakeUpstream;
const OPENAI_KEY = testProviderKey('openai');
const ANTHROPIC_KEY = testProviderKey('anthropic');
const MISSING_ID = '01a20000-0000-7000-8000-000000000000';

/** Every successful mutating request of this file, checked against the audit trail at the end. */
const mutations: { requestId: string; action: string; resourceId: string }[] = [];

function track(res: { response: Response }, action: string, resourceId: string): void {
  const requestId = res.response.headers.get('x-request-id');
  expect(requestId).toBeTruthy();
  mutations.push({ requestId: requestId!, action, resourceId });
}

beforeAll(async () => {
  t = await startTestApp();
  openaiUp = await startFakeUpstream('openai', [OPENAI_KEY]);
  anthropicUp = await startFakeUpstream('anthropic', [ANTHROPIC_KEY]);
});
afterAll(async () => {
  await openaiUp?.close();
  await anthropicUp?.close();
  await t?.close();
});

async function newWorkspace(name = 'pc-ws') {
  const res = await createWorkspace({ client: t.client, body: { name } });
  expect(res.response.status).toBe(201);
  track(res, 'workspace.created', res.data!.id);
  return res.data!;
}

async function newConnection(
  workspaceId: string,
  body: Partial<{
    name: string;
    protocolProfile: 'openai' | 'anthropic';
    baseUrl: string;
    apiKey: string;
    metadata: Record<string, unknown>;
  }> = {},
): Promise<ProviderConnectionDto> {
  const res = await createProviderConnection({
    client: t.client,
    path: { workspaceId },
    body: { name: 'conn', protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: OPENAI_KEY, ...body },
  });
  expect(res.response.status).toBe(201);
  track(res, 'provider_connection.created', res.data!.id);
  return res.data!;
}

async function raw(method: string, path: string, body?: string, token = TEST_ROOT_KEY) {
  const res = await t.fetch(`${t.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  return { status: res.status, text, body: text ? JSON.parse(text) : undefined };
}

function errorOf(res: { error?: unknown }) {
  return (res.error as { error: { code: string; param?: string | null; type: string } }).error;
}

describe('createProviderConnection', () => {
  it('creates a connection and never returns the key', async () => {
    const ws = await newWorkspace();
    const res = await createProviderConnection({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { name: 'OpenAI', protocolProfile: 'openai', baseUrl: `${openaiUp.url}/`, apiKey: OPENAI_KEY, metadata: { team: 'a' } },
    });
    expect(res.response.status).toBe(201);
    track(res, 'provider_connection.created', res.data!.id);
    const dto = res.data!;
    expect(dto).toMatchObject({
      workspaceId: ws.id,
      name: 'OpenAI',
      protocolProfile: 'openai',
      baseUrl: openaiUp.url,
      status: 'ACTIVE',
      metadata: { team: 'a' },
      gatewayBaseUrl: `${t.url}/providers/${dto.id}`,
      secretPreview: `sk-...${OPENAI_KEY.slice(-4)}`,
    });
    expect(dto.lastVerifiedAt).toBeUndefined();
    expect(dto).not.toHaveProperty('apiKey');
    expect(JSON.stringify(dto)).not.toContain(SECRET_MARKER);
    expect(res.response.headers.get('x-request-id')).toBeTruthy();
    const fetched = await getProviderConnection({ client: t.client, path: { providerConnectionId: dto.id } });
    expect(fetched.data).toEqual(dto);
  });

  it('computes gatewayBaseUrl from the public URL: NEXUS_PUBLIC_URL, else the address Nexus listens at', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    const served = await getProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    expect(served.data!.gatewayBaseUrl).toBe(`${t.url}/providers/${conn.id}`);
    const behindProxy = await t.withEnv({ NEXUS_PUBLIC_URL: 'https://gateway.example.com' });
    try {
      const got = await getProviderConnection({ client: behindProxy.client, path: { providerConnectionId: conn.id } });
      expect(got.data!.gatewayBaseUrl).toBe(`https://gateway.example.com/providers/${conn.id}`);
    } finally {
      await behindProxy.close();
    }
  });

  /** What a preview shows of the key: its prefix and tail characters, around `...`. */
  function shownCharacters(preview: string): number {
    return preview.replace('...', '').length;
  }

  describe.each([
    ['an 8-character key', 'sk-nexus', '...'],
    ['a key of 12 characters with a long prefix', 'abcdefgh-ijk', '...ijk'],
    ['a key of 13 characters', 'abcdefgh-ijkl', '...jkl'],
    ['a key of 16 characters', 'vllmtest-key1234', '...1234'],
    ['a key too short for its prefix beside the tail', 'sk-abcdefghijklmnopqrWXYZ', '...WXYZ'],
    ['an OpenAI project key', `sk-proj-${SECRET_MARKER}-${'a1B2'.repeat(10)}WXYZ`, 'sk-...WXYZ'],
    ['an Anthropic key', `sk-ant-api03-${SECRET_MARKER}-${'x9Y8'.repeat(20)}AA-WXYZ`, 'sk-...WXYZ'],
    ['a marked test key', `${SECRET_MARKER}-abcdefWXYZ`, 'sk-...WXYZ'],
  ])('secretPreview of %s', (_label, apiKey, expected) => {
    it(`is ${expected}: at most a quarter of the key and its last 4 characters`, async () => {
      const ws = await newWorkspace();
      const conn = await newConnection(ws.id, { apiKey });
      expect(conn.secretPreview).toBe(expected);
      expect(shownCharacters(conn.secretPreview)).toBeLessThanOrEqual(apiKey.length / 4);
      const got = await getProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
      expect(got.data!.secretPreview).toBe(expected);
    });
  });

  it('stores the key only encrypted: AES-256-GCM, key id, fresh nonce, bound to its row', async () => {
    const ws = await newWorkspace();
    const a = await newConnection(ws.id, { name: 'a' });
    const b = await newConnection(ws.id, { name: 'b' });
    const rows = await t.database.db('provider_connections').whereIn('id', [a.id, b.id]).orderBy('id');
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(OPENAI_KEY);
    expect(dump).not.toContain(SECRET_MARKER);
    expect(dump).not.toContain(Buffer.from(OPENAI_KEY).toString('base64'));
    const [rowA, rowB] = rows as any[];
    expect(rowA.api_key_key_id).toBe(keyIdOf(Buffer.from(TEST_ENCRYPTION_KEY, 'base64')));
    // Same key, two writes: different ciphertexts (random nonce).
    expect(rowA.api_key_ciphertext).not.toBe(rowB.api_key_ciphertext);
    const box = t.nexus.services.secretBox;
    expect(openProviderApiKey(box, rowA)).toBe(OPENAI_KEY);
    // A ciphertext copied to another row does not decrypt there.
    expect(() => openProviderApiKey(box, { ...rowB, api_key_ciphertext: rowA.api_key_ciphertext })).toThrow();
    // Nor does a tampered one.
    const tampered = Buffer.from(rowA.api_key_ciphertext, 'base64');
    tampered[20] = tampered[20]! ^ 1;
    expect(() => openProviderApiKey(box, { ...rowA, api_key_ciphertext: tampered.toString('base64') })).toThrow();
    // Nothing in the whole schema holds the plaintext (audit entries, idempotency records...).
    for (const table of ['provider_connections', 'audit_logs', 'idempotency_keys']) {
      expect(JSON.stringify(await t.database.db(table).select('*'))).not.toContain(SECRET_MARKER);
    }
  });

  it('replays the first answer for a repeated Idempotency-Key', async () => {
    const ws = await newWorkspace();
    const headers = { 'Idempotency-Key': `pc-${Date.now()}` };
    const body = { name: 'once', protocolProfile: 'openai' as const, baseUrl: openaiUp.url, apiKey: OPENAI_KEY };
    const first = await createProviderConnection({ client: t.client, path: { workspaceId: ws.id }, body, headers });
    track(first, 'provider_connection.created', first.data!.id);
    const again = await createProviderConnection({ client: t.client, path: { workspaceId: ws.id }, body, headers });
    expect(again.response.status).toBe(201);
    expect(again.data!.id).toBe(first.data!.id);
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(await t.database.db('provider_connections').where({ workspace_id: ws.id }).count('* as n')).toEqual([{ n: 1n }]);
  });

  describe.each([
    ['an ftp URL', { baseUrl: 'ftp://127.0.0.1/x' }, 'invalid_base_url', 'baseUrl'],
    ['a relative URL', { baseUrl: '/v1' }, 'invalid_base_url', 'baseUrl'],
    ['not a URL', { baseUrl: 'not a url' }, 'invalid_base_url', 'baseUrl'],
    ['credentials in the URL', { baseUrl: 'http://user:pass@127.0.0.1:9' }, 'invalid_base_url', 'baseUrl'],
    ['a fragment', { baseUrl: 'http://127.0.0.1:9/#frag' }, 'invalid_base_url', 'baseUrl'],
    ['a query string', { baseUrl: 'http://127.0.0.1:9/?a=1' }, 'invalid_base_url', 'baseUrl'],
    ['a trailing /v1', { baseUrl: 'http://127.0.0.1:9/v1/' }, 'invalid_base_url', 'baseUrl'],
    ['an unknown profile', { protocolProfile: 'no-such-protocol' }, 'invalid_parameter', 'protocolProfile'],
    ['no apiKey', { apiKey: undefined }, 'invalid_parameter', 'apiKey'],
    ['an apiKey with a space', { apiKey: `${SECRET_MARKER} x` }, 'invalid_parameter', 'apiKey'],
    ['an apiKey with a newline', { apiKey: `${SECRET_MARKER}\r\nX-Injected: 1` }, 'invalid_parameter', 'apiKey'],
    ['an empty name', { name: '' }, 'invalid_parameter', 'name'],
    ['an unknown field', { secret: 'x' }, 'invalid_parameter', 'secret'],
    ['a timeout below one second', { upstreamTimeoutMs: 999 }, 'invalid_parameter', 'upstreamTimeoutMs'],
  ])('rejects %s', (_label, patch, code, param) => {
    it('with 400, saving nothing and echoing no key', async () => {
      const ws = await newWorkspace();
      const body = { name: 'bad', protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: OPENAI_KEY, ...patch };
      const res = await raw('POST', `/admin/v1/workspaces/${ws.id}/provider-connections`, JSON.stringify(body));
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code, param, type: 'invalid_request_error' });
      expect(res.text).not.toContain(SECRET_MARKER);
      expect(await t.database.db('provider_connections').where({ workspace_id: ws.id }).count('* as n')).toEqual([{ n: 0n }]);
    });
  });

  it('refuses a host that does not resolve on create, test and update, though private upstreams are allowed', async () => {
    expect(t.config.allowPrivateUpstreams).toBe(true);
    const ws = await newWorkspace();
    const baseUrl = 'http://nexus-test-does-not-exist.invalid';
    const created = await createProviderConnection({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { name: 'typo', protocolProfile: 'openai', baseUrl, apiKey: OPENAI_KEY },
    });
    expect(created.response.status).toBe(400);
    expect(errorOf(created)).toMatchObject({ code: 'invalid_base_url', param: 'baseUrl' });
    expect(await t.database.db('provider_connections').where({ workspace_id: ws.id }).count('* as n')).toEqual([{ n: 0n }]);

    const tested = await testProviderConnection({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { protocolProfile: 'openai', baseUrl, apiKey: OPENAI_KEY },
    });
    expect(tested.response.status).toBe(400);
    expect(errorOf(tested)).toMatchObject({ code: 'invalid_base_url', param: 'baseUrl' });

    const conn = await newConnection(ws.id);
    const moved = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { baseUrl, apiKey: OPENAI_KEY },
    });
    expect(moved.response.status).toBe(400);
    expect(errorOf(moved)).toMatchObject({ code: 'invalid_base_url', param: 'baseUrl' });
    expect((await getProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } })).data).toEqual(conn);
  });

  it('answers 404 for an unknown workspace, 400 for a malformed id, 409 for an archived one', async () => {
    const body = { name: 'x', protocolProfile: 'openai' as const, baseUrl: openaiUp.url, apiKey: OPENAI_KEY };
    const missing = await createProviderConnection({ client: t.client, path: { workspaceId: MISSING_ID }, body });
    expect(missing.response.status).toBe(404);
    expect(errorOf(missing).code).toBe('workspace_not_found');
    const bad = await createProviderConnection({ client: t.client, path: { workspaceId: 'nope' }, body });
    expect(bad.response.status).toBe(400);
    const ws = await newWorkspace();
    const archived = await archiveWorkspace({ client: t.client, path: { workspaceId: ws.id } });
    track(archived, 'workspace.archived', ws.id);
    const res = await createProviderConnection({ client: t.client, path: { workspaceId: ws.id }, body });
    expect(res.response.status).toBe(409);
    expect(errorOf(res).code).toBe('workspace_archived');
  });
});

describe('listProviderConnections', () => {
  it('pages newest first, filters by status and shows only the workspace own connections', async () => {
    const ws = await newWorkspace();
    const other = await newWorkspace();
    await newConnection(other.id);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await newConnection(ws.id, { name: `c${i}` })).id);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const res = await listProviderConnections({
        client: t.client,
        path: { workspaceId: ws.id },
        query: { limit: 2, ...(cursor ? { cursor } : {}) },
      });
      expect(res.response.status).toBe(200);
      seen.push(...res.data!.map((c) => c.id));
      expect(JSON.stringify(res.data)).not.toContain(SECRET_MARKER);
      cursor = res.response.headers.get('x-next-cursor') ?? undefined;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());

    const archived = await archiveProviderConnection({ client: t.client, path: { providerConnectionId: ids[1]! } });
    track(archived, 'provider_connection.archived', ids[1]!);
    const onlyArchived = await listProviderConnections({ client: t.client, path: { workspaceId: ws.id }, query: { status: 'ARCHIVED' } });
    expect(onlyArchived.data!.map((c) => c.id)).toEqual([ids[1]]);
    const active = await listProviderConnections({ client: t.client, path: { workspaceId: ws.id }, query: { status: 'ACTIVE' } });
    expect(active.data).toHaveLength(4);
  });

  it('answers 404 for an unknown workspace and 400 for a bad status', async () => {
    const res = await listProviderConnections({ client: t.client, path: { workspaceId: MISSING_ID } });
    expect(res.response.status).toBe(404);
    const ws = await newWorkspace();
    const bad = await raw('GET', `/admin/v1/workspaces/${ws.id}/provider-connections?status=GONE`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('status');
  });
});

describe('testProviderConnection', () => {
  it('calls the openai upstream with Bearer auth and reports an accepted key', async () => {
    const ws = await newWorkspace();
    const seen = openaiUp.requests.length;
    const res = await testProviderConnection({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: OPENAI_KEY },
    });
    expect(res.response.status).toBe(200);
    expect(res.data).toMatchObject({ accepted: true, outcome: 'reachable', httpStatus: 200 });
    expect(res.data!.latencyMs).toBeGreaterThanOrEqual(0);
    const req = openaiUp.requests.slice(seen);
    expect(req).toHaveLength(1);
    expect(req[0]).toMatchObject({ method: 'GET', url: '/v1/models' });
    expect(req[0]!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(req[0]!.headers['x-api-key']).toBeUndefined();
    // Nothing saved, nothing audited.
    expect(await t.database.db('provider_connections').where({ workspace_id: ws.id }).count('* as n')).toEqual([{ n: 0n }]);
    expect(await t.database.db('audit_logs').where({ request_id: res.response.headers.get('x-request-id') })).toEqual([]);
  });

  it('calls the anthropic upstream with x-api-key and anthropic-version', async () => {
    const ws = await newWorkspace();
    const seen = anthropicUp.requests.length;
    const res = await testProviderConnection({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { protocolProfile: 'anthropic', baseUrl: anthropicUp.url, apiKey: ANTHROPIC_KEY },
    });
    expect(res.data).toMatchObject({ accepted: true, outcome: 'reachable', httpStatus: 200 });
    const req = anthropicUp.requests[seen]!;
    expect(req).toMatchObject({ method: 'GET', url: '/v1/models' });
    expect(req.headers['x-api-key']).toBe(ANTHROPIC_KEY);
    expect(req.headers['anthropic-version']).toBe('2023-06-01');
    expect(req.headers.authorization).toBeUndefined();
  });

  it('distinguishes a rejected key, a wrong profile, an unexpected answer, an unreachable host and a timeout', async () => {
    const ws = await newWorkspace();
    const check = async (body: { protocolProfile: 'openai' | 'anthropic'; baseUrl: string; apiKey: string }) => {
      const res = await testProviderConnection({ client: t.client, path: { workspaceId: ws.id }, body });
      expect(res.response.status).toBe(200);
      expect(JSON.stringify(res.data)).not.toContain(SECRET_MARKER);
      return res.data!;
    };
    expect(await check({ protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: testProviderKey('wrong') })).toMatchObject({
      accepted: false,
      outcome: 'credentials_rejected',
      httpStatus: 401,
    });
    // The anthropic way of sending a key, to a server that expects Bearer.
    expect(await check({ protocolProfile: 'anthropic', baseUrl: openaiUp.url, apiKey: OPENAI_KEY })).toMatchObject({
      accepted: false,
      outcome: 'credentials_rejected',
    });

    openaiUp.forceStatus = 404;
    try {
      const res = await check({ protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: OPENAI_KEY });
      expect(res).toMatchObject({ accepted: false, outcome: 'unexpected_response', httpStatus: 404 });
      expect(res.message).toContain('/v1');
    } finally {
      openaiUp.forceStatus = undefined;
    }

    const unreachable = await check({ protocolProfile: 'openai', baseUrl: await refusedUrl(), apiKey: OPENAI_KEY });
    expect(unreachable).toMatchObject({ accepted: false, outcome: 'unreachable' });
    expect(unreachable.httpStatus).toBeUndefined();

    const impatient = await t.withEnv({ NEXUS_PROVIDER_PROBE_TIMEOUT_MS: '300' });
    openaiUp.delayMs = 5000;
    try {
      const started = Date.now();
      const res = await testProviderConnection({
        client: impatient.client,
        path: { workspaceId: ws.id },
        body: { protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: OPENAI_KEY },
      });
      expect(res.response.status).toBe(200);
      expect(res.data).toMatchObject({ accepted: false, outcome: 'timeout' });
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      openaiUp.delayMs = 0;
      await impatient.close();
    }
  });

  describe.each([
    ['an HTML page', 'text/html; charset=utf-8', '<!doctype html><html><body>Welcome</body></html>'],
    ['JSON-typed text that is not JSON', 'application/json', 'OK'],
    ['a JSON array', 'application/json', '[{"id":"test-model"}]'],
    ['a JSON object sent as text/plain', 'text/plain', '{"object":"list","data":[]}'],
  ])('a 2xx with %s', (_label, contentType, body) => {
    it('is unexpected_response, not accepted, for test and verify; lastVerifiedAt stays unset', async () => {
      const ws = await newWorkspace();
      const conn = await newConnection(ws.id);
      openaiUp.forceBody = { contentType, body };
      try {
        const tested = await testProviderConnection({
          client: t.client,
          path: { workspaceId: ws.id },
          body: { protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: OPENAI_KEY },
        });
        expect(tested.response.status).toBe(200);
        expect(tested.data).toMatchObject({ accepted: false, outcome: 'unexpected_response', httpStatus: 200 });
        expect(tested.data!.message).toContain('not with a JSON object');
        const verified = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
        track(verified, 'provider_connection.verified', conn.id);
        expect(verified.data).toMatchObject({ accepted: false, outcome: 'unexpected_response', httpStatus: 200 });
      } finally {
        openaiUp.forceBody = undefined;
      }
      const got = await getProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
      expect(got.data!.lastVerifiedAt).toBeUndefined();
    });
  });

  it('accepts a JSON object whatever the JSON media type parameters', async () => {
    const ws = await newWorkspace();
    openaiUp.forceBody = { contentType: 'application/json; charset=utf-8', body: '  {"object":"list","data":[]}\n' };
    try {
      const res = await testProviderConnection({
        client: t.client,
        path: { workspaceId: ws.id },
        body: { protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: OPENAI_KEY },
      });
      expect(res.data).toMatchObject({ accepted: true, outcome: 'reachable', httpStatus: 200 });
    } finally {
      openaiUp.forceBody = undefined;
    }
  });

  it('refuses a bad URL or profile with 400 and answers 404 for an unknown workspace', async () => {
    const ws = await newWorkspace();
    const bad = await testProviderConnection({
      client: t.client,
      path: { workspaceId: ws.id },
      body: { protocolProfile: 'openai', baseUrl: 'gopher://127.0.0.1', apiKey: OPENAI_KEY },
    });
    expect(bad.response.status).toBe(400);
    expect(errorOf(bad)).toMatchObject({ code: 'invalid_base_url', param: 'baseUrl' });
    const profile = await raw(
      'POST',
      `/admin/v1/workspaces/${ws.id}/provider-connections/test`,
      JSON.stringify({ protocolProfile: 'cohere', baseUrl: openaiUp.url, apiKey: OPENAI_KEY }),
    );
    expect(profile.status).toBe(400);
    expect(profile.body.error.param).toBe('protocolProfile');
    const missing = await testProviderConnection({
      client: t.client,
      path: { workspaceId: MISSING_ID },
      body: { protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: OPENAI_KEY },
    });
    expect(missing.response.status).toBe(404);
  });
});

describe('updateProviderConnection and archiveProviderConnection', () => {
  it('updates the given fields only', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id, { name: 'before', metadata: { a: 1 } });
    const renamed = await updateProviderConnection({ client: t.client, path: { providerConnectionId: conn.id }, body: { name: 'after' } });
    expect(renamed.response.status).toBe(200);
    track(renamed, 'provider_connection.updated', conn.id);
    expect(renamed.data).toMatchObject({ name: 'after', metadata: { a: 1 }, baseUrl: conn.baseUrl, secretPreview: conn.secretPreview });

    const suspended = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { status: 'SUSPENDED' },
    });
    track(suspended, 'provider_connection.updated', conn.id);
    expect(suspended.data!.status).toBe('SUSPENDED');
    const active = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { status: 'ACTIVE', metadata: { b: 2 }, upstreamTimeoutMs: 1500 },
    });
    track(active, 'provider_connection.updated', conn.id);
    expect(active.data).toMatchObject({ status: 'ACTIVE', metadata: { b: 2 }, upstreamTimeoutMs: 1500 });
    const cleared = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { upstreamTimeoutMs: null },
    });
    track(cleared, 'provider_connection.updated', conn.id);
    expect(cleared.data!.upstreamTimeoutMs).toBeUndefined();
  });

  it('checks a new baseUrl and clears lastVerifiedAt', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    const verified = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    track(verified, 'provider_connection.verified', conn.id);
    expect((await getProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } })).data!.lastVerifiedAt).toBeTruthy();

    const before = await t.database.db('provider_connections').where({ id: conn.id }).first();
    // A new path on the same origin keeps the key.
    const moved = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { baseUrl: `${openaiUp.url}/prefix/` },
    });
    expect(moved.response.status).toBe(200);
    track(moved, 'provider_connection.updated', conn.id);
    expect(moved.data!.baseUrl).toBe(`${openaiUp.url}/prefix`);
    expect(moved.data!.lastVerifiedAt).toBeUndefined();
    expect(moved.data!.secretPreview).toBe(conn.secretPreview);
    const after = await t.database.db('provider_connections').where({ id: conn.id }).first();
    expect(after.api_key_ciphertext).toBe(before.api_key_ciphertext);

    const bad = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { baseUrl: 'http://u:p@127.0.0.1:1' },
    });
    expect(bad.response.status).toBe(400);
    expect(errorOf(bad)).toMatchObject({ code: 'invalid_base_url', param: 'baseUrl' });
  });

  describe.each([
    ['another port', () => anthropicUp.url],
    ['another host', () => openaiUp.url.replace('127.0.0.1', 'localhost')],
    ['another scheme', () => openaiUp.url.replace('http:', 'https:')],
  ])('moving baseUrl to %s without apiKey', (_label, target) => {
    it('is 400 api_key_required, for a scoped key too, and changes nothing: the stored key never goes there', async () => {
      const ws = await newWorkspace();
      const conn = await newConnection(ws.id);
      const verified = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
      track(verified, 'provider_connection.verified', conn.id);
      const before = await t.database.db('provider_connections').where({ id: conn.id }).first();
      const { key } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), { name: 'pc-mover', workspaceIds: [ws.id] });
      const attacker = await startFakeUpstream('openai', []);
      try {
        for (const client of [t.client, t.clientWith(key)]) {
          const res = await updateProviderConnection({
            client,
            path: { providerConnectionId: conn.id },
            body: { baseUrl: target(), name: 'moved' },
          });
          expect(res.response.status).toBe(400);
          expect(errorOf(res)).toMatchObject({ code: 'api_key_required', param: 'apiKey', type: 'invalid_request_error' });
          expect(await t.database.db('audit_logs').where({ request_id: res.response.headers.get('x-request-id') })).toEqual([]);
        }
        expect(await t.database.db('provider_connections').where({ id: conn.id }).first()).toEqual(before);
        const check = await verifyProviderConnection({ client: t.clientWith(key), path: { providerConnectionId: conn.id } });
        track(check, 'provider_connection.verified', conn.id);
        expect(check.data).toMatchObject({ accepted: true, outcome: 'reachable' });
        expect(attacker.requests).toEqual([]);
      } finally {
        await attacker.close();
      }
    });
  });

  it('moves baseUrl to another origin with the apiKey for it: the new key goes to the new origin only', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    const verified = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    track(verified, 'provider_connection.verified', conn.id);
    const newKey = testProviderKey('moved');
    const target = await startFakeUpstream('openai', [newKey]);
    try {
      const res = await updateProviderConnection({
        client: t.client,
        path: { providerConnectionId: conn.id },
        body: { baseUrl: target.url, apiKey: newKey },
      });
      expect(res.response.status).toBe(200);
      track(res, 'provider_connection.updated', conn.id);
      expect(res.data).toMatchObject({ baseUrl: target.url, secretPreview: `sk-...${newKey.slice(-4)}` });
      expect(res.data!.lastVerifiedAt).toBeUndefined();
      expect(JSON.stringify(res.data)).not.toContain(SECRET_MARKER);
      const row = await t.database.db('provider_connections').where({ id: conn.id }).first();
      expect(openProviderApiKey(t.nexus.services.secretBox, row)).toBe(newKey);
      const audit = await t.database
        .db('audit_logs')
        .where({ request_id: res.response.headers.get('x-request-id') })
        .first();
      expect(audit.changes).toEqual({
        baseUrl: target.url,
        apiKey: '[redacted]',
        secretPreview: res.data!.secretPreview,
        previousSecretPreview: conn.secretPreview,
      });

      const check = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
      track(check, 'provider_connection.verified', conn.id);
      expect(check.data).toMatchObject({ accepted: true, outcome: 'reachable' });
      expect(target.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${newKey}`]);
    } finally {
      await target.close();
    }
  });

  it('replaces the key with apiKey alone, as a rotation does', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    const newKey = testProviderKey('patched');
    openaiUp.keys.add(newKey);
    const res = await updateProviderConnection({ client: t.client, path: { providerConnectionId: conn.id }, body: { apiKey: newKey } });
    expect(res.response.status).toBe(200);
    track(res, 'provider_connection.updated', conn.id);
    expect(res.data).toMatchObject({ baseUrl: conn.baseUrl, secretPreview: `sk-...${newKey.slice(-4)}` });
    const row = await t.database.db('provider_connections').where({ id: conn.id }).first();
    expect(openProviderApiKey(t.nexus.services.secretBox, row)).toBe(newKey);
  });

  describe.each([
    ['an empty body', '{}', null],
    ['status ARCHIVED', '{"status":"ARCHIVED"}', 'status'],
    ['a malformed apiKey', '{"apiKey":"short"}', 'apiKey'],
    ['a protocolProfile change', '{"protocolProfile":"anthropic"}', 'protocolProfile'],
    ['an empty name', '{"name":""}', 'name'],
  ])('rejects %s', (_label, body, param) => {
    it('with 400', async () => {
      const ws = await newWorkspace();
      const conn = await newConnection(ws.id);
      const res = await raw('PATCH', `/admin/v1/provider-connections/${conn.id}`, body);
      expect(res.status).toBe(400);
      expect(res.body.error.param).toBe(param);
      expect(res.text).not.toContain(SECRET_MARKER);
    });
  });

  it('archives: still readable, read-only, gone from ACTIVE lists, idempotent', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    const res = await archiveProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    expect(res.response.status).toBe(204);
    track(res, 'provider_connection.archived', conn.id);
    const got = await getProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    expect(got.data).toMatchObject({ status: 'ARCHIVED', secretPreview: conn.secretPreview });
    expect(got.data!.archivedAt).toBeTruthy();

    const update = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { status: 'ACTIVE' },
    });
    expect(update.response.status).toBe(409);
    expect(errorOf(update)).toMatchObject({ code: 'connection_archived', type: 'conflict_error' });
    const rotate = await rotateProviderSecret({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { apiKey: testProviderKey() },
    });
    expect(rotate.response.status).toBe(409);
    const verify = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    expect(verify.response.status).toBe(409);
    expect(errorOf(verify).code).toBe('connection_archived');

    const again = await archiveProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    expect(again.response.status).toBe(204);
    const audit = await t.database.db('audit_logs').where({ resource_id: conn.id, action: 'provider_connection.archived' });
    expect(audit).toHaveLength(1);
    // The gateway serves ACTIVE and SUSPENDED rows only.
    const row = await t.database.db('provider_connections').where({ id: conn.id }).first();
    expect(row.status).toBe('ARCHIVED');
  });

  it('answers 404 for an unknown id and 400 for a malformed one, on every operation', async () => {
    const path = { providerConnectionId: MISSING_ID };
    const results = [
      await getProviderConnection({ client: t.client, path }),
      await updateProviderConnection({ client: t.client, path, body: { name: 'x' } }),
      await archiveProviderConnection({ client: t.client, path }),
      await verifyProviderConnection({ client: t.client, path }),
      await rotateProviderSecret({ client: t.client, path, body: { apiKey: testProviderKey() } }),
    ];
    for (const res of results) {
      expect(res.response.status).toBe(404);
      expect(errorOf(res)).toMatchObject({ code: 'provider_connection_not_found', type: 'not_found_error' });
    }
    const bad = await getProviderConnection({ client: t.client, path: { providerConnectionId: 'not-a-uuid' } });
    expect(bad.response.status).toBe(400);
    expect(errorOf(bad).param).toBe('providerConnectionId');
  });
});

describe('verifyProviderConnection', () => {
  it('probes with the stored key and sets lastVerifiedAt on success', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    const seen = openaiUp.requests.length;
    const started = Date.now();
    const res = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    expect(res.response.status).toBe(200);
    track(res, 'provider_connection.verified', conn.id);
    expect(res.data).toMatchObject({ accepted: true, outcome: 'reachable', httpStatus: 200 });
    expect(openaiUp.requests[seen]!.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    const got = await getProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    expect(got.data!.lastVerifiedAt).toBe(res.data!.checkedAt);
    expect(Date.parse(got.data!.lastVerifiedAt!)).toBeGreaterThanOrEqual(started - 1000);
  });

  it('verifies an anthropic connection with its own auth', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id, { protocolProfile: 'anthropic', baseUrl: anthropicUp.url, apiKey: ANTHROPIC_KEY });
    const res = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    track(res, 'provider_connection.verified', conn.id);
    expect(res.data).toMatchObject({ accepted: true, outcome: 'reachable' });
  });

  it('reports a rejected key and leaves lastVerifiedAt alone; a suspended connection can be verified', async () => {
    const ws = await newWorkspace();
    const key = testProviderKey('revoked-later');
    openaiUp.keys.add(key);
    const conn = await newConnection(ws.id, { apiKey: key });
    const ok = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    track(ok, 'provider_connection.verified', conn.id);
    const verifiedAt = (await getProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } })).data!.lastVerifiedAt;
    expect(verifiedAt).toBeTruthy();

    openaiUp.keys.delete(key);
    const suspended = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: conn.id },
      body: { status: 'SUSPENDED' },
    });
    track(suspended, 'provider_connection.updated', conn.id);
    const res = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    track(res, 'provider_connection.verified', conn.id);
    expect(res.data).toMatchObject({ accepted: false, outcome: 'credentials_rejected', httpStatus: 401 });
    const got = await getProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    expect(got.data!.lastVerifiedAt).toBe(verifiedAt);
    const audit = await t.database
      .db('audit_logs')
      .where({ request_id: res.response.headers.get('x-request-id') })
      .first();
    expect(audit.changes).toEqual({ outcome: 'credentials_rejected', httpStatus: 401 });
  });

  it('answers 409 workspace_archived under an archived workspace without probing the upstream', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    const archivedWs = await archiveWorkspace({ client: t.client, path: { workspaceId: ws.id } });
    track(archivedWs, 'workspace.archived', ws.id);
    const before = await t.database.db('provider_connections').where({ id: conn.id }).first();
    const seen = openaiUp.requests.length;
    const res = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    expect(res.response.status).toBe(409);
    expect(errorOf(res)).toMatchObject({ code: 'workspace_archived', type: 'conflict_error' });
    expect(openaiUp.requests.slice(seen)).toEqual([]);
    expect(await t.database.db('provider_connections').where({ id: conn.id }).first()).toEqual(before);
    expect(await t.database.db('audit_logs').where({ resource_id: conn.id, action: 'provider_connection.verified' })).toEqual([]);
  });

  it('reports an upstream that went away as unreachable', async () => {
    const ws = await newWorkspace();
    const gone = await startFakeUpstream('openai', [OPENAI_KEY]);
    const conn = await newConnection(ws.id, { baseUrl: gone.url });
    await gone.close();
    const res = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    track(res, 'provider_connection.verified', conn.id);
    expect(res.data).toMatchObject({ accepted: false, outcome: 'unreachable' });
  });
});

describe('rotateProviderSecret', () => {
  it('replaces the key: new preview, new ciphertext, the upstream sees only the new key', async () => {
    const ws = await newWorkspace();
    const oldKey = testProviderKey('old');
    const newKey = testProviderKey('new');
    openaiUp.keys.add(oldKey);
    const conn = await newConnection(ws.id, { apiKey: oldKey });
    const verified = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    track(verified, 'provider_connection.verified', conn.id);
    const before = await t.database.db('provider_connections').where({ id: conn.id }).first();

    // The provider side: the new key is issued, the old one revoked.
    openaiUp.keys.add(newKey);
    openaiUp.keys.delete(oldKey);
    const res = await rotateProviderSecret({ client: t.client, path: { providerConnectionId: conn.id }, body: { apiKey: newKey } });
    expect(res.response.status).toBe(200);
    track(res, 'provider_connection.secret_rotated', conn.id);
    expect(res.data!.secretPreview).toBe(`sk-...${newKey.slice(-4)}`);
    expect(res.data!.secretPreview).not.toBe(conn.secretPreview);
    expect(res.data!.lastVerifiedAt).toBeUndefined();
    expect(JSON.stringify(res.data)).not.toContain(SECRET_MARKER);

    const after = await t.database.db('provider_connections').where({ id: conn.id }).first();
    expect(after.api_key_ciphertext).not.toBe(before.api_key_ciphertext);
    expect(JSON.stringify(after)).not.toContain(SECRET_MARKER);
    expect(openProviderApiKey(t.nexus.services.secretBox, after)).toBe(newKey);

    const seen = openaiUp.requests.length;
    const check = await verifyProviderConnection({ client: t.client, path: { providerConnectionId: conn.id } });
    track(check, 'provider_connection.verified', conn.id);
    expect(check.data).toMatchObject({ accepted: true, outcome: 'reachable' });
    expect(openaiUp.requests[seen]!.headers.authorization).toBe(`Bearer ${newKey}`);

    const audit = await t.database
      .db('audit_logs')
      .where({ request_id: res.response.headers.get('x-request-id') })
      .first();
    expect(audit).toMatchObject({ action: 'provider_connection.secret_rotated', resource_id: conn.id, workspace_id: ws.id });
    expect(audit.changes).toEqual({
      apiKey: '[redacted]',
      secretPreview: res.data!.secretPreview,
      previousSecretPreview: conn.secretPreview,
    });
  });

  it('serialises concurrent rotations: the stored key always matches its preview', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    const keys = Array.from({ length: 6 }, (_, i) => testProviderKey(`race${i}`));
    const results = await Promise.all(
      keys.map((apiKey) => rotateProviderSecret({ client: t.client, path: { providerConnectionId: conn.id }, body: { apiKey } })),
    );
    for (const res of results) {
      expect(res.response.status).toBe(200);
      track(res, 'provider_connection.secret_rotated', conn.id);
    }
    const row = await t.database.db('provider_connections').where({ id: conn.id }).first();
    const stored = openProviderApiKey(t.nexus.services.secretBox, row);
    expect(keys).toContain(stored);
    expect(row.secret_preview).toBe(`sk-...${stored.slice(-4)}`);
    const rotations = await t.database
      .db('audit_logs')
      .where({ resource_id: conn.id, action: 'provider_connection.secret_rotated' })
      .orderBy('id');
    expect(rotations).toHaveLength(keys.length);
    expect(rotations.at(-1).changes.secretPreview).toBe(row.secret_preview);
  });

  it('rejects a missing or malformed key with 400', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    for (const body of [
      '{}',
      '{"apiKey":"short"}',
      JSON.stringify({ apiKey: `${SECRET_MARKER} space` }),
      '{"apiKey":"sk-valid-key-1234","x":1}',
    ]) {
      const res = await raw('POST', `/admin/v1/provider-connections/${conn.id}/rotate-secret`, body);
      expect(res.status).toBe(400);
      expect(res.text).not.toContain(SECRET_MARKER);
    }
  });
});

describe('tenant isolation', () => {
  it('hides another workspace connections from a scoped key (404), and changes nothing', async () => {
    const mine = await newWorkspace('mine');
    const theirs = await newWorkspace('theirs');
    const theirConn = await newConnection(theirs.id, { name: 'theirs' });
    const { key } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), { name: 'pc-scoped', workspaceIds: [mine.id] });
    const scoped = t.clientWith(key);
    const path = { providerConnectionId: theirConn.id };

    for (const res of [
      await getProviderConnection({ client: scoped, path }),
      await updateProviderConnection({ client: scoped, path, body: { name: 'hijack' } }),
      await archiveProviderConnection({ client: scoped, path }),
      await verifyProviderConnection({ client: scoped, path }),
      await rotateProviderSecret({ client: scoped, path, body: { apiKey: testProviderKey('hijack') } }),
    ]) {
      expect(res.response.status).toBe(404);
      expect(errorOf(res).code).toBe('provider_connection_not_found');
    }
    const body = { name: 'x', protocolProfile: 'openai' as const, baseUrl: openaiUp.url, apiKey: OPENAI_KEY };
    for (const res of [
      await createProviderConnection({ client: scoped, path: { workspaceId: theirs.id }, body }),
      await listProviderConnections({ client: scoped, path: { workspaceId: theirs.id } }),
      await testProviderConnection({
        client: scoped,
        path: { workspaceId: theirs.id },
        body: { protocolProfile: 'openai', baseUrl: openaiUp.url, apiKey: OPENAI_KEY },
      }),
      await listAuditLogs({ client: scoped, path: { workspaceId: theirs.id } }),
    ]) {
      expect(res.response.status).toBe(404);
      expect(errorOf(res).code).toBe('workspace_not_found');
    }
    const unchanged = await getProviderConnection({ client: t.client, path });
    expect(unchanged.data).toEqual(theirConn);

    // The same key works on its own workspace.
    const own = await createProviderConnection({ client: scoped, path: { workspaceId: mine.id }, body });
    expect(own.response.status).toBe(201);
    track(own, 'provider_connection.created', own.data!.id);
    const audit = await t.database
      .db('audit_logs')
      .where({ request_id: own.response.headers.get('x-request-id') })
      .first();
    expect(audit.actor_key_id).not.toBe('root');
    expect((await getProviderConnection({ client: scoped, path: { providerConnectionId: own.data!.id } })).response.status).toBe(200);
  });

  it('refuses a missing or unknown management key with 401', async () => {
    const ws = await newWorkspace();
    const conn = await newConnection(ws.id);
    for (const token of [undefined, 'nx-mgmt-not-a-real-key']) {
      const res = await getProviderConnection({ client: t.clientWith(token), path: { providerConnectionId: conn.id } });
      expect(res.response.status).toBe(401);
    }
  });
});

describe('the audit trail of this file', () => {
  it('has one entry per successful mutating request, with its request id, action and no secret', async () => {
    expect(mutations.length).toBeGreaterThan(40);
    const rows = await t.database.db('audit_logs').whereIn(
      'request_id',
      mutations.map((m) => m.requestId),
    );
    const byRequest = new Map<string, any[]>();
    for (const row of rows) byRequest.set(row.request_id, [...(byRequest.get(row.request_id) ?? []), row]);
    for (const m of mutations) {
      const entries = byRequest.get(m.requestId) ?? [];
      expect(entries, `${m.action} ${m.resourceId} (request ${m.requestId})`).toHaveLength(1);
      expect(entries[0]).toMatchObject({ action: m.action, resource_id: m.resourceId });
      expect(entries[0].created_at).toBeInstanceOf(Date);
      expect(entries[0].client_address).toBeTruthy();
    }
    const created = rows.filter((r) => r.action === 'provider_connection.created');
    expect(created.every((r) => r.changes.apiKey === '[redacted]' && r.changes.secretPreview)).toBe(true);
    expect(JSON.stringify(rows)).not.toContain(SECRET_MARKER);
  });

  it('shows the same entries through listAuditLogs', async () => {
    const mine = mutations.filter((m) => m.action.startsWith('provider_connection.'));
    const sample = mine[mine.length - 1]!;
    const row = await t.database.db('audit_logs').where({ request_id: sample.requestId }).first();
    const res = await listAuditLogs({
      client: t.client,
      path: { workspaceId: row.workspace_id },
      query: { resourceId: sample.resourceId, limit: 100 },
    });
    expect(res.response.status).toBe(200);
    expect(res.data!.map((e) => e.requestId)).toContain(sample.requestId);
  });
});

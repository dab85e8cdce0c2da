/**
 * Every status of the gateway's error table (the contract's gateway operations), produced through HTTP, each
 * checked against the contract and, where the request must not go upstream,
 * against what the upstream saw.
 */
import { SECRET_MARKER } from '../security/secret-marker.js';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  activateWorkspaceAccess,
  archiveProviderConnection,
  archiveWorkspace,
  issueInferenceKey,
  revokeInferenceKey,
  suspendWorkspaceAccess,
  updateProviderConnection,
} from '../support/sdk.js';
import { refusedUrl, startOpenAiUpstream, type FakeUpstream } from '../support/fake-upstreams.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { validateGatewayResponse } from '../support/contract.js';
import { createTenant, gatewayFetch, periodOf, type Tenant } from './gateway-support.js';

const CACHE_TTL_MS = 200;
let t: TestApp;
let up: FakeUpstream;
let a: Tenant;
let b: Tenant;
const KEY = `${SECRET_MARKER}-upstream-errors-0123456789`;
const chatBody = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });

beforeAll(async () => {
  t = await startTestApp({ env: { NEXUS_AUTH_CACHE_TTL_MS: String(CACHE_TTL_MS) } });
  up = await startOpenAiUpstream({ apiKey: KEY });
  // Tenant a refuses a cap above maxOutputTokens (the 400 below); clamping is tested in gateway.pricing.test.ts.
  a = await createTenant(t, { baseUrl: up.url, providerKey: KEY, outputCapPolicy: 'refuse' });
  b = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

const waitCache = () => new Promise((r) => setTimeout(r, CACHE_TTL_MS + 50));

async function call(
  tenant: Tenant,
  init: { path?: string; method?: string; headers?: Record<string, string>; body?: string; connectionId?: string } = {},
) {
  const base = `${t.url}/providers/${init.connectionId ?? tenant.connectionId}`;
  const res = await gatewayFetch()(`${base}/${init.path ?? 'v1/chat/completions'}`, {
    method: init.method ?? 'POST',
    headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json', ...init.headers },
    body: init.method === 'GET' ? undefined : (init.body ?? chatBody),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/** A raw request: the path goes on the wire exactly as written (fetch would normalise it). */
function rawCall(path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers }> {
  return new Promise((resolve, reject) => {
    const url = new URL(t.url);
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path,
        headers: { authorization: `Bearer ${a.apiKey}`, 'content-type': 'application/json', ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const h = new Headers();
          const plain: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers))
            if (typeof v === 'string') {
              h.set(k, v);
              plain[k] = v;
            }
          const text = Buffer.concat(chunks).toString('utf8');
          const body = text ? JSON.parse(text) : undefined;
          validateGatewayResponse('POST', res.statusCode!, plain, body);
          resolve({ status: res.statusCode!, body, headers: h });
        });
      },
    );
    req.on('error', reject);
    req.end(chatBody);
  });
}

describe('400: unsafe path or header, invalid proxy request', () => {
  describe.each([
    ['a dot-dot segment', 'v1/../admin'],
    ['an encoded dot-dot', 'v1/%2e%2e/admin'],
    ['a double-encoded dot-dot', 'v1/%252e%252e/admin'],
    ['a mixed-case encoded dot-dot', 'v1/%2E./admin'],
    ['an encoded slash', 'v1%2fchat/completions'],
    ['an encoded backslash', 'v1%5c..%5cadmin'],
    ['a backslash', 'v1\\chat'],
    ['an encoded NUL', 'v1/chat%00/completions'],
    ['an encoded CR LF', 'v1/chat%0d%0aHost:%20evil/completions'],
    ['an absolute URL', 'http://evil.example/v1/chat/completions'],
    ['a protocol-relative URL', '/evil.example/v1/chat/completions'],
    ['a dot segment', 'v1/./chat/completions'],
    [
      'a model ARN with an encoded slash (Bedrock reads it, this connection is not one)',
      'model/arn%3Aaws%3Abedrock%3Ax%3A1%3Ap%2Fus.x/foo',
    ],
  ])('%s', (_name, providerPath) => {
    it('is refused with 400 unsafe_proxy_request and never reaches the upstream', async () => {
      const before = up.requests.length;
      const res = await rawCall(`/providers/${a.connectionId}/${providerPath}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'unsafe_proxy_request', type: 'invalid_request_error' });
      expect(res.headers.get('x-nexus-request-id')).toBeTruthy();
      expect(up.requests.length).toBe(before);
    });
  });

  it('refuses an absolute-form request target', async () => {
    const before = up.requests.length;
    const res = await rawCall(`http://evil.example/providers/${a.connectionId}/v1/chat/completions`);
    expect(res.status).toBe(400);
    expect(up.requests.length).toBe(before);
  });

  it('never forwards a header value holding CR/LF (the request dies at the parser with 400 and the Error body)', async () => {
    const before = up.requests.length;
    const url = new URL(t.url);
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.write(
          `POST /providers/${a.connectionId}/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.apiKey}\r\n` +
            `X-Injected: a\rInjected: b\r\nContent-Type: application/json\r\nContent-Length: ${chatBody.length}\r\n\r\n${chatBody}`,
        );
      });
      let data = '';
      socket.on('data', (d) => (data += d.toString()));
      socket.on('close', () => resolve(data));
      socket.on('error', () => resolve(data));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    expect(answer).toMatch(/\r\nX-Nexus-Request-Id: [\da-f-]{36}\r\n/);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    expect(body.error).toMatchObject({ code: 'malformed_http', type: 'invalid_request_error' });
    expect(up.requests.length).toBe(before);
  });

  it('refuses max_tokens above the strategy maxOutputTokens, and a non-JSON body on a metered endpoint', async () => {
    const before = up.requests.length;
    const big = await call(a, { body: JSON.stringify({ model: 'm', messages: [], max_tokens: 5000 }) });
    expect(big.status).toBe(400);
    expect(big.body.error).toMatchObject({ code: 'max_tokens_exceeded', param: 'max_tokens' });
    const notJson = await call(a, { body: 'not json' });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.code).toBe('invalid_json');
    expect(up.requests.length).toBe(before);
  });

  it('reads both chat caps (a server may honour either), refuses a 0 cap, a non-boolean stream and non-object stream_options', async () => {
    const before = up.requests.length;
    const cases: [Record<string, unknown>, string, string][] = [
      // A server reading `max_completion_tokens or max_tokens` would take 0 as no cap and use max_tokens.
      [{ max_completion_tokens: 0, max_tokens: 100000 }, 'invalid_parameter', 'max_completion_tokens'],
      [{ max_completion_tokens: 10, max_tokens: 5000 }, 'max_tokens_exceeded', 'max_tokens'],
      [{ max_completion_tokens: 5, max_tokens: 'lots' }, 'invalid_parameter', 'max_tokens'],
      [{ max_tokens: 10, stream: 'yes' }, 'invalid_parameter', 'stream'],
      [{ max_tokens: 10, stream: true, stream_options: 'x' }, 'invalid_parameter', 'stream_options'],
    ];
    for (const [fields, code, param] of cases) {
      const res = await call(a, { body: JSON.stringify({ model: 'm', messages: [], ...fields }) });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code, param });
    }
    expect(up.requests.length).toBe(before);
  });

  it('refuses a compressed body on a metered endpoint: it would bound one body and send the upstream another', async () => {
    const before = up.requests.length;
    const res = await call(a, { headers: { 'content-encoding': 'gzip' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'content-encoding' });
    expect(res.body.error.message).toContain('Content-Encoding: gzip');
    expect(up.requests.length).toBe(before);
  });
});

describe('401: no valid inference key', () => {
  it.each([
    ['no credential', {}, 'missing_credentials'],
    ['an unknown key', { authorization: 'Bearer nx-test-unknownunknownunknownunknownunknown00000' }, 'invalid_inference_key'],
    ['the root Management Key', { authorization: `Bearer ${TEST_ROOT_KEY}` }, 'invalid_inference_key'],
  ])('%s', async (_n, headers, code) => {
    const res = await gatewayFetch()(`${a.gatewayBaseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: chatBody,
    });
    expect(res.status).toBe(401);
    expect((await res.json()).error).toMatchObject({ code, type: 'authentication_error' });
    expect(res.headers.get('x-nexus-metering-status')).toBe('unmetered');
  });

  it('a revoked key stops working within the cache bound', async () => {
    const issued = await issueInferenceKey({ client: t.client, path: { accessId: a.accessId }, body: { name: 'to revoke' } });
    expect(issued.response.status).toBe(201);
    const key = { ...a, apiKey: issued.data!.apiKey };
    expect((await call(key)).status).toBe(200);
    const revoked = await revokeInferenceKey({ client: t.client, path: { accessId: a.accessId, keyId: issued.data!.id } });
    expect(revoked.response.status).toBeLessThan(300);
    await waitCache();
    const res = await call(key);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_inference_key');
  });

  it('an expired key is refused', async () => {
    const issued = await issueInferenceKey({ client: t.client, path: { accessId: a.accessId }, body: { name: 'short' } });
    await t.database
      .db('inference_keys')
      .where({ id: issued.data!.id })
      .update({ expires_at: new Date(Date.now() - 1000) });
    const res = await call({ ...a, apiKey: issued.data!.apiKey });
    expect(res.status).toBe(401);
  });
});

describe('403: access unavailable or connection not allowed', () => {
  it('a suspended access is refused within the cache bound, and works again once activated', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    expect((await call(tenant)).status).toBe(200);
    const suspended = await suspendWorkspaceAccess({ client: t.client, path: { accessId: tenant.accessId } });
    expect(suspended.response.status).toBe(200);
    await waitCache();
    const before = up.requests.length;
    const res = await call(tenant);
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'access_suspended', type: 'permission_error' });
    expect(res.headers.get('x-nexus-quota-reset')).toBeTruthy();
    expect(up.requests.length).toBe(before);
    await activateWorkspaceAccess({ client: t.client, path: { accessId: tenant.accessId } });
    await waitCache();
    expect((await call(tenant)).status).toBe(200);
  });

  it('a suspended connection is refused', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    const res1 = await updateProviderConnection({
      client: t.client,
      path: { providerConnectionId: tenant.connectionId },
      body: { status: 'SUSPENDED' },
    });
    expect(res1.response.status).toBe(200);
    await waitCache();
    const res = await call(tenant);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('connection_suspended');
  });

  it('an archived workspace stops its gateway traffic', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    await archiveWorkspace({ client: t.client, path: { workspaceId: tenant.workspaceId } });
    await waitCache();
    const res = await call(tenant);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('workspace_archived_gateway');
  });
});

describe("404: no active connection with that id in the key's workspace", () => {
  it("an unknown id, another workspace's connection, a malformed id, an archived connection", async () => {
    const unknown = await call(a, { connectionId: '01900000-0000-7000-8000-000000000000' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('provider_connection_not_found');
    const other = await call(a, { connectionId: b.connectionId });
    expect(other.status).toBe(404);
    const malformed = await call(a, { connectionId: 'not-a-uuid' });
    expect(malformed.status).toBe(404);
    expect(malformed.body.error.code).toBe('provider_connection_not_found');
    // The key is checked first: a bad key with a malformed id is a 401, not a 404.
    const badKey = await call(a, { connectionId: 'not-a-uuid', headers: { authorization: 'Bearer nx-test-not-a-real-key' } });
    expect(badKey.status).toBe(401);
    expect(badKey.body.error.code).toBe('invalid_inference_key');
    // No connection id at all: the gateway's route, named.
    const bare = await rawCall('/providers');
    expect(bare.status).toBe(404);
    expect(bare.body.error).toMatchObject({ code: 'route_not_found' });
    expect(bare.body.error.message).toContain('/providers/{providerConnectionId}/{providerPath}');
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY });
    await archiveProviderConnection({ client: t.client, path: { providerConnectionId: tenant.connectionId } });
    await waitCache();
    expect((await call(tenant)).status).toBe(404);
  });
});

describe('409: no usage inspector and no unmetered passthrough', () => {
  it('refuses an unmetered endpoint without calling the upstream', async () => {
    const before = up.requests.length;
    const res = await call(a, { method: 'GET', path: 'v1/files' });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'unmetered_endpoint', type: 'conflict_error' });
    expect(up.requests.length).toBe(before);
  });

  it("carries the quota the access's last calls left, not the lookup's older figure", async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 1_000_000n });
    const ok = await call(tenant); // 10 input + 5 output tokens at 1 and 2 units: 20 units
    expect(ok.status).toBe(200);
    const refused = await call(tenant, { method: 'GET', path: 'v1/files' });
    expect(refused.status).toBe(409);
    expect(refused.headers.get('x-nexus-quota-remaining')).toBe('999980');
  });
});

describe('429: not enough quota', () => {
  it('refuses before the upstream is called, with reset_at', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 50n });
    const before = up.requests.length;
    const res = await call(tenant);
    expect(res.status).toBe(429);
    expect(res.body.error).toMatchObject({ code: 'quota_insufficient', type: 'quota_exceeded_error' });
    expect(res.body.error.reset_at).toBe(res.headers.get('x-nexus-quota-reset'));
    expect(res.headers.get('x-nexus-quota-remaining')).toBe('50');
    expect(up.requests.length).toBe(before);
    const period = await periodOf(t, tenant.accessId);
    expect(period.reserved).toBe(0n);
    expect(period.consumed).toBe(0n);
  });

  it('tells the official SDKs not to retry it: one call, one refusal (a 502 leaves their retries alone)', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, quotaUnits: 50n });
    const client = new OpenAI({ baseURL: tenant.gatewayBaseUrl + '/v1', apiKey: tenant.apiKey, fetch: gatewayFetch() });
    const error = await client.chat.completions
      .create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect((error as InstanceType<typeof OpenAI.RateLimitError>).headers?.get('x-should-retry')).toBe('false');
    await t.nexus.gateway.drain();
    const invocations = await t.database.db('invocations').where({ workspace_access_id: tenant.accessId });
    expect(invocations).toHaveLength(1);
    const unreachable = await createTenant(t, { baseUrl: await refusedUrl(), providerKey: KEY });
    expect((await call(unreachable)).headers.get('x-should-retry')).toBeNull();
  });

  it('refuses a bound no period can hold (an extreme price times 128 choices), not a 500', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, outputPpm: 9_000_000_000_000_000_000n });
    const before = up.requests.length;
    const res = await call(tenant, { body: JSON.stringify({ model: 'gpt-test', messages: [], n: 128 }) });
    expect(res.status).toBe(429);
    expect(res.body.error.message).toContain('more than a quota period can hold');
    expect(up.requests.length).toBe(before);
  });
});

describe('400: more choices than any provider allows', () => {
  it('refuses n or best_of above 128 before the upstream is called', async () => {
    const before = up.requests.length;
    for (const [param, value] of [
      ['n', 1e20],
      ['best_of', 129],
    ] as const) {
      const res = await call(a, { body: JSON.stringify({ model: 'gpt-test', messages: [], max_tokens: 5, [param]: value }) });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_parameter', param });
    }
    expect(up.requests.length).toBe(before);
  });
});

describe('502: no answer from the upstream', () => {
  it('a refused connection', async () => {
    const tenant = await createTenant(t, { baseUrl: await refusedUrl(), providerKey: KEY });
    const res = await call(tenant);
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'upstream_unavailable', type: 'upstream_error' });
    await t.nexus.gateway.drain();
    expect((await periodOf(t, tenant.accessId)).reserved).toBe(0n);
  });

  it('an upstream that hangs past the connection timeout', async () => {
    const tenant = await createTenant(t, { baseUrl: up.url, providerKey: KEY, upstreamTimeoutMs: 1000 });
    const started = Date.now();
    const res = await call(tenant, { headers: { 'x-fake-fault': 'hang' } });
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('upstream_timeout');
    // undici's timers tick every half second: the timeout fires within about that much of its value.
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeLessThan(2500);
  });

  it('an upstream that resets the connection before answering', async () => {
    const res = await call(a, { headers: { 'x-fake-fault': 'reset' } });
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('upstream_unavailable');
    await t.nexus.gateway.drain();
    expect((await periodOf(t, a.accessId)).reserved).toBe(0n);
  });
});

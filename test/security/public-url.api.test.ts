/**
 * No host from the request without trust: every page and operation that writes an absolute URL (/docs,
 * /openapi.json, a connection's and a route's gatewayBaseUrl, webhookUrl, a list's Link) is sent a hostile Host and
 * X-Forwarded-Host.
 * Without NEXUS_TRUST_PROXY, or from a peer outside its list, no answer names the hostile host; from a trusted
 * peer the forwarded origin is used; NEXUS_PUBLIC_URL wins over any header.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createProviderConnection, createRoute, createWorkspace } from '../support/sdk.js';
import { startTestApp, TEST_ENCRYPTION_KEY, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

const EVIL = 'evil.example';
let t: TestApp;
let workspaceId: string;

beforeAll(async () => {
  t = await startTestApp();
  const ws = await createWorkspace({ client: t.client, body: { name: 'public-url' } });
  workspaceId = ws.data!.id;
  // The lists hold two connections from the first test on: a next page, so a Link.
  const seed = await createProviderConnection({
    client: t.client,
    path: { workspaceId },
    body: { name: 'seed', protocolProfile: 'openai', baseUrl: 'http://127.0.0.1:9', apiKey: 'sk-test-public-url-seed-0123456789' },
  });
  expect(seed.response.status).toBe(201);
  // And two routes from the first test on.
  const route = await createRoute({
    client: t.client,
    path: { workspaceId },
    body: { name: 'seed', targets: [{ providerConnectionId: seed.data!.id }] },
  });
  expect(route.response.status).toBe(201);
}, 60_000);
afterAll(async () => {
  await t?.close();
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A request with exactly these headers (fetch will not send a Host of its own choosing). */
function send(base: string, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  const url = new URL(path, base);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: url.pathname + url.search,
        headers: {
          authorization: `Bearer ${TEST_ROOT_KEY}`,
          ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

let seq = 0;

/** Every answer that writes an absolute URL, to requests sent with these headers. */
async function urlWritingAnswers(base: string, headers: Record<string, string>): Promise<Record<string, Answer>> {
  const n = ++seq;
  const docs = await send(base, 'GET', '/docs', headers);
  const contract = await send(base, 'GET', '/openapi.json', headers);
  const createConnection = await send(base, 'POST', `/admin/v1/workspaces/${workspaceId}/provider-connections`, headers, {
    name: `conn-${n}`,
    protocolProfile: 'openai',
    baseUrl: 'http://127.0.0.1:9',
    apiKey: `sk-test-public-url-${n}-0123456789`,
  });
  expect(createConnection.status, createConnection.body).toBe(201);
  const connectionId = JSON.parse(createConnection.body).id as string;
  const getConnection = await send(base, 'GET', `/admin/v1/provider-connections/${connectionId}`, headers);
  const list = await send(base, 'GET', `/admin/v1/workspaces/${workspaceId}/provider-connections?limit=1`, headers);
  const createBilling = await send(base, 'POST', `/admin/v1/workspaces/${workspaceId}/billing-connections`, headers, {
    name: `billing-${n}`,
    provider: 'STRIPE',
    kind: 'HOSTED',
    mode: 'TEST',
  });
  expect(createBilling.status, createBilling.body).toBe(201);
  const billingList = await send(base, 'GET', `/admin/v1/workspaces/${workspaceId}/billing-connections?limit=1`, headers);
  const createRoute = await send(base, 'POST', `/admin/v1/workspaces/${workspaceId}/routes`, headers, {
    name: `route-${n}`,
    targets: [{ providerConnectionId: connectionId }],
  });
  expect(createRoute.status, createRoute.body).toBe(201);
  const routeId = JSON.parse(createRoute.body).id as string;
  const getRoute = await send(base, 'GET', `/admin/v1/routes/${routeId}`, headers);
  const updateRoute = await send(base, 'PATCH', `/admin/v1/routes/${routeId}`, headers, { name: `route-${n}-renamed` });
  const routeList = await send(base, 'GET', `/admin/v1/workspaces/${workspaceId}/routes?limit=1`, headers);
  const read = { docs, contract, getConnection, list, billingList, getRoute, updateRoute, routeList };
  for (const [name, answer] of Object.entries(read)) expect(answer.status, name).toBe(200);
  expect(list.headers.link, 'the list has a next page').toBeDefined();
  expect(routeList.headers.link, 'the list of routes has a next page').toBeDefined();
  return { ...read, createConnection, createBilling, createRoute };
}

/** The origins the URLs in these answers start with. */
function originsIn(answers: Record<string, Answer>) {
  const json = (a: Answer) => JSON.parse(a.body);
  return {
    docsServer: /&quot;url&quot;:&quot;([^&]*)&quot;/.exec(answers.docs!.body)?.[1],
    contractServer: json(answers.contract!).servers[0].url as string,
    gatewayBaseUrl: json(answers.createConnection!).gatewayBaseUrl as string,
    gatewayBaseUrlOnGet: json(answers.getConnection!).gatewayBaseUrl as string,
    gatewayBaseUrlInList: json(answers.list!)[0].gatewayBaseUrl as string,
    webhookUrl: json(answers.createBilling!).webhookUrl as string,
    webhookUrlInList: json(answers.billingList!)[0].webhookUrl as string,
    link: answers.list!.headers.link as string,
    billingLink: answers.billingList!.headers.link as string | undefined,
    routeBaseUrls: [
      json(answers.createRoute!).gatewayBaseUrl as string,
      json(answers.getRoute!).gatewayBaseUrl as string,
      json(answers.updateRoute!).gatewayBaseUrl as string,
      json(answers.routeList!)[0].gatewayBaseUrl as string,
    ],
    routeLink: answers.routeList!.headers.link as string,
  };
}

const hostile: [string, Record<string, string>][] = [
  ['Host', { host: EVIL }],
  ['X-Forwarded-Host and -Proto', { 'x-forwarded-host': EVIL, 'x-forwarded-proto': 'https' }],
  ['both, with a port', { host: `${EVIL}:8443`, 'x-forwarded-host': `${EVIL}:8443, proxy.internal`, 'x-forwarded-proto': 'https' }],
];

/** No URL, header or page of these answers names the hostile host; each starts with `origin`. */
function expectNoHostile(answers: Record<string, Answer>, origin: string) {
  for (const [name, answer] of Object.entries(answers)) {
    expect(`${JSON.stringify(answer.headers)}\n${answer.body}`, name).not.toContain(EVIL);
  }
  const origins = originsIn(answers);
  expect(origins.docsServer).toBe(origin);
  expect(origins.contractServer).toBe(origin);
  for (const url of [origins.gatewayBaseUrl, origins.gatewayBaseUrlOnGet, origins.gatewayBaseUrlInList, ...origins.routeBaseUrls])
    expect(url).toMatch(new RegExp(`^${origin}/providers/`));
  for (const url of [origins.webhookUrl, origins.webhookUrlInList]) expect(url).toMatch(new RegExp(`^${origin}/webhooks/billing/`));
  expect(origins.link).toMatch(new RegExp(`^<${origin}/admin/v1/workspaces/`));
  expect(origins.routeLink).toMatch(new RegExp(`^<${origin}/admin/v1/workspaces/`));
}

describe('without NEXUS_TRUST_PROXY', () => {
  it.each(hostile)('a hostile %s is in no answer: the URLs start with the listen address', async (_name, headers) => {
    const answers = await urlWritingAnswers(t.url, headers);
    expectNoHostile(answers, t.url);
    // The reference's own assets load by relative URL.
    expect(answers.docs!.body).toContain('src="docs/standalone.js"');
    expect(answers.docs!.body).toContain('data-url="openapi.json"');
  });
});

describe('NEXUS_TRUST_PROXY', () => {
  it('a list of proxies that does not hold the peer: their headers are not believed', async () => {
    const app = await t.withEnv({ NEXUS_TRUST_PROXY: '10.0.0.0/8, 192.168.1.7, ::1' });
    try {
      for (const [, headers] of hostile) expectNoHostile(await urlWritingAnswers(app.url, headers), app.url);
    } finally {
      await app.close();
    }
  });

  it.each([['true'], ['127.0.0.1/8'], ['loopback'], ['127.0.0.1']])(
    '%s (the peer is trusted): the URLs start with the forwarded origin, X-Forwarded-Host before Host',
    async (trust) => {
      const app = await t.withEnv({ NEXUS_TRUST_PROXY: trust });
      try {
        const byHost = originsIn(await urlWritingAnswers(app.url, { host: 'nexus.example.test:9999' }));
        expect(byHost.contractServer).toBe('http://nexus.example.test:9999');
        expect(byHost.gatewayBaseUrl).toMatch(/^http:\/\/nexus\.example\.test:9999\/providers\//);
        for (const url of byHost.routeBaseUrls) expect(url).toMatch(/^http:\/\/nexus\.example\.test:9999\/providers\//);
        const forwarded = originsIn(
          await urlWritingAnswers(app.url, {
            host: 'internal:8080',
            'x-forwarded-host': 'gw.example.test, proxy.internal',
            'x-forwarded-proto': 'https',
          }),
        );
        for (const url of [forwarded.docsServer, forwarded.contractServer]) expect(url).toBe('https://gw.example.test');
        for (const url of [
          forwarded.gatewayBaseUrl,
          forwarded.gatewayBaseUrlOnGet,
          forwarded.gatewayBaseUrlInList,
          forwarded.webhookUrl,
          forwarded.webhookUrlInList,
          ...forwarded.routeBaseUrls,
        ]) {
          expect(url).toMatch(/^https:\/\/gw\.example\.test\//);
        }
        expect(forwarded.link).toMatch(/^<https:\/\/gw\.example\.test\/admin\/v1\//);
        expect(forwarded.routeLink).toMatch(/^<https:\/\/gw\.example\.test\/admin\/v1\//);
        // A header that names no host is not written into any URL, even from a trusted proxy.
        expectNoHostile(
          await urlWritingAnswers(app.url, { 'x-forwarded-host': `${EVIL}/"><script>`, 'x-forwarded-proto': 'javascript' }),
          app.url,
        );
      } finally {
        await app.close();
      }
    },
  );

  it('NEXUS_PUBLIC_URL wins over any header, trusted or not', async () => {
    const app = await t.withEnv({ NEXUS_PUBLIC_URL: 'https://gw.example.com/nexus', NEXUS_TRUST_PROXY: 'true' });
    try {
      for (const [, headers] of hostile) expectNoHostile(await urlWritingAnswers(app.url, headers), 'https://gw.example.com/nexus');
    } finally {
      await app.close();
    }
  });

  const base = { NEXUS_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY };
  it.each([['yes'], ['10.0.0.0/33'], ['10.0.0.1,proxy.internal'], ['::1/129'], ['10.0.0.0/8/1'], ['']])(
    'refuses %j with a message naming the setting and the entry (empty: the default, false)',
    (value) => {
      if (value === '') {
        expect(loadConfig({ ...base, NEXUS_TRUST_PROXY: value }).trustProxy).toBe(false);
        return;
      }
      expect(() => loadConfig({ ...base, NEXUS_TRUST_PROXY: value })).toThrow(ConfigError);
      const entry = value.includes(',') ? 'proxy.internal' : value;
      expect(() => loadConfig({ ...base, NEXUS_TRUST_PROXY: value })).toThrow(
        `NEXUS_TRUST_PROXY must be false, true, or a comma-separated list of the proxies' addresses or CIDR ranges (10.0.0.0/8, ::1, loopback): '${entry}' is none of these`,
      );
    },
  );

  it('reads addresses, ranges and the names express gives them', () => {
    expect(loadConfig({ ...base, NEXUS_TRUST_PROXY: 'TRUE' }).trustProxy).toBe(true);
    expect(loadConfig({ ...base, NEXUS_TRUST_PROXY: ' 10.1.2.3 , fd00::/8,loopback' }).trustProxy).toEqual([
      '10.1.2.3/32',
      'fd00::/8',
      '127.0.0.1/8',
      '::1/128',
    ]);
  });
});

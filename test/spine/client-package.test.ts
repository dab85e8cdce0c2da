/**
 * The generated client is a package another project can install: `npm pack` in generated/ gives a
 * tarball with types; a fresh project installs it, typechecks against it under --strict
 * --exactOptionalPropertyTypes and calls a running Nexus with it, on Node 24 and on Node 22:
 * - the function API: every list operation through the pager, the 64-bit string type, errors thrown as
 *   NexusError, a list followed across pages, no export named like a global;
 * - the resource API (`new Nexus(...)`): every area (examples/quickstart.ts, run as it is), a provider call
 *   through the Gateway to a real upstream, pagination, each error class, a 503 retried with the same
 *   Idempotency-Key (and through the function API too), a PUT and a DELETE retried without one, a timeout, a
 *   connection error, no silent default client, optional fields given undefined, and `require()` from CommonJS;
 * - routes (one served through the Gateway), money (a price, a budget, the CSV exports read as streams) and
 *   webhooks (a real delivery to a receiver in the consumer, checked with `nexus.webhooks.verify()`), and the
 *   contract's enums refusing a misspelt event type or protocol when the consumer compiles.
 * Faults Nexus does not make on demand (a 503 once, a 429, a 500, a slow answer) come from a proxy in front
 * of it that the consumer asks for one with an `x-fault` header.
 */
import { execFile, execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { copyFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { projectRoot } from '../support/paths.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';
import { systemActor } from '../../src/domain/actor.js';
import { startFakeUpstream, testProviderKey, type FakeUpstream } from '../support/fake-upstreams.js';
import { provisionTenant } from '../support/tenant.js';

interface Contract {
  info: { version: string };
  paths: Record<string, Record<string, { operationId?: string; parameters?: { $ref?: string; name?: string }[] }>>;
}

const contract = JSON.parse(readFileSync(join(projectRoot, 'generated', 'openapi.json'), 'utf8')) as Contract;

/** The list operations: those that take a cursor (and answer X-Next-Cursor). */
const listOperations = Object.entries(contract.paths).flatMap(([path, item]) =>
  Object.values(item)
    .filter((op) => op.operationId && (op.parameters ?? []).some((p) => p.$ref === '#/components/parameters/Cursor'))
    .map((op) => ({ operationId: op.operationId!, pathParams: [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!) })),
);

let t: TestApp;
let dir: string;
let proxy: Server;
let proxyUrl: string;
/** The bin/ directory of a Node 22, the oldest line the package supports, beside this Node 24. */
let node22: string;
let upstream: FakeUpstream | undefined;
/** What the proxy saw of each fault asked (by its x-fault header): the Idempotency-Key of each request, in order. */
const faultRequests = new Map<string, string[]>();

/**
 * A proxy in front of the test Nexus. Without an `x-fault` header it forwards the request; with one it
 * answers as asked: `fail-once:ID` a 503 (Retry-After: 0) the first time, then forwards; `status:N` an
 * Error body with that status; `delay:MS` forwards after MS milliseconds.
 */
async function startFaultProxy(target: string): Promise<Server> {
  const server = createServer((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const fault = req.headers['x-fault'] as string | undefined;
      if (fault) {
        const seen = faultRequests.get(fault) ?? [];
        seen.push(String(req.headers['idempotency-key'] ?? ''));
        faultRequests.set(fault, seen);
        const [kind, arg] = fault.split(':');
        const refuse = (status: number, code: string) => {
          res.writeHead(status, { 'content-type': 'application/json', 'retry-after': '0', 'x-request-id': `proxy-${status}` });
          res.end(JSON.stringify({ error: { message: `refused by the test proxy (${status})`, type: 'api_error', code, param: null } }));
        };
        if (kind === 'fail-once' && seen.length === 1) return refuse(503, 'not_ready');
        if (kind === 'status')
          return refuse(Number(arg), Number(arg) === 429 ? 'rate_limited' : Number(arg) === 503 ? 'not_ready' : 'internal_error');
        if (kind === 'delay') await new Promise((resolve) => setTimeout(resolve, Number(arg)));
      }
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string' && !['host', 'connection', 'content-length', 'x-fault'].includes(name)) headers.set(name, value);
      }
      const answer = await fetch(target + req.url, {
        method: req.method!,
        headers,
        ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
      });
      const body = Buffer.from(await answer.arrayBuffer());
      const out: Record<string, string> = {};
      answer.headers.forEach((value, name) => {
        if (!['content-encoding', 'transfer-encoding', 'content-length', 'connection', 'keep-alive'].includes(name)) out[name] = value;
      });
      if (!res.destroyed) res.writeHead(answer.status, out).end(body);
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

beforeAll(async () => {
  // Before the app starts: installing it the first time takes a while.
  node22 = (
    await promisify(execFile)('bash', [join(projectRoot, 'scripts', 'install-node.sh'), '22'], { cwd: projectRoot, encoding: 'utf8' })
  ).stdout.trim();
  dir = mkdtempSync(join(tmpdir(), 'nexus-client-'));
  const npm = (args: string[], cwd: string) =>
    execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, stdio: 'pipe', encoding: 'utf8' });
  npm(['pack', '--pack-destination', dir], join(projectRoot, 'generated'));
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
  expect(tarball).toBe(`nexus-gateway-client-${contract.info.version}.tgz`);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  // Its one dependency, standardwebhooks (nexus.webhooks.verify), comes from npm's cache when it is there.
  npm(['install', '--prefer-offline', `./${tarball}`], dir);
  // After the synchronous steps above, which would block the app's event loop (it answers 503 after a long block).
  // Webhooks are sent within 50 ms of being queued.
  t = await startTestApp({ env: { NEXUS_EVENTS_POLL_MS: '50' } });
  proxy = await startFaultProxy(t.url);
  proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
}, 120_000);
afterAll(async () => {
  await upstream?.close();
  proxy?.closeAllConnections();
  await new Promise((resolve) => proxy?.close(resolve));
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

const compilerOptions = {
  target: 'ES2022',
  module: 'NodeNext',
  moduleResolution: 'NodeNext',
  lib: ['ES2022', 'DOM'],
  types: [],
  strict: true,
  exactOptionalPropertyTypes: true,
  outDir: 'out',
  skipLibCheck: false,
};

it('installs with the API version, typechecks, throws NexusErrors and pages through a list', async () => {
  const installed = JSON.parse(readFileSync(join(dir, 'node_modules', '@nexus-gateway', 'client', 'package.json'), 'utf8')) as {
    version: string;
  };
  expect(installed.version).toBe(contract.info.version);

  writeFileSync(
    join(dir, 'main.ts'),
    `import { createNexusClient, createWorkspace, getWorkspace, listWorkspaces, NexusError, paginate, type WorkspaceDto } from '@nexus-gateway/client';
let listRequests = 0;
const client = createNexusClient({
  baseUrl: '${t.url}',
  apiKey: '${TEST_ROOT_KEY}',
  fetch: (input) => {
    if (input instanceof Request && input.method === 'GET' && new URL(input.url).pathname === '/admin/v1/workspaces') listRequests++;
    return fetch(input);
  },
});
for (let i = 0; i < 5; i++) await createWorkspace({ client, body: { name: 'paged-' + i } });
const names: string[] = [];
for await (const w of paginate(listWorkspaces, { client, query: { limit: 2 } })) {
  const typed: WorkspaceDto = w;
  names.push(typed.name);
}
let thrown: unknown;
try {
  await getWorkspace({ client, path: { workspaceId: '01a20000-0000-7000-8000-000000000000' } });
} catch (err) {
  thrown = err;
}
const e = thrown as NexusError;
const asValue = await getWorkspace({ client, path: { workspaceId: '01a20000-0000-7000-8000-000000000000' }, throwOnError: false });
console.log(JSON.stringify({
  names,
  listRequests,
  error: {
    isError: thrown instanceof Error,
    isNexusError: thrown instanceof NexusError,
    name: e.name,
    message: e.message,
    status: e.status,
    code: e.code,
    type: e.type,
    param: e.param,
    requestId: e.requestId,
    headerRequestId: e.response?.headers.get('x-request-id'),
    body: e.body,
    hasStack: typeof e.stack === 'string' && e.stack.includes('NexusError'),
  },
  asValue: { status: asValue.response.status, code: asValue.error?.error.code },
}));
`,
  );
  // Compiled, not run: every list operation goes through the pager; what is not a list, or not a 64-bit string, does not typecheck.
  writeFileSync(
    join(dir, 'types.ts'),
    `import { createNexusClient, getWorkspace, paginate, ${listOperations.map((o) => o.operationId).join(', ')}, type CreateQuotaStrategyDto, type Int64String } from '@nexus-gateway/client';
const client = createNexusClient({ baseUrl: 'http://127.0.0.1:8080' });
export async function pages(): Promise<unknown[]> {
  const items: unknown[] = [];
${listOperations
  .map((o) => {
    const path = o.pathParams.length ? `, path: { ${o.pathParams.map((p) => `${p}: 'x'`).join(', ')} }` : '';
    return `  for await (const item of paginate(${o.operationId}, { client${path} })) items.push(item);`;
  })
  .join('\n')}
  // @ts-expect-error getWorkspace does not list
  for await (const item of paginate(getWorkspace, { client, path: { workspaceId: 'x' } })) items.push(item);
  return items;
}
const units: Int64String = '5000000';
const fromBigint: Int64String = \`\${5_000_000n}\`;
// @ts-expect-error not an integer
const scientific: Int64String = '5e6';
// @ts-expect-error a number, not a decimal string
const strategy: CreateQuotaStrategyDto = { key: 'k', resetInterval: 'MONTH', quotaUnits: 5, inputMultiplierPpm: units, outputMultiplierPpm: fromBigint, cachedInputMultiplierPpm: units, maxOutputTokens: 1 };
export { scientific, strategy };
`,
  );
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['main.ts', 'types.ts'] }));
  try {
    execFileSync(process.execPath, [join(projectRoot, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], {
      cwd: dir,
      stdio: 'pipe',
      encoding: 'utf8',
    });
  } catch (err) {
    throw new Error(`the consumer does not typecheck:\n${(err as { stdout?: string }).stdout}`, { cause: err });
  }

  // Asynchronously: the service answering it runs in this process.
  const { stdout: out } = await promisify(execFile)(process.execPath, ['out/main.js'], { cwd: dir, encoding: 'utf8' });
  const result = JSON.parse(out);
  expect(result.names).toEqual(expect.arrayContaining(['paged-0', 'paged-1', 'paged-2', 'paged-3', 'paged-4']));
  expect(new Set(result.names).size).toBe(result.names.length);
  // At least 5 workspaces by 2: three pages, the last without a cursor.
  expect(result.listRequests).toBe(Math.ceil(result.names.length / 2));
  expect(result.listRequests).toBeGreaterThanOrEqual(3);
  expect(result.error).toMatchObject({
    isError: true,
    isNexusError: true,
    name: 'NotFoundError',
    status: 404,
    code: 'workspace_not_found',
    type: 'not_found_error',
    hasStack: true,
    body: { error: { code: 'workspace_not_found', type: 'not_found_error' } },
  });
  expect(result.error.message).toContain('404 workspace_not_found');
  expect(result.error.requestId).toBeTruthy();
  expect(result.error.requestId).toBe(result.error.headerRequestId);
  expect(result.asValue).toEqual({ status: 404, code: 'workspace_not_found' });
}, 120_000);

it('exports no name that shadows a global of JavaScript, the DOM or Node', () => {
  writeFileSync(join(dir, 'exports.ts'), `export * as pkg from '@nexus-gateway/client';\n`);
  writeFileSync(join(dir, 'globals.ts'), `export {};\n`);
  const { options } = ts.convertCompilerOptionsFromJson(
    { ...compilerOptions, types: ['node'], typeRoots: [join(projectRoot, 'node_modules', '@types')], noEmit: true },
    dir,
  );
  const program = ts.createProgram([join(dir, 'exports.ts'), join(dir, 'globals.ts')], options);
  const checker = program.getTypeChecker();
  const pkgFile = program.getSourceFile(join(dir, 'exports.ts'))!;
  const exportDecl = pkgFile.statements.find(ts.isExportDeclaration)!;
  const moduleSymbol = checker.getSymbolAtLocation(exportDecl.moduleSpecifier!)!;
  const exported = checker.getExportsOfModule(moduleSymbol).map((s) => s.name);
  expect(exported).toContain('ErrorBody');
  expect(exported).toContain('NexusError');
  const globalsFile = program.getSourceFile(join(dir, 'globals.ts'))!;
  const globals = new Set(
    checker.getSymbolsInScope(globalsFile, ts.SymbolFlags.Value | ts.SymbolFlags.Type | ts.SymbolFlags.Namespace).map((s) => s.name),
  );
  expect(globals.has('Error') && globals.has('Response') && globals.has('Buffer')).toBe(true);
  expect(exported.filter((name) => globals.has(name))).toEqual([]);
});

/** The resource API's consumer: each case's outcome as JSON on stdout. */
const sdkConsumer = `import { createServer } from 'node:http';
import { inspect } from 'node:util';
import {
  AuthenticationError, BadRequestError, ConflictError, createNexusClient, createWorkspace, getWorkspace, InternalServerError,
  InvalidWebhookSignatureError, Nexus, NexusConfigurationError, NexusConnectionError, NexusError, NexusTimeoutError, NotFoundError,
  PermissionDeniedError, RateLimitError, ServiceUnavailableError, type CreateModelPriceDto, type CreateWebhookEndpointDto,
  type ErrorCode, type WebhookEvent, type WorkspaceDto,
} from '@nexus-gateway/client';

const env = process.env;
// Under exactOptionalPropertyTypes: a string | undefined into the optional apiKey, an undefined maxRetries.
const nexus = new Nexus({ baseUrl: env.NEXUS_URL!, apiKey: env.ROOT_KEY, maxRetries: undefined });
let listRequests = 0;
const counted = new Nexus({
  baseUrl: env.NEXUS_URL!,
  apiKey: env.ROOT_KEY,
  fetch: (input, init) => {
    const request = new Request(input, init);
    if (request.method === 'GET' && new URL(request.url).pathname === '/admin/v1/workspaces') listRequests++;
    return fetch(request);
  },
});
const proxied = new Nexus({ baseUrl: env.PROXY_URL!, apiKey: env.ROOT_KEY });
const out: Record<string, unknown> = {};
// An optional field of a body or a query takes undefined too (left out of the request).
const maybe = (value: string): string | undefined => (value ? value : undefined);
await nexus.workspaces.create({ name: 'sdk-optional', metadata: undefined });
await nexus.workspaces.list({ limit: 1, cursor: maybe(''), status: undefined });

async function caught(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (err) {
    return err;
  }
  throw new Error('the call did not throw');
}
function describe(err: unknown) {
  const e = err as NexusError;
  const printed = inspect(e);
  return {
    class: e.constructor.name,
    name: e.name,
    isNexusError: e instanceof NexusError,
    status: e.status ?? null,
    code: e.code ?? null,
    param: e.param ?? null,
    requestId: e.requestId ?? null,
    message: e.message,
    printedLines: printed.split('\\n').length,
    printsResponse: printed.includes('Response {') || printed.includes('[Response]'),
    responseStatus: e.response?.status ?? null,
  };
}

// Pagination: every item across pages, each page a request; a page and the next by hand.
for (let i = 0; i < 5; i++) await nexus.workspaces.create({ name: 'sdk-paged-' + i });
const names: string[] = [];
const ids: string[] = [];
for await (const w of counted.workspaces.list({ limit: 2 })) {
  const typed: WorkspaceDto = w;
  names.push(typed.name);
  ids.push(typed.id);
}
const first = await nexus.workspaces.list({ limit: 2 });
const second = first.hasNextPage() ? await first.getNextPage() : undefined;
out.pagination = {
  names,
  ids,
  listRequests,
  firstPage: first.data.length,
  secondPage: second?.data.length ?? 0,
  secondIsAnother: second !== undefined && second.data[0]?.id !== first.data[0]?.id,
};

// The data, and with .withResponse() the Response too.
const { data: created, response } = await nexus.workspaces.create({ name: 'sdk-raw' }).withResponse();
out.withResponse = { status: response.status, name: created.name, plainName: (await nexus.workspaces.get(created.id)).name };

// Each error class.
const missing = '01a20000-0000-7000-8000-000000000000';
const key = 'sdk-conflict-' + Date.now();
await nexus.workspaces.create({ name: 'sdk-conflict-a' }, { idempotencyKey: key });
const errors = {
  badRequest: await caught(() => nexus.workspaces.list({ limit: 1000 })),
  authentication: await caught(() => new Nexus({ baseUrl: env.NEXUS_URL!, apiKey: 'nx-mgmt-not-a-key' }).workspaces.list()),
  permissionDenied: await caught(() => new Nexus({ baseUrl: env.NEXUS_URL!, apiKey: env.SCOPED_KEY }).workspaces.create({ name: 'refused' })),
  notFound: await caught(() => nexus.workspaces.get(missing)),
  conflict: await caught(() => nexus.workspaces.create({ name: 'sdk-conflict-b' }, { idempotencyKey: key })),
  rateLimit: await caught(() => proxied.workspaces.list(undefined, { headers: { 'x-fault': 'status:429' }, maxRetries: 0 })),
  internalServer: await caught(() => proxied.workspaces.list(undefined, { headers: { 'x-fault': 'status:500' }, maxRetries: 0 })),
  serviceUnavailable: await caught(() => proxied.workspaces.list(undefined, { headers: { 'x-fault': 'status:503' }, maxRetries: 0 })),
  timeout: await caught(() => proxied.workspaces.list(undefined, { headers: { 'x-fault': 'delay:3000' }, timeout: 300, maxRetries: 0 })),
  connection: await caught(() => new Nexus({ baseUrl: env.DEAD_URL!, apiKey: env.ROOT_KEY, maxRetries: 0 }).workspaces.list()),
};
out.errors = Object.fromEntries(Object.entries(errors).map(([name, err]) => [name, describe(err)]));
out.classes = {
  badRequest: errors.badRequest instanceof BadRequestError,
  authentication: errors.authentication instanceof AuthenticationError,
  permissionDenied: errors.permissionDenied instanceof PermissionDeniedError,
  notFound: errors.notFound instanceof NotFoundError,
  conflict: errors.conflict instanceof ConflictError,
  rateLimit: errors.rateLimit instanceof RateLimitError,
  internalServer: errors.internalServer instanceof InternalServerError,
  serviceUnavailable: errors.serviceUnavailable instanceof ServiceUnavailableError && errors.serviceUnavailable instanceof InternalServerError,
  timeout: errors.timeout instanceof NexusTimeoutError && errors.timeout instanceof NexusConnectionError,
  connection: errors.connection instanceof NexusConnectionError && !(errors.connection instanceof NexusTimeoutError),
};
// code is the contract's union of codes: a code that is not one does not compile.
const code: ErrorCode | undefined = (errors.notFound as NexusError).code;
// @ts-expect-error not one of the contract's codes
const typo: ErrorCode = 'workspace_not_fund';
out.codeIsKnown = code === 'workspace_not_found' && typo.length > 0;

// Retries: a write's 503 retried with its automatic Idempotency-Key, a GET's too; a write without one is not retried.
const retried = await proxied.workspaces.create({ name: 'sdk-retried' }, { headers: { 'x-fault': 'fail-once:create' } }).withResponse();
const retriedGet = await proxied.workspaces.get(created.id, { headers: { 'x-fault': 'fail-once:get' } });
const notRetried = await caught(() => proxied.workspaces.update(created.id, { name: 'sdk-renamed' }, { headers: { 'x-fault': 'fail-once:update' } }));
out.retry = { status: retried.response.status, name: retried.data.name, get: retriedGet.id === created.id, notRetried: describe(notRetried) };
// The function API through createNexusClient: the same automatic key and retries.
const viaFunction = await createWorkspace({
  client: createNexusClient({ baseUrl: env.PROXY_URL!, apiKey: env.ROOT_KEY }),
  body: { name: 'sdk-function-retried' },
  headers: { 'x-fault': 'fail-once:function' },
});
out.functionRetry = { status: viaFunction.response.status, name: viaFunction.data.name };

// The Gateway: a provider call through Nexus with the user's inference key, its provider path sent with its '/'.
const asUser = new Nexus({ baseUrl: env.NEXUS_URL!, apiKey: env.GATEWAY_KEY });
const chat = { model: 'gpt-test', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 20 };
const completion = await asUser.gateway.proxyProviderPost(env.GATEWAY_CONNECTION!, 'v1/chat/completions', chat).withResponse();
out.gateway = {
  status: completion.response.status,
  object: (completion.data as { object?: string }).object,
  metering: completion.response.headers.get('x-nexus-metering-status'),
  plan: (await asUser.gateway.getMe()).plan.key.length > 0,
};

// Routes: one over the tenant's connection, called through the Gateway like a connection, updated, archived by a DELETE
// that a 503 answers once (retried: a DELETE is idempotent).
const workspaceId = env.GATEWAY_WORKSPACE!;
const route = await nexus.routes.create(workspaceId, { name: 'sdk-route', strategy: 'fallback', targets: [{ providerConnectionId: env.GATEWAY_CONNECTION! }] });
const viaRoute = await asUser.gateway.proxyProviderPost(route.id, 'v1/chat/completions', chat).withResponse();
const routeIds: string[] = [];
for await (const r of nexus.routes.list(workspaceId, { limit: 1 })) routeIds.push(r.id);
const renamed = await nexus.routes.update(route.id, { name: 'sdk-route-renamed' });
const health = await nexus.routes.getHealth(route.id);
await proxied.routes.archive(route.id, { headers: { 'x-fault': 'fail-once:archive-route' } });
out.routes = {
  gatewayBaseUrl: route.gatewayBaseUrl.endsWith('/providers/' + route.id),
  served: viaRoute.response.status,
  listed: routeIds.includes(route.id),
  renamed: renamed.name,
  targets: health.targets.length,
  status: (await nexus.routes.get(route.id)).status,
};

// Money: a price for a protocol, listed and closed; a budget set by a PUT that a 503 answers once (retried: a PUT is
// idempotent); the exports read as streams, the Response's body not read before.
// A pattern of its own on each run (one run per Node line, on one workspace).
const priceBody = { modelPattern: \`gpt-test-\${Date.now()}*\`, protocolProfile: 'openai', inputPerMillion: '1', outputPerMillion: '2', effectiveFrom: new Date(Date.now() - 3_600_000).toISOString() } as const;
const price = await nexus.money.createModelPrice(workspaceId, priceBody);
const prices: string[] = [];
for await (const p of nexus.money.listModelPrices(workspaceId)) prices.push(p.id);
const closed = await nexus.money.closeModelPrice(price.id, {});
const budget = await proxied.money.setWorkspaceBudget(workspaceId, { period: 'DAY', softLimitMicros: '1000000' }, { headers: { 'x-fault': 'fail-once:budget' } });
const readBudget = await nexus.money.getWorkspaceBudget(workspaceId);
async function readAll(stream: ReadableStream<Uint8Array>): Promise<{ text: string; chunks: number }> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let chunks = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { text: text + decoder.decode(), chunks };
    chunks++;
    text += decoder.decode(value, { stream: true });
  }
}
let exported = { text: '', chunks: 0 };
let unread = false;
let csvType: string | null = null;
// The gateway's call above is recorded by then or shortly after.
const completionId = String(completion.response.headers.get('x-nexus-request-id'));
for (let i = 0; i < 100 && !exported.text.includes(completionId); i++) {
  if (i) await new Promise((resolve) => setTimeout(resolve, 100));
  const { data: stream, response: csv } = await nexus.money.exportInvocations(workspaceId).withResponse();
  unread = !csv.bodyUsed && csv.body === stream;
  csvType = csv.headers.get('content-type');
  exported = await readAll(stream);
}
const summaryCsv = await new Response(
  await nexus.money.exportUsageSummary(workspaceId, { since: new Date(Date.now() - 86_400_000).toISOString(), until: new Date(Date.now() + 3_600_000).toISOString() }),
).text();
out.money = {
  price: { protocolProfile: price.protocolProfile, listed: prices.includes(price.id), closed: closed.effectiveTo !== undefined },
  budget: { period: budget.period, soft: readBudget.softLimitMicros },
  invocations: { unread, csvType, header: exported.text.split('\\n')[0], rows: exported.text.trim().split('\\n').length - 1, chunks: exported.chunks, requestId: exported.text.includes(completionId) },
  summaryHeader: summaryCsv.split('\\n')[0],
};
// The contract's enums: a misspelt event type or protocol does not compile.
// @ts-expect-error not an event type
const misspeltEvent: CreateWebhookEndpointDto = { url: 'https://example.com/hooks', eventTypes: ['quota.nope'] };
// @ts-expect-error not a protocol profile
const misspeltProfile: CreateModelPriceDto = { ...priceBody, protocolProfile: 'smtp' };
out.enums = [misspeltEvent.url, misspeltProfile.modelPattern].length;

// Webhooks: a receiver here checks a real delivery with nexus.webhooks.verify(); a changed body, a wrong secret and
// fetch's Headers too. The endpoint is deleted by a DELETE that a 503 answers once.
const delivered: { body: string; headers: Record<string, string | string[] | undefined> }[] = [];
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    delivered.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
    res.writeHead(204).end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const hookUrl = 'http://127.0.0.1:' + (receiver.address() as { port: number }).port + '/hooks';
const endpoint = await nexus.webhooks.createEndpoint(workspaceId, { url: hookUrl, eventTypes: ['webhook.test'] });
await nexus.webhooks.sendTestWebhookEvent(endpoint.id);
for (let i = 0; i < 200 && delivered.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
receiver.close();
const hook = delivered[0]!;
const event: WebhookEvent = nexus.webhooks.verify(hook.body, hook.headers, endpoint.secret);
const asHeaders = new Headers();
for (const [name, value] of Object.entries(hook.headers)) if (typeof value === 'string') asHeaders.set(name, value);
const fromBytes = nexus.webhooks.verify(new TextEncoder().encode(hook.body), asHeaders, endpoint.secret);
const tampered = await caught(async () => nexus.webhooks.verify(hook.body.replace('webhook.test', 'webhook.tesT'), hook.headers, endpoint.secret));
const otherSecret = (await nexus.webhooks.rotateEndpointSecret(endpoint.id)).secret;
const wrongSecret = await caught(async () => nexus.webhooks.verify(hook.body, hook.headers, 'whsec_' + Buffer.from('another secret, 24 bytes').toString('base64')));
const messages: string[] = [];
for await (const m of nexus.webhooks.listMessages(endpoint.id)) messages.push(m.id);
await proxied.webhooks.deleteEndpoint(endpoint.id, { headers: { 'x-fault': 'fail-once:delete-endpoint' } });
out.webhooks = {
  type: event.type,
  sameId: hook.headers['webhook-id'] === messages[0],
  fromBytes: fromBytes.type,
  tampered: describe(tampered),
  tamperedClass: tampered instanceof InvalidWebhookSignatureError,
  wrongSecret: describe(wrongSecret),
  rotated: otherSecret !== endpoint.secret,
  deleted: describe(await caught(() => nexus.webhooks.getEndpoint(endpoint.id))).status,
};

// No silent default: the function API without a client, and a Nexus without options, say so.
out.noDefault = {
  functionApi: describe(await caught(() => getWorkspace({ path: { workspaceId: missing } }))),
  functionApiClass: (await caught(() => getWorkspace({ path: { workspaceId: missing } }))) instanceof NexusConfigurationError,
  constructor: describe(await caught(async () => new Nexus({} as never))),
};
console.log(JSON.stringify(out));
`;

it('the resource API: every area, pages, each error class, retries with one Idempotency-Key, a timeout, a connection error, on Node 24 and 22', async () => {
  writeFileSync(join(dir, 'sdk.ts'), sdkConsumer);
  copyFileSync(join(projectRoot, 'examples', 'quickstart.ts'), join(dir, 'quickstart.ts'));
  const sdkOptions = { ...compilerOptions, outDir: 'out-sdk', types: ['node'], typeRoots: [join(projectRoot, 'node_modules', '@types')] };
  writeFileSync(join(dir, 'tsconfig.sdk.json'), JSON.stringify({ compilerOptions: sdkOptions, files: ['sdk.ts', 'quickstart.ts'] }));
  try {
    // Asynchronously, as everything below: the Nexus answering the consumer runs in this process.
    await promisify(execFile)(process.execPath, [join(projectRoot, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.sdk.json'], {
      cwd: dir,
      encoding: 'utf8',
    });
  } catch (err) {
    throw new Error(`the resource API's consumer does not typecheck:\n${(err as { stdout?: string }).stdout}`, { cause: err });
  }

  const own = await t.fetch(`${t.url}/admin/v1/workspaces`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'sdk-scoped-own' }),
  });
  const ownId = ((await own.json()) as { id: string }).id;
  const { key: scopedKey } = await t.nexus.services.managementKeys.createScoped(systemActor('test'), {
    name: 'sdk-scoped',
    workspaceIds: [ownId],
  });
  const deadUrl = await closedPortUrl();
  // A tenant whose connection is a real OpenAI-style upstream on 127.0.0.1, for the Gateway's calls.
  const providerKey = testProviderKey();
  upstream = await startFakeUpstream('openai', [providerKey]);
  const tenant = await provisionTenant(t.client, { baseUrl: upstream.url, providerKey });
  const env = {
    ...process.env,
    NEXUS_URL: t.url,
    PROXY_URL: proxyUrl,
    DEAD_URL: deadUrl,
    ROOT_KEY: TEST_ROOT_KEY,
    SCOPED_KEY: scopedKey,
    GATEWAY_WORKSPACE: tenant.workspaceId,
    GATEWAY_CONNECTION: tenant.connectionId,
    GATEWAY_KEY: tenant.apiKey,
  };
  for (const node of [process.execPath, join(node22, 'node')]) {
    const version = (await promisify(execFile)(node, ['-p', 'process.versions.node'], { encoding: 'utf8' })).stdout.trim();
    faultRequests.clear();
    const { stdout } = await promisify(execFile)(node, ['out-sdk/sdk.js'], { cwd: dir, encoding: 'utf8', env });
    const out = JSON.parse(stdout);
    const at = `on Node ${version}`;

    expect(new Set(out.pagination.ids).size, at).toBe(out.pagination.ids.length);
    expect(out.pagination.names, at).toEqual(expect.arrayContaining(['sdk-paged-0', 'sdk-paged-4']));
    expect(out.pagination.listRequests, at).toBe(Math.ceil(out.pagination.names.length / 2));
    expect(out.pagination, at).toMatchObject({ firstPage: 2, secondPage: 2, secondIsAnother: true });
    expect(out.withResponse, at).toEqual({ status: 201, name: 'sdk-raw', plainName: 'sdk-raw' });

    const expected: Record<string, [string, number | null, string | null]> = {
      badRequest: ['BadRequestError', 400, null],
      authentication: ['AuthenticationError', 401, 'invalid_management_key'],
      permissionDenied: ['PermissionDeniedError', 403, 'root_key_required'],
      notFound: ['NotFoundError', 404, 'workspace_not_found'],
      conflict: ['ConflictError', 409, 'idempotency_key_reused'],
      rateLimit: ['RateLimitError', 429, 'rate_limited'],
      internalServer: ['InternalServerError', 500, 'internal_error'],
      serviceUnavailable: ['ServiceUnavailableError', 503, 'not_ready'],
      timeout: ['NexusTimeoutError', null, null],
      connection: ['NexusConnectionError', null, null],
    };
    for (const [name, [errorClass, status, code]] of Object.entries(expected)) {
      const e = out.errors[name];
      expect(e, `${name} ${at}`).toMatchObject({ class: errorClass, name: errorClass, isNexusError: true, status, printsResponse: false });
      if (code) expect(e.code, `${name} ${at}`).toBe(code);
      if (status) expect(e.requestId, `${name} ${at}`).toBeTruthy();
      // It prints on one screen: the stack and the Error body, not the Response.
      expect(e.printedLines, `${name} ${at}`).toBeLessThan(40);
      expect(e.responseStatus, `${name} ${at}`).toBe(status);
      expect(out.classes[name], `${name} ${at}`).toBe(true);
    }
    expect(out.errors.badRequest.param, at).toBe('limit');
    expect(out.errors.timeout.message, at).toContain('within 300 ms');
    expect(out.errors.connection.message, at).toContain('ECONNREFUSED');
    expect(out.codeIsKnown, at).toBe(true);

    // The create was answered 503 once, then retried with the same, automatic Idempotency-Key.
    expect(out.retry, at).toMatchObject({ status: 201, name: 'sdk-retried', get: true });
    const createKeys = faultRequests.get('fail-once:create')!;
    expect(createKeys, at).toHaveLength(2);
    expect(createKeys[0], at).toMatch(/^[0-9a-f-]{36}$/);
    expect(createKeys[1], at).toBe(createKeys[0]);
    expect(faultRequests.get('fail-once:get'), at).toHaveLength(2);
    expect(out.functionRetry, at).toEqual({ status: 201, name: 'sdk-function-retried' });
    const functionKeys = faultRequests.get('fail-once:function')!;
    expect(functionKeys, at).toHaveLength(2);
    expect(functionKeys[0], at).toMatch(/^[0-9a-f-]{36}$/);
    expect(functionKeys[1], at).toBe(functionKeys[0]);
    // A PATCH carries no Idempotency-Key: its 503 is thrown, not retried.
    expect(faultRequests.get('fail-once:update'), at).toEqual(['']);
    expect(out.retry.notRetried, at).toMatchObject({ class: 'ServiceUnavailableError', status: 503 });
    // The timed-out and the refused calls were asked once each (maxRetries: 0).
    expect(faultRequests.get('delay:3000'), at).toHaveLength(1);

    expect(out.gateway, at).toEqual({ status: 200, object: 'chat.completion', metering: 'metered', plan: true });
    expect(upstream.requests.at(-1)?.url, at).toBe('/v1/chat/completions');

    // Routes, money and webhooks, each through its resource.
    expect(out.routes, at).toEqual({
      gatewayBaseUrl: true,
      served: 200,
      listed: true,
      renamed: 'sdk-route-renamed',
      targets: 1,
      status: 'ARCHIVED',
    });
    expect(out.money.price, at).toEqual({ protocolProfile: 'openai', listed: true, closed: true });
    expect(out.money.budget, at).toEqual({ period: 'DAY', soft: '1000000' });
    expect(out.money.invocations, at).toMatchObject({ unread: true, requestId: true });
    expect(out.money.invocations.csvType, at).toMatch(/^text\/csv/);
    expect(out.money.invocations.header, at).toMatch(/^id,started_at,/);
    expect(out.money.invocations.rows, at).toBeGreaterThanOrEqual(1);
    expect(out.money.invocations.chunks, at).toBeGreaterThanOrEqual(1);
    expect(out.money.summaryHeader, at).toMatch(/,/);
    expect(out.webhooks, at).toMatchObject({
      type: 'webhook.test',
      sameId: true,
      fromBytes: 'webhook.test',
      tamperedClass: true,
      rotated: true,
      deleted: 404,
    });
    expect(out.webhooks.tampered, at).toMatchObject({ class: 'InvalidWebhookSignatureError', isNexusError: true, status: null });
    expect(out.webhooks.wrongSecret, at).toMatchObject({ class: 'InvalidWebhookSignatureError' });
    // A PUT and a DELETE answered 503 once were sent again, each without an Idempotency-Key (HTTP makes them idempotent).
    for (const fault of ['fail-once:budget', 'fail-once:archive-route', 'fail-once:delete-endpoint']) {
      expect(faultRequests.get(fault), `${fault} ${at}`).toEqual(['', '']);
    }

    expect(out.noDefault.functionApiClass, `${at}: ${JSON.stringify(out.noDefault)}`).toBe(true);
    expect(out.noDefault.functionApi.message, at).toContain('No Nexus client configured');
    expect(out.noDefault.constructor, at).toMatchObject({ class: 'NexusConfigurationError' });
    expect(out.noDefault.constructor.message, at).toContain('baseUrl');

    // CommonJS callers load the package too (Node loads ES modules from require()).
    const required = await promisify(execFile)(
      node,
      ['-e', "const c = require('@nexus-gateway/client'); console.log(typeof c.Nexus, typeof c.NotFoundError)"],
      {
        cwd: dir,
        encoding: 'utf8',
      },
    );
    expect(required.stdout.trim(), at).toBe('function function');

    // The example, as it is, drives every area.
    const example = await promisify(execFile)(node, ['out-sdk/quickstart.js'], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, NEXUS_BASE_URL: t.url, NEXUS_MANAGEMENT_KEY: TEST_ROOT_KEY },
    });
    for (const area of ['system', 'workspaces', 'plans', 'workspaceAccesses', 'gateway', 'providerConnections', 'usage', 'errors']) {
      expect(example.stdout, `${area} ${at}`).toMatch(new RegExp(`^${area}: `, 'm'));
    }
    expect(example.stdout, at).toContain('errors: NotFoundError 404 workspace_not_found');
    expect(example.stdout.trim().split('\n').pop(), at).toBe('done');
  }
}, 240_000);

/** A URL nothing listens on: a port taken and let go. */
async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

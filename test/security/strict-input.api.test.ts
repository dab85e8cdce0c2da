/**
 * Input the Admin API refuses instead of ignoring, table-driven from the contract:
 *
 *   every operation without a request body   a body other than none or `{}` is 400 (truncated JSON,
 *                                            fields, an array); none and `{}` are taken as before
 *   every operation whose body has metadata  a key __proto__, constructor or prototype in it is 400
 *                                            invalid_parameter naming the key, and nothing is written
 *
 * Path parameters are ids of nothing: a body taken reaches the handler, which answers 404.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listWorkspaces } from '../../generated/client/sdk.gen.js';
import { loadContract } from '../../src/app.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

let t: TestApp;

beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.close();
});

interface Operation {
  operationId: string;
  method: string;
  path: string;
  requestBody?: unknown;
}

const contract = loadContract() as unknown as { paths: Record<string, Record<string, Operation>> };

/** `#/components/...` resolved in the contract. */
function deref(node: unknown): unknown {
  const ref = (node as { $ref?: string } | undefined)?.$ref;
  return ref
    ? ref
        .split('/')
        .slice(1)
        .reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], contract)
    : node;
}

/** Whether a schema (its $refs followed) has a property named `metadata` anywhere. */
function hasMetadata(node: unknown, seen = new Set<unknown>()): boolean {
  const schema = deref(node);
  if (!schema || typeof schema !== 'object' || seen.has(schema)) return false;
  seen.add(schema);
  if ((schema as { properties?: Record<string, unknown> }).properties?.metadata) return true;
  return Object.values(schema).some((child) => hasMetadata(child, seen));
}

const operations: Operation[] = Object.entries(contract.paths).flatMap(([path, item]) =>
  ['post', 'put', 'patch', 'delete'].flatMap((method) => (item[method] ? [{ ...item[method], method: method.toUpperCase(), path }] : [])),
);
// The gateway's operations relay the client's body to the provider: not the Admin API's to judge.
const admin = operations.filter((op) => !op.path.startsWith('/providers/'));
const withoutBody = admin.filter((op) => !op.requestBody);
const withMetadata = admin.filter((op) => op.requestBody && hasMetadata(op.requestBody));

const urlOf = (op: Operation) => `${t.url}${op.path.replace(/\{[^}]+\}/g, () => randomUUID())}`;

function send(op: Operation, body: string | undefined, token = TEST_ROOT_KEY) {
  return t.fetch(urlOf(op), {
    method: op.method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body }),
  });
}

describe('operations without a request body', () => {
  it('are found in the contract', () => {
    expect(withoutBody.map((op) => op.operationId)).toEqual(
      expect.arrayContaining([
        'activateWorkspaceAccess',
        'suspendWorkspaceAccess',
        'publishPlan',
        'verifyProviderConnection',
        'replayBillingWebhookEvent',
      ]),
    );
  });

  describe.each(withoutBody.map((op) => [op.operationId, op] as const))('%s', (_id, op) => {
    it.each([
      ['truncated JSON', '{"force":', 'invalid_json', null],
      ['a field', '{"force":true}', 'invalid_request', 'force'],
      ['an array', '[1]', 'invalid_request', null],
    ])('refuses %s with 400', async (_name, body, code, param) => {
      const res = await send(op, body);
      expect(res.status).toBe(400);
      const error = ((await res.json()) as { error: { code: string; param: string | null; message: string } }).error;
      expect(error.code).toBe(code);
      expect(error.param).toBe(param);
      if (code === 'invalid_request') expect(error.message).toBe(`${op.operationId} takes no request body: send none, or {}`);
    });

    it.each([
      ['no body', undefined],
      ['an empty body', ''],
      ['{}', '{}'],
    ])('takes %s (the ids name nothing: 404)', async (_name, body) => {
      const res = await send(op, body);
      expect(res.status).toBe(404);
      await res.text();
    });
  });
});

describe('metadata', () => {
  it('is found in the contract', () => {
    expect(withMetadata.map((op) => op.operationId)).toEqual(
      expect.arrayContaining([
        'createWorkspace',
        'updateWorkspace',
        'createPlan',
        'createProviderConnection',
        'updateProviderConnection',
        'provisionWorkspaceUser',
      ]),
    );
  });

  describe.each(withMetadata.map((op) => [op.operationId, op] as const))('%s', (_id, op) => {
    it.each([
      ['__proto__', '{"metadata":{"__proto__":{"polluted":true}}}', 'metadata.__proto__'],
      ['constructor', '{"metadata":{"constructor":{"prototype":{"polluted":true}}}}', 'metadata.constructor'],
      ['prototype', '{"metadata":{"prototype":1}}', 'metadata.prototype'],
      ['a nested __proto__', '{"metadata":{"tier":{"__proto__":{"polluted":true}}}}', 'metadata.tier.__proto__'],
    ])('refuses %s with 400 naming the key', async (_name, body, param) => {
      const res = await send(op, body);
      expect(res.status).toBe(400);
      const error = ((await res.json()) as { error: { code: string; param: string; message: string } }).error;
      expect(error).toMatchObject({ code: 'invalid_parameter', param });
      expect(error.message).toContain(param);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });
  });

  it('a refused metadata creates nothing; keys that merely look alike are kept', async () => {
    const before = await listWorkspaces({ client: t.client, query: { limit: 100 } });
    const refused = await t.fetch(`${t.url}/admin/v1/workspaces`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
      body: '{"name":"strict-input","metadata":{"__proto__":{"isAdmin":true}}}',
    });
    expect(refused.status).toBe(400);
    await refused.text();
    const after = await listWorkspaces({ client: t.client, query: { limit: 100 } });
    expect(after.data.map((w) => w.id)).toEqual(before.data.map((w) => w.id));

    const created = await t.fetch(`${t.url}/admin/v1/workspaces`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ROOT_KEY}`, 'content-type': 'application/json' },
      body: '{"name":"strict-input","metadata":{"proto":1,"Constructor":2,"prototypes":3}}',
    });
    expect(created.status).toBe(201);
    expect(((await created.json()) as { metadata: unknown }).metadata).toEqual({ proto: 1, Constructor: 2, prototypes: 3 });
  });
});

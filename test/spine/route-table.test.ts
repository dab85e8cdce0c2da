import { readFileSync } from 'node:fs';
import { OpenAPIBackend, type Document, type Request } from 'openapi-backend';
import { beforeAll, describe, expect, it } from 'vitest';
import { compileRoutes } from '../../src/http/route-table.js';

const definition = JSON.parse(readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8')) as Document;
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'GET', ' Post '];

/** What a router answers for a request: the operation's id, none, or the refusal it throws. */
function answer(backend: OpenAPIBackend, req: Request, strict: boolean): string {
  try {
    return backend.router.matchOperation(req, strict)?.operationId ?? 'none';
  } catch (err) {
    return `thrown: ${(err as Error).message}`;
  }
}

let library: OpenAPIBackend;
let compiled: OpenAPIBackend;

beforeAll(async () => {
  library = new OpenAPIBackend({ definition, quick: true, validate: false });
  compiled = new OpenAPIBackend({ definition, quick: true, validate: false });
  await Promise.all([library.init(), compiled.init()]);
  compileRoutes(compiled.router);
});

describe('the routes compiled once', () => {
  it("match every request as openapi-backend's router does: each path of the contract, filled, bare, with a slash or a query, in every method", () => {
    const paths = Object.keys(definition.paths ?? {}).flatMap((path) => [
      path.replaceAll(/\{[^}]+\}/g, '0f1e2d3c-0000-4000-8000-000000000000'),
      path.replaceAll(/\{[^}]+\}/g, 'x.y'),
      path,
      `${path.replaceAll(/\{[^}]+\}/g, 'a')}/`,
      `${path.replaceAll(/\{[^}]+\}/g, 'a')}?limit=5`,
      `${path.replaceAll(/\{[^}]+\}/g, 'a')}/more`,
    ]);
    paths.push(
      '/',
      '',
      '/admin/v1',
      '/admin/v1/nothing',
      'admin/v1/workspaces',
      '/admin/v1/workspaces//usage-summary',
      '/admin/v1/workspaces/a%2Fb',
    );
    let asked = 0;
    for (const path of paths) {
      for (const method of METHODS) {
        for (const strict of [false, true]) {
          expect(answer(compiled, { method, path, headers: {} }, strict), `${method} ${path} strict ${strict}`).toBe(
            answer(library, { method, path, headers: {} }, strict),
          );
          asked++;
        }
      }
    }
    expect(asked).toBeGreaterThan(5_000);
  });

  it('match as the router does where paths overlap: the exact path first, then the most specific template with the method', async () => {
    const op = (operationId: string) => ({ operationId, responses: { 200: { description: 'ok' } } });
    const overlapping = {
      openapi: '3.1.0',
      info: { title: 'overlapping', version: '1' },
      paths: {
        '/{kind}/{id}': { get: op('anyGet'), delete: op('anyDelete') },
        '/items/{id}': { get: op('itemGet') },
        '/items/special': { post: op('specialPost') },
        '/items/{id}/parts': { get: op('partsGet') },
        '/{kind}/{id}/parts': { put: op('anyPartsPut') },
        '/items/{id}.json': { get: op('itemJson') },
      },
    } as unknown as Document;
    const [plain, fast] = [new OpenAPIBackend({ definition: overlapping }), new OpenAPIBackend({ definition: overlapping })];
    await Promise.all([plain.init(), fast.init()]);
    compileRoutes(fast.router);
    const paths = [
      '/items/special',
      '/items/1',
      '/items/1/parts',
      '/things/1',
      '/things/1/parts',
      '/items/1.json',
      '/items/1xjson',
      '/items',
    ];
    const seen = new Set<string>();
    for (const path of paths) {
      for (const method of ['get', 'post', 'put', 'delete', 'patch']) {
        for (const strict of [false, true]) {
          const expected = answer(plain, { method, path, headers: {} }, strict);
          seen.add(expected);
          expect(answer(fast, { method, path, headers: {} }, strict), `${method} ${path} strict ${strict}`).toBe(expected);
        }
      }
    }
    // Every kind of answer was asked: each operation, none, 404 and 405.
    expect(seen).toEqual(
      new Set([
        'anyGet',
        'anyDelete',
        'itemGet',
        'specialPost',
        'partsGet',
        'anyPartsPut',
        'itemJson',
        'none',
        'thrown: 404-notFound: no route matches request',
        'thrown: 405-methodNotAllowed: this method is not registered for the route',
      ]),
    );
  });

  it('list the same operations, and find each by its id', () => {
    expect(compiled.router.getOperations()).toEqual(library.router.getOperations());
    for (const op of library.router.getOperations()) expect(compiled.router.getOperation(op.operationId!)).toEqual(op);
    expect(compiled.router.getOperation('noSuchOperation')).toBeUndefined();
  });
});

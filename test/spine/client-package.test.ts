/**
 * The generated client is a package another project can install: `npm pack` in generated/ gives a
 * tarball with types; a fresh project installs it, typechecks against it (every list operation through
 * the pager, the 64-bit string type, no export named like a global) and calls a running Nexus with it:
 * errors thrown as NexusError, a list followed across pages.
 */
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { projectRoot } from '../support/paths.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

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
beforeAll(async () => {
  t = await startTestApp();
  dir = mkdtempSync(join(tmpdir(), 'nexus-client-'));
  const npm = (args: string[], cwd: string) =>
    execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, stdio: 'pipe', encoding: 'utf8' });
  npm(['pack', '--pack-destination', dir], join(projectRoot, 'generated'));
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
  expect(tarball).toBe(`nexus-client-${contract.info.version}.tgz`);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  npm(['install', '--offline', `./${tarball}`], dir);
}, 120_000);
afterAll(async () => {
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
  outDir: 'out',
  skipLibCheck: false,
};

it('installs with the API version, typechecks, throws NexusErrors and pages through a list', async () => {
  const installed = JSON.parse(readFileSync(join(dir, 'node_modules', '@nexus', 'client', 'package.json'), 'utf8')) as { version: string };
  expect(installed.version).toBe(contract.info.version);

  writeFileSync(
    join(dir, 'main.ts'),
    `import { createNexusClient, createWorkspace, getWorkspace, listWorkspaces, NexusError, paginate, type WorkspaceDto } from '@nexus/client';
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
    headerRequestId: e.response.headers.get('x-request-id'),
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
    `import { createNexusClient, getWorkspace, paginate, ${listOperations.map((o) => o.operationId).join(', ')}, type CreateQuotaStrategyDto, type Int64String } from '@nexus/client';
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
    name: 'NexusError',
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
  writeFileSync(join(dir, 'exports.ts'), `export * as pkg from '@nexus/client';\n`);
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

/**
 * The generated client is a package another project can install: `npm pack` in
 * generated/ gives a tarball with types; a fresh project installs it, typechecks
 * against it and calls a running Nexus with it.
 */
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { projectRoot } from '../support/paths.js';
import { startTestApp, TEST_ROOT_KEY, type TestApp } from '../support/test-app.js';

let t: TestApp;
let dir: string;
beforeAll(async () => {
  t = await startTestApp();
  dir = mkdtempSync(join(tmpdir(), 'nexus-client-'));
});
afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

it('packs, installs, typechecks and calls the service', async () => {
  const npm = (args: string[], cwd: string) =>
    execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, stdio: 'pipe', encoding: 'utf8' });
  npm(['pack', '--pack-destination', dir], join(projectRoot, 'generated'));
  const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'))!;
  expect(tarball).toMatch(/^nexus-client-.*\.tgz$/);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  npm(['install', '--offline', `./${tarball}`], dir);
  writeFileSync(
    join(dir, 'main.ts'),
    `import { createWorkspace, listWorkspaces, type WorkspaceDto } from '@nexus/client';
import { createClient } from '@nexus/client/client';
const client = createClient({ baseUrl: '${t.url}', headers: { Authorization: 'Bearer ${TEST_ROOT_KEY}' } });
const created = await createWorkspace({ client, body: { name: 'from-the-package' } });
const list = await listWorkspaces({ client, query: { limit: 100 } });
const names: string[] = (list.data ?? []).map((w: WorkspaceDto) => w.name);
console.log(JSON.stringify({ status: created.response.status, names }));
`,
  );
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM'], types: [], strict: true, outDir: 'out', skipLibCheck: false },
      files: ['main.ts'],
    }),
  );
  execFileSync(process.execPath, [join(projectRoot, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: dir, stdio: 'pipe' });
  // Asynchronously: the service answering it runs in this process.
  const { stdout: out } = await promisify(execFile)(process.execPath, ['out/main.js'], { cwd: dir, encoding: 'utf8' });
  const result = JSON.parse(out) as { status: number; names: string[] };
  expect(result.status).toBe(201);
  expect(result.names).toContain('from-the-package');
}, 120_000);

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkLayers, formatViolation } from '../../scripts/lib/layers.js';

/** A project of the given files (path -> text) in a temporary directory. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'nexus-layers-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, dirname(path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  roots.push(root);
  return root;
}
const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe('the layer check (scripts/check-layers.ts)', () => {
  it('lets a layer import one below it', () => {
    const root = tree({
      'src/domain/plans/plan-service.ts': "import { AppError } from '../../errors.js';\n",
      'src/errors.ts': 'export class AppError {}\n',
    });
    expect(checkLayers(root)).toEqual([]);
  });

  it('refuses an import up a layer, type-only ones too, naming the file, the line and the layers', () => {
    const root = tree({
      'src/domain/plans/plan-service.ts': "// the plans\nimport type { Gateway } from '../../gateway/gateway.js';\n",
      'src/gateway/gateway.ts': 'export type Gateway = object;\n',
    });
    expect(checkLayers(root).map(formatViolation)).toEqual([
      'src/domain/plans/plan-service.ts:2 (domain) imports src/gateway/gateway.js (gateway): a layer above it',
    ]);
  });

  it('refuses an import between peers, and from the console into src/', () => {
    const root = tree({
      'src/http/middleware.ts': "import { pathOf } from '../gateway/path-safety.js';\n",
      'src/gateway/path-safety.ts': 'export const pathOf = 1;\n',
      'console/src/api.ts':
        "import { loadConfig } from '../../src/config.js';\nimport { client } from '../../generated/client/index.js';\n",
      'src/config.ts': 'export const loadConfig = 1;\n',
    });
    expect(checkLayers(root).map(formatViolation)).toEqual([
      'src/http/middleware.ts:1 (http) imports src/gateway/path-safety.js (gateway): a peer',
      'console/src/api.ts:1 (console) imports src/config.js (base): console may import only contract',
    ]);
  });

  it('refuses a file that no layer holds', () => {
    const root = tree({ 'src/stray.ts': 'export {};\n' });
    expect(checkLayers(root).map(formatViolation)).toEqual([
      'src/stray.ts is in no layer: add it to LAYERS (scripts/lib/layers.ts) and docs/architecture.md',
    ]);
  });
});

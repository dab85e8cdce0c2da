import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { formatHouse, houseNumbers } from '../../scripts/lib/house.js';
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

  it('keeps the Batch API above the gateway and the records below it: only the composition imports the Batch API', () => {
    const root = tree({
      'src/gateway/gateway.ts':
        "import { createBatches } from '../batches/batches.js';\nimport { CallRecorder } from '../records/call-recorder.js';\n",
      'src/batches/batches.ts': "import type { GatewayParts } from '../gateway/gateway-parts.js';\n",
      'src/gateway/gateway-parts.ts': 'export type GatewayParts = object;\n',
      'src/records/call-recorder.ts': "import type { AuthRow } from '../gateway/auth-repo.js';\nexport class CallRecorder {}\n",
      'src/gateway/auth-repo.ts': 'export type AuthRow = object;\n',
      'src/realtime/realtime-gateway.ts': "import { createBatches } from '../batches/batches.js';\n",
      'src/app.ts': "import { createBatches } from './batches/batches.js';\n",
    });
    expect(checkLayers(root).map(formatViolation).sort()).toEqual([
      'src/gateway/gateway.ts:1 (gateway) imports src/batches/batches.js (batches): a layer above it',
      'src/realtime/realtime-gateway.ts:1 (realtime) imports src/batches/batches.js (batches): realtime may import only base, observability, db, protocols, domain, web, records, gateway',
      'src/records/call-recorder.ts:1 (records) imports src/gateway/auth-repo.js (gateway): records may import only base, observability, db, protocols, domain',
    ]);
  });

  it('refuses a file that no layer holds', () => {
    const root = tree({ 'src/stray.ts': 'export {};\n' });
    expect(checkLayers(root).map(formatViolation)).toEqual([
      'src/stray.ts is in no layer: add it to LAYERS (scripts/lib/layers.ts) and docs/architecture.md',
    ]);
  });
});

describe('the domain areas order (DOMAIN in scripts/lib/layers.ts)', () => {
  it('lets an area import one below it', () => {
    const root = tree({
      'src/domain/plans/plan-service.ts':
        "import type { QuotaRepo } from '../quota/quota-repo.js';\nimport type { Actor } from '../actor.js';\n",
      'src/domain/quota/quota-repo.ts': "import { lockedInIdOrder } from '../recording/locks.js';\n",
      'src/domain/recording/locks.ts': 'export const lockedInIdOrder = 1;\n',
      'src/domain/actor.ts': 'export type Actor = object;\n',
    });
    expect(checkLayers(root)).toEqual([]);
  });

  it('refuses an area importing one above it, and two peers importing each other', () => {
    const root = tree({
      'src/domain/quota/settlement-sql.ts': "\nimport { priceOfCall } from '../prices/price-sql.js';\n",
      'src/domain/prices/price-sql.ts': 'export const priceOfCall = 1;\n',
      'src/domain/routes/route-service.ts': "import type { PlanRow } from '../plans/plan-types.js';\n",
      'src/domain/plans/plan-types.ts': 'export type PlanRow = object;\n',
    });
    expect(checkLayers(root).map(formatViolation)).toEqual([
      'src/domain/quota/settlement-sql.ts:2 (domain/quota) imports src/domain/prices/price-sql.js (domain/prices): a layer above it',
      'src/domain/routes/route-service.ts:1 (domain/routes) imports src/domain/plans/plan-types.js (domain/plans): a peer',
    ]);
  });

  it('refuses a domain file that its order does not place, and an import of one', () => {
    const root = tree({
      'src/domain/jobs/jobs.ts': 'export {};\n',
      'src/domain/billing/billing-service.ts': "import '../jobs/jobs.js';\n",
    });
    expect(checkLayers(root).map(formatViolation)).toEqual([
      'src/domain/billing/billing-service.ts:1 imports src/domain/jobs/jobs.js, which is in no layer of domain',
      'src/domain/jobs/jobs.ts is in no layer of domain: add it to its order (scripts/lib/layers.ts) and docs/architecture.md',
    ]);
  });

  it('places the domain composition at its top: it imports every area', () => {
    const root = tree({
      'src/domain/services.ts': "import { createBilling } from './billing/billing-service.js';\n",
      'src/domain/billing/billing-service.ts': "import type { ServiceDeps } from '../services.js';\n",
    });
    expect(checkLayers(root).map(formatViolation)).toEqual([
      'src/domain/billing/billing-service.ts:1 (domain/billing) imports src/domain/services.js (domain/services): a layer above it',
    ]);
  });
});

describe('the house numbers (npm run lint:layers -- --house)', () => {
  const lines = (n: number, line: string) => Array.from({ length: n }, () => line).join('\n') + '\n';

  it('counts the lines of each layer, the files and functions over their size and the imports against the rule', () => {
    const root = tree({
      'src/errors.ts': lines(10, '// base'),
      'src/gateway/gateway.ts': `export function createGateway() {\n${lines(150, '  void 0;')}}\n${lines(300, '// more')}`,
      'src/domain/quota/quota-repo.ts': "import '../../gateway/gateway.js';\n",
      'scripts/bench.ts': `const main = () => {\n${lines(149, '  void 0;')}};\nvoid main;\n`,
    });
    const house = houseNumbers(root);
    expect(house.layers).toEqual([
      { name: 'base', files: 1, lines: 10 },
      { name: 'domain', files: 1, lines: 1 },
      { name: 'domain/quota', files: 1, lines: 1 },
      { name: 'gateway', files: 1, lines: 452 },
    ]);
    expect(house.longFiles).toEqual([{ file: 'src/gateway/gateway.ts', lines: 452 }]);
    expect(house.longFunctions).toEqual([
      { file: 'src/gateway/gateway.ts', line: 1, name: 'createGateway', lines: 152 },
      { file: 'scripts/bench.ts', line: 1, name: 'main', lines: 151 },
    ]);
    expect(house.againstLayers).toBe(1);
    expect(formatHouse(house)).toContain('Functions over 150 lines outside tests: 2');
  });
});

/**
 * The last step of `npm run generate`: makes generated/ the client package around what
 * @hey-api/openapi-ts wrote to generated/client/. It writes
 *   - client/resources.gen.ts (the resource API, `new Nexus(...)`), client/codes.gen.ts (the error codes) and
 *     client/operations.gen.ts (the operations that take an Idempotency-Key),
 *     generated from the contract's tags, operationIds and error codes by scripts/client-resources.ts,
 *   - from scripts/client-package/: package.json, its version the contract's `info.version` (one version for
 *     the API and its client), README.md, CHANGELOG.md, tsconfig.json, typedoc.json and the repository's LICENSE,
 *   - client/nexus.ts (the package's entry), client/runtime.ts (retries, timeouts, pages, streams), client/errors.ts
 *     and client/webhooks.ts (`nexus.webhooks.verify`), the hand-written layer over the generated SDK.
 * Edit them in scripts/client-package/ or the generator: generated/ is rewritten by every `npm run generate`.
 */
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { codesSource, operationsSource, resourcesSource, type Contract } from './client-resources.js';

const root = join(import.meta.dirname, '..');
const from = (file: string) => join(root, 'scripts', 'client-package', file);
const to = (file: string) => join(root, 'generated', file);

const contract = JSON.parse(readFileSync(to('openapi.json'), 'utf8')) as Contract;
const pkg = JSON.parse(readFileSync(from('package.json'), 'utf8')) as { version: string; publishConfig: Record<string, unknown> };
pkg.version = contract.info.version;
// A prerelease (1.0.0-beta.1) is published under the dist-tag `next`, so that `npm install` keeps giving the latest release.
pkg.publishConfig.tag = pkg.version.includes('-') ? 'next' : 'latest';
writeFileSync(to('package.json'), JSON.stringify(pkg, null, 2) + '\n');

for (const file of ['README.md', 'CHANGELOG.md', 'tsconfig.json', 'typedoc.json']) copyFileSync(from(file), to(file));
copyFileSync(join(root, 'LICENSE'), to('LICENSE'));
for (const file of ['nexus.ts', 'runtime.ts', 'errors.ts', 'webhooks.ts']) {
  writeFileSync(
    to(join('client', file)),
    `// This file is copied from scripts/client-package/${file} by \`npm run generate\`: edit it there.\n\n` +
      readFileSync(from(file), 'utf8'),
  );
}
writeFileSync(to(join('client', 'resources.gen.ts')), resourcesSource(contract));
writeFileSync(to(join('client', 'codes.gen.ts')), codesSource(contract));
writeFileSync(to(join('client', 'operations.gen.ts')), operationsSource(contract));

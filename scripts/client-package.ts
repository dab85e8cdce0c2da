/**
 * The last step of `npm run generate`: makes generated/ the @nexus/client package around what
 * @hey-api/openapi-ts wrote to generated/client/. From scripts/client-package/ it writes
 *   - package.json, its version the contract's `info.version` (one version for the API and its client),
 *   - README.md, tsconfig.json and the repository's LICENSE,
 *   - client/nexus.ts, the package's entry: the hand-written layer (NexusError, createNexusClient,
 *     paginate) over the generated SDK, for what the generator does not make.
 * Edit them in scripts/client-package/: generated/ is rewritten by every `npm run generate`.
 */
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const from = (file: string) => join(root, 'scripts', 'client-package', file);
const to = (file: string) => join(root, 'generated', file);

const contract = JSON.parse(readFileSync(to('openapi.json'), 'utf8')) as { info: { version: string } };
const pkg = JSON.parse(readFileSync(from('package.json'), 'utf8')) as { version: string };
pkg.version = contract.info.version;
writeFileSync(to('package.json'), JSON.stringify(pkg, null, 2) + '\n');

for (const file of ['README.md', 'tsconfig.json']) copyFileSync(from(file), to(file));
copyFileSync(join(root, 'LICENSE'), to('LICENSE'));
writeFileSync(
  to(join('client', 'nexus.ts')),
  '// This file is copied from scripts/client-package/nexus.ts by `npm run generate`: edit it there.\n\n' +
    readFileSync(from('nexus.ts'), 'utf8'),
);

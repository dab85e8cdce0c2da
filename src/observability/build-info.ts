/**
 * What the running build is, for `nexus_build_info`: the version of package.json, the commit it was built
 * from, and the Node.js version. The commit is NEXUS_COMMIT when set (an image built without its git
 * history), else what `npm run build` read from git into dist/build-info.json (scripts/build.mjs), else
 * "unknown". Run from the sources (tsx), a dist/ of another build is not read.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BuildInfo } from './metrics.js';

const here = dirname(fileURLToPath(import.meta.url));
/** The project's root, from src/observability/ or dist/observability/. */
const root = join(here, '..', '..');

function readJson(file: string): Record<string, unknown> | undefined {
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

export function buildInfo(commit: string | undefined): BuildInfo {
  const version = readJson(join(root, 'package.json'))?.version;
  // Next to the compiled code: dist/build-info.json when running dist/, nothing when running src/.
  const built = readJson(join(here, '..', 'build-info.json'))?.commit;
  return {
    version: typeof version === 'string' ? version : 'unknown',
    commit: commit ?? (typeof built === 'string' && built ? built : 'unknown'),
    node: process.versions.node,
  };
}

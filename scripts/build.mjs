// @ts-check
/**
 * `npm run build:server`: compiles src/ to dist/ and migrations/ to dist/migrations/, file by file
 * (esbuild strips the types; nothing is bundled), for `npm start` and the container image to run with
 * plain node. Type checking is `npm run lint`'s job (tsc --noEmit), not the build's.
 *
 * Plain JavaScript, run by node: `npm start` runs it first each time, and through tsx it took about
 * twice as long (tsx's own start-up, ~0.5 s).
 *
 * dist/ mirrors src/, so what src/ finds relative to itself (generated/openapi.json from src/app.ts,
 * one level up) it finds from dist/ too; src/db/migrate.ts knows both layouts.
 *
 * The API reference's renderer (/docs/standalone.js) is one prebuilt file of @scalar/api-reference, a
 * development dependency: copied to dist/docs/ here, so production installs none of its tool chain.
 *
 * Compiled files whose source is gone are removed; whatever else dist/ holds (the console's build)
 * is left alone.
 */
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const root = join(import.meta.dirname, '..');

/** @param {string} dir */
function tsFiles(dir) {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => join(dir, f));
}

/**
 * Removes dist/**.js(.map) compiled from a source under `sourceDir` that no longer exists.
 * @param {string} sourceDir
 * @param {string} outDir
 */
function removeOrphans(sourceDir, outDir) {
  if (!existsSync(outDir)) return;
  const sourceSubdirs = new Set(
    readdirSync(sourceDir, { recursive: true, encoding: 'utf8' }).filter((f) => statSync(join(sourceDir, f)).isDirectory()),
  );
  for (const file of readdirSync(outDir, { recursive: true, encoding: 'utf8' })) {
    const match = /^(.*)\.js(\.map)?$/.exec(file);
    if (!match) continue;
    const name = /** @type {string} */ (match[1]);
    const dir = name.includes('/') ? name.slice(0, name.lastIndexOf('/')) : '';
    // Only within the directories that mirror the sources: dist/console and the like are not ours.
    if (dir && !sourceSubdirs.has(dir)) continue;
    if (!existsSync(join(sourceDir, `${name}.ts`))) rmSync(join(outDir, file));
  }
}

const started = performance.now();
const dist = join(root, 'dist');
for (const [sourceDir, outDir] of [
  [join(root, 'src'), dist],
  [join(root, 'migrations'), join(dist, 'migrations')],
]) {
  await build({
    entryPoints: tsFiles(sourceDir),
    outbase: sourceDir,
    outdir: outDir,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    // Stack traces point at the TypeScript (node --enable-source-maps); the sources stay out of the maps.
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'warning',
  });
}
// A stale migration would run: what no source compiles to any more is removed, file by file. The directory is never
// emptied, so a process started from dist/ while it rebuilds (a test beside the release script's build) finds its
// migrations.
removeOrphans(join(root, 'src'), dist);
removeOrphans(join(root, 'migrations'), join(dist, 'migrations'));
const require = createRequire(import.meta.url);
const apiReference = dirname(require.resolve('@scalar/api-reference'));
mkdirSync(join(dist, 'docs'), { recursive: true });
copyFileSync(join(apiReference, 'browser', 'standalone.js'), join(dist, 'docs', 'standalone.js'));
// The commit built, for nexus_build_info (src/observability/build-info.ts): NEXUS_COMMIT, else git's HEAD.
let commit = process.env.NEXUS_COMMIT ?? '';
if (!commit) {
  try {
    commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    // Not a git checkout (an image's build stage): the commit stays unknown unless NEXUS_COMMIT is set at run time.
  }
}
writeFileSync(join(dist, 'build-info.json'), `${JSON.stringify({ commit: commit || 'unknown' })}\n`);
console.log(`built dist/ in ${Math.round(performance.now() - started)} ms`);

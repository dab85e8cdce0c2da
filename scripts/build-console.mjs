// @ts-check
/**
 * `npm run build:console`: bundles the operator console (console/) into dist/console/, which the
 * server serves at /console (src/app.ts). One JavaScript and one CSS file, everything bundled
 * (Preact, uPlot, the generated client): no CDN, so it works offline and under a strict CSP.
 * Each text file is also written precompressed (.br and .gz beside it), once here rather than on every
 * request; src/app.ts serves the one the browser accepts.
 * The bundle is built beside dist/console and then put in its place with two renames, so that a server serving the
 * console while it is rebuilt (`npm run build` of a release, say) finds the old files or the new ones, never an
 * empty or half-written directory.
 */
import { build } from 'esbuild';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const root = join(import.meta.dirname, '..');
const built = join(root, 'dist', 'console');
const out = join(root, 'dist', `console.next-${process.pid}`);
const old = join(root, 'dist', `console.old-${process.pid}`);
const started = performance.now();
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: join(root, 'console', 'src', 'main.tsx') },
  outdir: out,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  minify: true,
  sourcemap: 'linked',
  sourcesContent: false,
  legalComments: 'linked',
  logLevel: 'warning',
});
copyFileSync(join(root, 'console', 'index.html'), join(out, 'index.html'));
copyFileSync(join(root, 'console', 'favicon.svg'), join(out, 'favicon.svg'));
for (const name of readdirSync(out).filter((n) => /\.(js|css|html|svg)$/.test(n))) {
  const body = readFileSync(join(out, name));
  writeFileSync(join(out, `${name}.br`), brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }));
  writeFileSync(join(out, `${name}.gz`), gzipSync(body, { level: 9 }));
}
if (existsSync(built)) renameSync(built, old);
renameSync(out, built);
rmSync(old, { recursive: true, force: true });
console.log(`built dist/console/ in ${Math.round(performance.now() - started)} ms`);

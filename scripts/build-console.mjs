// @ts-check
/**
 * `npm run build:console`: bundles the operator console (console/) into dist/console/, which the
 * server serves at /console (src/app.ts). One JavaScript and one CSS file, everything bundled
 * (Preact, uPlot, the generated client): no CDN, so it works offline and under a strict CSP.
 * Each text file is also written precompressed (.br and .gz beside it), once here rather than on every
 * request; src/app.ts serves the one the browser accepts.
 */
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const root = join(import.meta.dirname, '..');
const out = join(root, 'dist', 'console');
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
console.log(`built dist/console/ in ${Math.round(performance.now() - started)} ms`);

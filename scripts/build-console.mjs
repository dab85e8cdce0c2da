// @ts-check
/**
 * `npm run build:console`: bundles the operator console (console/) into dist/console/, which the
 * server serves at /console (src/app.ts). One JavaScript and one CSS file, everything bundled
 * (Preact, uPlot, the generated client): no CDN, so it works offline and under a strict CSP.
 */
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

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
console.log(`built dist/console/ in ${Math.round(performance.now() - started)} ms`);

/**
 * What the app serves besides the API itself: the contract (/openapi.json), its reference page (/docs, with the
 * renderer's bundle) and the operator console (/console, and / when it is built). None of them needs the database.
 */
import express, { type Express, type Request, type Response } from 'express';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Document } from 'openapi-backend';
import { pathOf } from '../web/request-target.js';
import { precompressed } from './precompressed.js';
import type { PublicUrl } from './public-url.js';

/** The project's root (dist/ mirrors src/: the same from either). */
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The contract as served: its one server is the one the reader should call (PublicUrl.forRequest). */
function contractFor(definition: Document, server: string): Document {
  return { ...definition, servers: [{ url: server, description: 'This Nexus' }] };
}

const htmlAttribute = (value: string) => value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

/**
 * The API reference page; its "Test request" goes to `server`. Its own assets load by relative URL (`up`: the
 * way from the page's path to the root, '../' for /docs/), so they come from wherever the page came from, a
 * proxy's path prefix included, and never from a host the request named.
 */
function docsPage(server: string, up: string): string {
  // Scalar's default fonts come from its own host; the page uses the system's instead (its policy loads nothing else).
  const configuration = JSON.stringify({ servers: [{ url: server, description: 'This Nexus' }], withDefaultFonts: false });
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Nexus API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body>
<script id="api-reference" data-url="${htmlAttribute(`${up}openapi.json`)}" data-configuration="${htmlAttribute(configuration)}"></script>
<script src="${htmlAttribute(`${up}docs/standalone.js`)}"></script>
</body>
</html>`;
}

/**
 * The API reference page's Content-Security-Policy: its own script, the styles the renderer writes into the page
 * (it sets them inline), images of the contract's descriptions, and requests to this Nexus only: the contract, and
 * a "Test request" to `server` (the origin the page names: NEXUS_PUBLIC_URL's when it is set). Nothing inline
 * runs, nothing frames the page.
 */
function docsPolicy(server: string): string {
  const origin = URL.canParse(server) ? new URL(server).origin : '';
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    `connect-src 'self'${origin ? ` ${origin}` : ''}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The operator console (console/, built into dist/console by `npm run build:console`): static files
 * under a strict Content-Security-Policy (its own scripts, styles and API calls only; no inline script,
 * no frame). index.html is revalidated on every load so a new build is picked up; the bundles too,
 * since their names carry no hash.
 */
function consoleRouter(dir: string): express.Router {
  const router = express.Router();
  router.use((_req: Request, res: Response, next: () => void) => {
    res.set({
      'Content-Security-Policy':
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
      'Cache-Control': 'no-cache',
    });
    next();
  });
  // /console itself: its page's relative URLs (app.js) need the trailing slash. Relative, so a proxy's path prefix stays.
  router.get('/', (req: Request, res: Response, next: () => void) => {
    if (pathOf(req.originalUrl).endsWith('/')) return next();
    const q = req.originalUrl.indexOf('?');
    res.redirect(301, `console/${q < 0 ? '' : req.originalUrl.slice(q)}`);
  });
  router.use(precompressed(dir));
  router.use(express.static(dir, { index: 'index.html', etag: true, lastModified: true, fallthrough: true }));
  router.use((_req: Request, res: Response) => {
    const built = existsSync(join(dir, 'index.html'));
    res
      .status(built ? 404 : 503)
      .type('text/plain')
      .send(built ? 'Not found in the console.\n' : 'The console is not built: run `npm run build` (it writes dist/console).\n');
  });
  return router;
}

/**
 * The API reference's renderer, one prebuilt file: scripts/build.mjs copies it from @scalar/api-reference
 * (a development dependency, so production installs none of its tool chain) to dist/docs/. Run from src/
 * without a build, the package's own copy serves.
 */
function apiReferenceBundle(): string {
  const vendored = join(root, 'dist', 'docs', 'standalone.js');
  if (existsSync(vendored)) return vendored;
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('@scalar/api-reference')), 'browser', 'standalone.js');
}

/** Mounts the contract, its reference page and the console on `app`. */
export function servePages(app: Express, deps: { definition: Document; publicUrl: PublicUrl }): void {
  const { definition, publicUrl } = deps;
  app.get('/openapi.json', (req: Request, res: Response) => {
    res.json(contractFor(definition, publicUrl.forRequest(req)));
  });
  const scalarBundle = apiReferenceBundle();
  app.get('/docs', (req: Request, res: Response) => {
    const server = publicUrl.forRequest(req);
    res.set({ 'Content-Security-Policy': docsPolicy(server), 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' });
    res.type('html').send(docsPage(server, pathOf(req.originalUrl).endsWith('/') ? '../' : ''));
  });
  app.get('/docs/standalone.js', (_req: Request, res: Response) => {
    res.type('application/javascript').sendFile(scalarBundle);
  });
  app.use('/console', consoleRouter(join(root, 'dist', 'console')));
  // `/`: the console when it is built; otherwise the API's own answer.
  app.get('/', (req: Request, res: Response, next: () => void) => {
    if (!existsSync(join(root, 'dist', 'console', 'index.html'))) return next();
    res.redirect(302, 'console/');
  });
}

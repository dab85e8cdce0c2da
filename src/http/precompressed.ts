/**
 * The console's bundles precompressed: scripts/build-console.mjs writes `<file>.br` and `<file>.gz` beside
 * each text file once, at build time, so no request pays for compressing (and the best brotli level is
 * affordable). This serves the one the request accepts, with its Content-Encoding, and `Vary:
 * Accept-Encoding` on every answer a cache could otherwise mix up; anything else falls through to the
 * plain files.
 */
import type { NextFunction, Request, Response } from 'express';
import { existsSync } from 'node:fs';
import { extname, join } from 'node:path';

const COMPRESSIBLE = /^[\w.-]+\.(?:js|css|html|svg)$/;

export function precompressed(dir: string, index = 'index.html') {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    const name = req.path === '/' ? index : req.path.slice(1);
    if (!COMPRESSIBLE.test(name)) return next();
    res.vary('Accept-Encoding');
    const encoding = req.acceptsEncodings('br', 'gzip');
    if (encoding !== 'br' && encoding !== 'gzip') return next();
    const file = join(dir, `${name}.${encoding === 'br' ? 'br' : 'gz'}`);
    if (!existsSync(file)) return next();
    // The original's type (send keeps a Content-Type already set), not the .br/.gz file's.
    res.type(extname(name));
    res.set('Content-Encoding', encoding);
    res.sendFile(file, { lastModified: true }, (err?: Error) => {
      if (err && !res.headersSent) next(err);
    });
  };
}

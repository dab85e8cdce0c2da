/**
 * The layer rule (docs/architecture.md, "The layers"): a file imports only from its own layer or from a
 * layer below it. Layers on one rank are peers and do not import each other (the Admin API's glue and the
 * gateway share what they share through src/web/). The console sees only the generated client.
 *
 * Imports are read with TypeScript's own pre-processor: static imports and exports, `import type`, and
 * `import('...')`; a type-only import counts like any other. Package imports are not checked here.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, posix, sep } from 'node:path';
import ts from 'typescript';

export interface Layer {
  name: string;
  /** Folders (ending in `/`) and files, relative to the project's root. */
  paths: string[];
  /** Instead of "every layer below": the only other layers it may import. */
  only?: string[];
}

/** Bottom to top; the layers of one inner array are peers. */
const LAYERS: Layer[][] = [
  [
    {
      name: 'base',
      paths: ['src/config.ts', 'src/trust-proxy.ts', 'src/errors.ts', 'src/ids.ts', 'src/database-unavailable.ts', 'src/cli-args.ts'],
    },
  ],
  [{ name: 'observability', paths: ['src/observability/'] }],
  [{ name: 'db', paths: ['src/db/'] }],
  // What Nexus knows of each API it meters (a table a protocol): read by the domain and the gateway, it needs only base.
  [{ name: 'protocols', paths: ['src/protocols/'], only: ['base'] }],
  [{ name: 'domain', paths: ['src/domain/'] }],
  [{ name: 'contract', paths: ['generated/'] }],
  [{ name: 'web', paths: ['src/web/'] }],
  [
    { name: 'http', paths: ['src/http/'] },
    { name: 'gateway', paths: ['src/gateway/'] },
  ],
  [{ name: 'handlers', paths: ['src/handlers/'] }],
  [
    {
      name: 'composition',
      paths: ['src/app.ts', 'src/front-door.ts', 'src/jobs.ts', 'src/server.ts', 'src/cli.ts', 'src/workers.ts', 'src/healthcheck.ts'],
    },
  ],
  [{ name: 'console', paths: ['console/'], only: ['contract'] }],
];

/** Where the checked files are, relative to the root. */
const ROOTS = ['src', 'console/src'];
const SOURCE = /\.(ts|tsx|mts)$/;

export interface Violation {
  file: string;
  line: number;
  imported: string;
  message: string;
}

/** A path without its extension, with `/` separators: `src/config.js` and `src/config.ts` are one file. */
const bare = (path: string) =>
  path
    .split(sep)
    .join('/')
    .replace(/\.(ts|tsx|mts|js|jsx|mjs)$/, '');

interface Placed {
  layer: Layer;
  rank: number;
}

function placeOf(path: string, layers: Layer[][]): Placed | undefined {
  const file = bare(path);
  let best: (Placed & { length: number }) | undefined;
  layers.forEach((peers, rank) => {
    for (const layer of peers) {
      for (const p of layer.paths) {
        const hit = p.endsWith('/') ? file.startsWith(p) || file === p.slice(0, -1) : file === bare(p);
        // The longest matching entry wins: a file listed by name inside a folder of another layer.
        if (hit && (!best || p.length > best.length)) best = { layer, rank, length: p.length };
      }
    }
  });
  return best && { layer: best.layer, rank: best.rank };
}

function mayImport(from: Placed, to: Placed): boolean {
  if (from.layer === to.layer) return true;
  if (from.layer.only) return from.layer.only.includes(to.layer.name);
  return to.rank < from.rank;
}

function sourceFiles(root: string, dir: string): string[] {
  const full = join(root, dir);
  let entries: string[];
  try {
    entries = readdirSync(full);
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(root, rel)).isDirectory()) return sourceFiles(root, rel);
    return SOURCE.test(name) && !name.endsWith('.d.ts') ? [rel] : [];
  });
}

/** Every import of the files under src/ and console/src/ that runs up or across a layer, or from a file no layer holds. */
export function checkLayers(root: string, layers: Layer[][] = LAYERS): Violation[] {
  const violations: Violation[] = [];
  for (const file of ROOTS.flatMap((dir) => sourceFiles(root, dir))) {
    const posixFile = file.split(sep).join('/');
    const from = placeOf(posixFile, layers);
    if (!from) {
      violations.push({
        file: posixFile,
        line: 0,
        imported: '',
        message: 'is in no layer: add it to LAYERS (scripts/lib/layers.ts) and docs/architecture.md',
      });
      continue;
    }
    const text = readFileSync(join(root, file), 'utf8');
    const { importedFiles } = ts.preProcessFile(text, true, true);
    for (const imported of importedFiles) {
      if (!imported.fileName.startsWith('.')) continue;
      const target = posix.normalize(posix.join(dirname(posixFile), imported.fileName));
      const to = placeOf(target, layers);
      const line = text.slice(0, imported.pos).split('\n').length;
      if (!to) {
        violations.push({ file: posixFile, line, imported: imported.fileName, message: `imports ${target}, which is in no layer` });
      } else if (!mayImport(from, to)) {
        const why = from.layer.only
          ? `${from.layer.name} may import only ${from.layer.only.join(', ')}`
          : to.rank === from.rank
            ? 'a peer'
            : 'a layer above it';
        violations.push({
          file: posixFile,
          line,
          imported: imported.fileName,
          message: `(${from.layer.name}) imports ${target} (${to.layer.name}): ${why}`,
        });
      }
    }
  }
  return violations;
}

/** One line per violation, as a compiler would print it. */
export const formatViolation = (v: Violation) => `${v.file}${v.line ? `:${v.line}` : ''} ${v.message}`;

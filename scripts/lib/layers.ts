/**
 * The layer rule (docs/architecture.md, "The layers"): a file imports only from its own layer or from a
 * layer below it. Layers on one rank are peers and do not import each other (the Admin API's glue and the
 * gateway share what they share through src/web/). The console sees only the generated client.
 *
 * Inside a layer, the same rule may hold again: the domain's areas are layered by DOMAIN, so no area imports
 * one above it and no two areas import each other.
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
      paths: [
        'src/config.ts',
        'src/config-people.ts',
        'src/config-archive.ts',
        'src/config-values.ts',
        'src/trust-proxy.ts',
        'src/errors.ts',
        'src/ids.ts',
        'src/database-unavailable.ts',
        'src/cli-args.ts',
      ],
    },
  ],
  [{ name: 'observability', paths: ['src/observability/'] }],
  [{ name: 'db', paths: ['src/db/'] }],
  // What Nexus knows of each API it meters (a table a protocol): read by the domain and the gateway, it needs only base.
  [{ name: 'protocols', paths: ['src/protocols/'], only: ['base'] }],
  [{ name: 'domain', paths: ['src/domain/'] }],
  [{ name: 'contract', paths: ['generated/'] }],
  [{ name: 'web', paths: ['src/web/'] }],
  // The records of calls (a call's invocation, rows and request log; the recorder and its spool): written by the
  // gateway's meter, for Realtime sessions' turns too, they need neither the web's glue nor the gateway.
  [{ name: 'records', paths: ['src/records/'], only: ['base', 'observability', 'db', 'protocols', 'domain'] }],
  [
    { name: 'http', paths: ['src/http/'] },
    { name: 'gateway', paths: ['src/gateway/'] },
  ],
  // Realtime sessions and the Batch API sit on the gateway (its admission, meter and records); only the composition
  // wires them: the gateway is handed the Batch API's paths (src/gateway/taken-paths.ts) and never imports either.
  [
    { name: 'handlers', paths: ['src/handlers/'] },
    {
      name: 'realtime',
      paths: ['src/realtime/'],
      only: ['base', 'observability', 'db', 'protocols', 'domain', 'web', 'records', 'gateway'],
    },
    {
      name: 'batches',
      paths: ['src/batches/'],
      only: ['base', 'observability', 'db', 'protocols', 'domain', 'web', 'gateway'],
    },
  ],
  [
    {
      name: 'composition',
      paths: [
        'src/app.ts',
        'src/front-door.ts',
        'src/jobs.ts',
        'src/server.ts',
        'src/cli.ts',
        'src/workers.ts',
        'src/healthcheck.ts',
        'src/warm-http.ts',
      ],
    },
  ],
  [{ name: 'console', paths: ['console/'], only: ['contract'] }],
];

/**
 * The domain's areas (src/domain/<area>/) and its own files, bottom to top; the areas of one inner array are peers.
 * An area imports only from areas below it: a type or a helper two areas share lives in the lower one.
 */
const DOMAIN: Layer[][] = [
  // What every area speaks: who acts and when, pages, bound dependencies, text fit to store.
  [
    {
      name: 'domain/kernel',
      paths: ['src/domain/actor.ts', 'src/domain/bind.ts', 'src/domain/pagination.ts', 'src/domain/storable-text.ts'],
    },
  ],
  [
    { name: 'domain/security', paths: ['src/domain/security/'] },
    { name: 'domain/changes', paths: ['src/domain/changes/'] },
  ],
  [{ name: 'domain/audit', paths: ['src/domain/audit/'] }],
  [{ name: 'domain/workspaces', paths: ['src/domain/workspaces/'] }],
  [
    { name: 'domain/events', paths: ['src/domain/events/'] },
    { name: 'domain/idempotency', paths: ['src/domain/idempotency/'] },
    { name: 'domain/management-keys', paths: ['src/domain/management-keys/'] },
    { name: 'domain/people', paths: ['src/domain/people/'] },
    { name: 'domain/request-logs', paths: ['src/domain/request-logs/'] },
  ],
  // The record statement: a batch of calls settled, charged, priced, rolled up, its thresholds raised.
  [{ name: 'domain/recording', paths: ['src/domain/recording/'] }],
  [{ name: 'domain/rate-limits', paths: ['src/domain/rate-limits/'] }],
  [{ name: 'domain/quota', paths: ['src/domain/quota/'] }],
  [
    { name: 'domain/provider-connections', paths: ['src/domain/provider-connections/'] },
    { name: 'domain/inference-keys', paths: ['src/domain/inference-keys/'] },
    { name: 'domain/budgets', paths: ['src/domain/budgets/'] },
  ],
  [
    { name: 'domain/routes', paths: ['src/domain/routes/'] },
    { name: 'domain/prices', paths: ['src/domain/prices/'] },
    { name: 'domain/plans', paths: ['src/domain/plans/'] },
    { name: 'domain/invocations', paths: ['src/domain/invocations/'] },
    { name: 'domain/history', paths: ['src/domain/history/'] },
  ],
  [{ name: 'domain/accesses', paths: ['src/domain/accesses/'] }],
  [{ name: 'domain/billing', paths: ['src/domain/billing/'] }],
  // The domain's composition: every service built from its dependencies.
  [{ name: 'domain/services', paths: ['src/domain/services.ts'] }],
];

/** The layers whose files are layered again among themselves, by the layer's name. */
const INNER: Record<string, Layer[][]> = { domain: DOMAIN };

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

/** The source files under `dir` (relative to the root), as paths relative to the root. */
export function sourceFiles(root: string, dir: string): string[] {
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
export function checkLayers(root: string, layers: Layer[][] = LAYERS, inner: Record<string, Layer[][]> = INNER): Violation[] {
  return ROOTS.flatMap((dir) => sourceFiles(root, dir)).flatMap((file) => checkFile(root, file.split(sep).join('/'), layers, inner));
}

function checkFile(root: string, file: string, layers: Layer[][], inner: Record<string, Layer[][]>): Violation[] {
  const from = placeOf(file, layers);
  if (!from) {
    return [{ file, line: 0, imported: '', message: 'is in no layer: add it to LAYERS (scripts/lib/layers.ts) and docs/architecture.md' }];
  }
  const within = inner[from.layer.name];
  const fromWithin = within && placeOf(file, within);
  if (within && !fromWithin) {
    const message = `is in no layer of ${from.layer.name}: add it to its order (scripts/lib/layers.ts) and docs/architecture.md`;
    return [{ file, line: 0, imported: '', message }];
  }
  const text = readFileSync(join(root, file), 'utf8');
  const violations: Violation[] = [];
  for (const imported of ts.preProcessFile(text, true, true).importedFiles) {
    if (!imported.fileName.startsWith('.')) continue;
    const target = posix.normalize(posix.join(dirname(file), imported.fileName));
    const to = placeOf(target, layers);
    let message = refusal(from, target, to);
    // Between two files of one layer that is layered again, its own order decides.
    if (!message && within && fromWithin && to?.layer === from.layer)
      message = refusal(fromWithin, target, placeOf(target, within), from.layer.name);
    if (message) violations.push({ file, line: text.slice(0, imported.pos).split('\n').length, imported: imported.fileName, message });
  }
  return violations;
}

/** Why a file placed at `from` may not import `target` (placed at `to`), or undefined when it may. */
function refusal(from: Placed, target: string, to: Placed | undefined, outer?: string): string | undefined {
  if (!to) return `imports ${target}, which is in no layer${outer ? ` of ${outer}` : ''}`;
  if (mayImport(from, to)) return undefined;
  const why = from.layer.only
    ? `${from.layer.name} may import only ${from.layer.only.join(', ')}`
    : to.rank === from.rank
      ? 'a peer'
      : 'a layer above it';
  return `(${from.layer.name}) imports ${target} (${to.layer.name}): ${why}`;
}

/**
 * The files and lines (by `count`) of each layer that has files here, bottom to top, each layered layer followed by
 * its own layers. Files no layer holds are left out (checkLayers reports them).
 */
export function layerLines(
  root: string,
  count: (file: string) => number,
  layers: Layer[][] = LAYERS,
  inner: Record<string, Layer[][]> = INNER,
) {
  const all = [...layers.flat(), ...Object.values(inner).flatMap((l) => l.flat())];
  const totals = new Map(all.map((layer) => [layer, { name: layer.name, files: 0, lines: 0 }]));
  for (const file of ROOTS.flatMap((dir) => sourceFiles(root, dir)).map((f) => f.split(sep).join('/'))) {
    const outer = placeOf(file, layers);
    if (!outer) continue;
    const within = inner[outer.layer.name];
    const lines = count(file);
    for (const placed of [outer, within && placeOf(file, within)]) {
      const total = placed && totals.get(placed.layer);
      if (total) {
        total.files++;
        total.lines += lines;
      }
    }
  }
  return layers
    .flat()
    .flatMap((layer) => [layer, ...(inner[layer.name]?.flat() ?? [])])
    .map((layer) => totals.get(layer)!)
    .filter((total) => total.files > 0);
}

/** One line per violation, as a compiler would print it. */
export const formatViolation = (v: Violation) => `${v.file}${v.line ? `:${v.line}` : ''} ${v.message}`;

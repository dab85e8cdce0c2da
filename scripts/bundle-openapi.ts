/**
 * Merges openapi/openapi.yaml and openapi/areas/*.yaml into generated/openapi.json.
 * Each area file holds `paths` and `components`; a name defined twice is an error,
 * so areas cannot silently shadow each other. Every Admin operation may answer 403 (a person's role may not
 * call it, or a session's change came without its CSRF token: docs/people.md): the bundle says so of each one
 * whose area does not already.
 *
 *   tsx scripts/bundle-openapi.ts          write generated/openapi.json
 *   tsx scripts/bundle-openapi.ts --check  fail if the written file is stale
 */
import { readFileSync, readdirSync, writeFileSync, mkdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

type Doc = Record<string, any>;

export function bundleOpenApi(root = 'openapi'): Doc {
  const doc: Doc = parse(readFileSync(join(root, 'openapi.yaml'), 'utf8'));
  doc.paths ??= {};
  doc.components ??= {};
  const areas = readdirSync(join(root, 'areas'))
    .filter((f) => f.endsWith('.yaml'))
    .sort();
  for (const file of areas) {
    const area: Doc = parse(readFileSync(join(root, 'areas', file), 'utf8')) ?? {};
    for (const [path, item] of Object.entries(area.paths ?? {})) {
      if (doc.paths[path]) throw new Error(`${file}: path ${path} is already defined`);
      doc.paths[path] = item;
    }
    for (const [section, entries] of Object.entries(area.components ?? {})) {
      doc.components[section] ??= {};
      for (const [name, value] of Object.entries(entries as Doc)) {
        if (doc.components[section][name]) throw new Error(`${file}: components.${section}.${name} is already defined`);
        doc.components[section][name] = value;
      }
    }
  }
  forbiddenOnEveryAdminOperation(doc);
  return doc;
}

function forbiddenOnEveryAdminOperation(doc: Doc): void {
  for (const [path, item] of Object.entries(doc.paths as Doc)) {
    if (!path.startsWith('/admin/v1/')) continue;
    for (const method of ['get', 'put', 'post', 'delete', 'patch']) {
      const responses = (item as Doc)[method]?.responses as Doc | undefined;
      if (responses && !responses['403']) responses['403'] = { $ref: '#/components/responses/Forbidden' };
    }
  }
}

const isMain = process.argv[1]?.endsWith('bundle-openapi.ts');
if (isMain) {
  const out = 'generated/openapi.json';
  const text = JSON.stringify(bundleOpenApi(), null, 2) + '\n';
  if (process.argv.includes('--check')) {
    if (!existsSync(out) || readFileSync(out, 'utf8') !== text) {
      console.error(`${out} is stale: run \`npm run generate\` and commit the result.`);
      process.exit(1);
    }
  } else {
    mkdirSync('generated', { recursive: true });
    writeFileSync(out, text);
  }
}

/**
 * The role table of src/http/roles.ts, written where people read it: each Admin operation of openapi/ carries
 * `x-roles` (who may call it, owners first), and docs/people.md shows the table by the roles each set of
 * operations allows. src/http/roles.ts is the source; this writes the others from it, or checks that they agree.
 *
 *   tsx scripts/role-table.ts          write x-roles into openapi/areas/*.yaml and the table into docs/people.md
 *   tsx scripts/role-table.ts --check  fail if either differs from src/http/roles.ts
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { OPERATION_ROLES, rolesFor } from '../src/http/roles.js';

const AREAS = join('openapi', 'areas');
const DOCS = join('docs', 'people.md');
const TABLE_START = '<!-- role table: written by scripts/role-table.ts from src/http/roles.ts -->';
const TABLE_END = '<!-- end of the role table -->';

/** Who may call an operation, as the contract says it: owners always, then the table's workspace roles. */
export function contractRoles(operationId: string): string[] {
  return ['owner', ...rolesFor(operationId)];
}

/** An area file with each Admin operation's `x-roles` line (after its operationId) as the table says. */
export function withRoles(yaml: string): string {
  const withoutRoles = yaml.replace(/^[ \t]*x-roles:.*\n/gm, '');
  return withoutRoles.replace(/^([ \t]*)operationId: (\w+)\n/gm, (line, indent: string, operationId: string) =>
    operationId in OPERATION_ROLES ? `${line}${indent}x-roles: [${contractRoles(operationId).join(', ')}]\n` : line,
  );
}

/** The table for docs/people.md: one row per set of roles, with the operations it allows. */
export function roleTableMarkdown(): string {
  const byRoles = new Map<string, string[]>();
  for (const operationId of Object.keys(OPERATION_ROLES)) {
    const roles = contractRoles(operationId).join(', ');
    byRoles.set(roles, [...(byRoles.get(roles) ?? []), operationId]);
  }
  const rows = [...byRoles.entries()]
    .sort(([a], [b]) => b.split(',').length - a.split(',').length || a.localeCompare(b))
    .map(([roles, operations]) => `| ${roles} | ${operations.map((op) => `\`${op}\``).join(', ')} |`);
  return [TABLE_START, '', '| who may call | operations |', '| --- | --- |', ...rows, '', TABLE_END].join('\n');
}

/** docs/people.md with the table between its markers. */
export function withTable(markdown: string): string {
  const start = markdown.indexOf(TABLE_START);
  const end = markdown.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`${DOCS} has no role table markers`);
  return markdown.slice(0, start) + roleTableMarkdown() + markdown.slice(end + TABLE_END.length);
}

/** Each file and what it should hold. */
function expectedFiles(): { path: string; now: string; wanted: string }[] {
  const areas = readdirSync(AREAS)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => join(AREAS, f));
  return [...areas, DOCS].map((path) => {
    const now = readFileSync(path, 'utf8');
    return { path, now, wanted: path === DOCS ? withTable(now) : withRoles(now) };
  });
}

function main(): void {
  const stale = expectedFiles().filter((f) => f.now !== f.wanted);
  if (process.argv.includes('--check')) {
    if (stale.length) {
      console.error(`stale role table in ${stale.map((f) => f.path).join(', ')}: run tsx scripts/role-table.ts`);
      process.exit(1);
    }
    return;
  }
  for (const file of stale) writeFileSync(file.path, file.wanted);
  console.log(`role table written to ${stale.length} file(s)`);
}

if (process.argv[1]?.endsWith('role-table.ts')) main();

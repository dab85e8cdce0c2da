/**
 * The role table has one source, src/http/roles.ts: the contract's `x-roles` on each Admin operation and the table
 * in docs/people.md are written from it (scripts/role-table.ts), and this holds them to it, so the three can't drift.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { contractRoles, withRoles, withTable } from '../../scripts/role-table.js';
import { OPERATION_ROLES } from '../../src/http/roles.js';

type Operation = { operationId?: string; 'x-roles'?: string[] };
const contract = JSON.parse(readFileSync('generated/openapi.json', 'utf8')) as { paths: Record<string, Record<string, Operation>> };

describe('the role table', () => {
  it("is the contract's: each Admin operation's x-roles are the table's roles for it, and the table names no other operation", () => {
    const inContract: Record<string, string[] | undefined> = {};
    for (const [path, item] of Object.entries(contract.paths)) {
      if (!path.startsWith('/admin/v1/')) continue;
      for (const op of Object.values(item)) if (op.operationId) inContract[op.operationId] = op['x-roles'];
    }
    expect(Object.keys(inContract).sort()).toEqual(Object.keys(OPERATION_ROLES).sort());
    for (const [operationId, roles] of Object.entries(inContract)) expect(roles, operationId).toEqual(contractRoles(operationId));
  });

  it('is written as it is in openapi/ and docs/people.md', () => {
    for (const file of readdirSync('openapi/areas').filter((f) => f.endsWith('.yaml'))) {
      const yaml = readFileSync(join('openapi/areas', file), 'utf8');
      expect(withRoles(yaml), file).toBe(yaml);
    }
    const docs = readFileSync('docs/people.md', 'utf8');
    expect(withTable(docs)).toBe(docs);
    expect(docs).toContain('| owner, admin, billing | `grantAccessUnits`');
  });
});

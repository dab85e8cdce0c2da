/**
 * The contract-diff check of `npm run lint`: a change to the contract that breaks its callers (the typed
 * client's users first) fails unless the contract's major version changes.
 *
 *   tsx scripts/contract-diff.ts [BASELINE] [CURRENT]
 *
 * BASELINE is the contract as last released, committed as openapi/released.json (default); CURRENT is the
 * bundled contract, generated/openapi.json (default). At a release, copy the bundled contract over the
 * baseline (`npm run contract:release`).
 *
 * The rules are written here (scripts/lib/contract-diff.ts), for what breaks a caller of this contract, a typed
 * client's first (a switch over an answer's enum, a field it reads):
 * - an operation, or a 2xx answer of one, removed;
 * - a request parameter removed, added as required or made required; a request body made required;
 * - a way of calling an operation that no longer works (its security, or the contract's, asks for a credential, a
 *   scheme or a scope that it did not), or a scheme it uses sent otherwise (its type, scheme, header or query name);
 * - in a request's schema: a property required that was not, a property removed where no other is accepted,
 *   a type or an enum value no longer accepted, a list of values put on a field that had none;
 * - in an answer's schema: a property removed or no longer required, a type it did not have, a value its enum (or
 *   const) did not list, unless the enum is marked `x-open-enum` (callers handle a value they do not know);
 * - the same inside oneOf and anyOf (each alternative a request took is still taken by one; each an answer may be
 *   is one it could be) and allOf (its parts merged into one schema).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { verdict } from './lib/contract-diff.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const [baseline = join(root, 'openapi', 'released.json'), current = join(root, 'generated', 'openapi.json')] = process.argv.slice(2);
const result = verdict(
  JSON.parse(readFileSync(baseline, 'utf8')) as Record<string, unknown>,
  JSON.parse(readFileSync(current, 'utf8')) as Record<string, unknown>,
);
for (const change of result.changes) console.error(`  ${change}`);
console.log(result.message);
if (!result.ok) process.exit(1);

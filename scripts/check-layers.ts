/**
 * npm run lint:layers: fails when a file of src/ or console/src/ imports from a layer above its own, from a
 * peer, or is in no layer; inside the domain, when an area imports one above it or a peer. The tables are LAYERS
 * and DOMAIN in scripts/lib/layers.ts; docs/architecture.md states them.
 *
 * `--house` prints the house numbers too (scripts/lib/house.ts): the lines of each layer, the files and functions
 * over their size, the imports against the rule.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatHouse, houseNumbers } from './lib/house.js';
import { checkLayers, formatViolation } from './lib/layers.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const violations = checkLayers(root);
for (const v of violations) console.error(formatViolation(v));
if (process.argv.includes('--house')) console.log(formatHouse(houseNumbers(root)).join('\n'));
if (violations.length > 0) {
  console.error(`${violations.length} import(s) against the layer rule (docs/architecture.md, "The layers")`);
  process.exit(1);
}
console.log('layers: every import runs down');

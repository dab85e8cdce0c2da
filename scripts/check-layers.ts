/**
 * npm run lint:layers: fails when a file of src/ or console/src/ imports from a layer above its own, from a
 * peer, or is in no layer. The table is LAYERS in scripts/lib/layers.ts; docs/architecture.md states it.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkLayers, formatViolation } from './lib/layers.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const violations = checkLayers(root);
for (const v of violations) console.error(formatViolation(v));
if (violations.length > 0) {
  console.error(`${violations.length} import(s) against the layer rule (docs/architecture.md, "The layers")`);
  process.exit(1);
}
console.log('layers: every import runs down');

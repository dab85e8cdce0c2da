import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const projectRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Per-run records written by the workers: contract coverage, response bodies, log lines. */
export const runDir = join(projectRoot, 'test-results', 'run');

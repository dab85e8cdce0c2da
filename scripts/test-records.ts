/**
 * Where a test run's workers leave their records (contract coverage, response bodies,
 * log lines), and the coverage report read from them: shared by the test support
 * (test/support/) and `npm run contract:coverage`.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadContract } from '../src/app.js';
import { operationIdsOf } from '../src/http/api.js';

/** Per-run records written by the workers: contract coverage, response bodies, log lines. */
export const runDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'test-results', 'run');

/** operationId -> statuses seen in responses that matched the contract. */
export function readCoverage(): Map<string, Set<number>> {
  const seen = new Map<string, Set<number>>();
  if (!existsSync(runDir)) return seen;
  for (const file of readdirSync(runDir).filter((f) => f.startsWith('contract-'))) {
    for (const line of readFileSync(join(runDir, file), 'utf8').split('\n').filter(Boolean)) {
      const { operationId, status } = JSON.parse(line) as { operationId: string; status: number };
      if (!seen.has(operationId)) seen.set(operationId, new Set());
      seen.get(operationId)!.add(status);
    }
  }
  return seen;
}

export function printContractCoverage(): void {
  const ids = operationIdsOf(loadContract());
  const admin = ids.filter((id) => !id.startsWith('proxyProvider') && !['getHealth', 'getReadiness', 'receiveBillingWebhook'].includes(id));
  const seen = readCoverage();
  if (seen.size === 0) {
    console.log('\nContract coverage: no test run on record here (test-results/run is empty): run npm test first.\n');
    return;
  }
  const rows = ids.map((id) => {
    const statuses = [...(seen.get(id) ?? [])].sort();
    return `  ${statuses.some((s) => s < 300) ? 'ok ' : '-- '} ${id.padEnd(36)} ${statuses.join(' ') || 'not exercised'}`;
  });
  const covered = admin.filter((id) => [...(seen.get(id) ?? [])].some((s) => s < 300)).length;
  console.log(
    `\nContract coverage (operations answered with a contract-valid response in this run; ok = a 2xx seen):\n${rows.join('\n')}\n` +
      `Admin operations with a 2xx through HTTP: ${covered}/${admin.length} (the contract holds ${admin.length} admin operations)\n`,
  );
}

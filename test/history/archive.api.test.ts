/**
 * Archive before drop (src/domain/history/archive.ts): an expired month is written to Parquet with a manifest of
 * rows and SHA-256 per file, then dropped; the files round-trip (rows and checksums match, `nexus archive verify`
 * says so and says which file was changed), and DuckDB reads them with the one-line query of docs/operations.md.
 */
import { DuckDBInstance } from '@duckdb/node-api';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ArchiveManifest } from '../../src/domain/history/archive.js';
import { archiveMonth } from '../../src/domain/history/archive.js';
import { createHistoryService } from '../../src/domain/history/history-service.js';
import { createAuditRepo } from '../../src/domain/audit/audit-repo.js';
import { createAuditService } from '../../src/domain/audit/audit-service.js';
import { newId } from '../../src/ids.js';
import { projectRoot } from '../support/paths.js';
import { seedMonth } from './seed-month.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';

let database: TestDatabase;
let dir: string;
const MONTH = new Date(Date.UTC(2025, 2, 1));
const ROWS = 250;
const workspaceId = newId();

beforeAll(async () => {
  database = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), 'nexus-archive-'));
});
afterAll(async () => {
  await database?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const run = promisify(execFile);
const verify = (manifests: string[]) =>
  run(join(projectRoot, 'node_modules', '.bin', 'tsx'), ['src/cli.ts', 'archive', 'verify', ...manifests], { cwd: projectRoot }).then(
    ({ stdout }) => ({ code: 0, stdout }),
    (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
  );

it('archives an expired month to Parquet before its drop; the files round-trip and DuckDB reads them', async () => {
  const { db } = database;
  const { units } = await seedMonth(database.db, MONTH, ROWS, workspaceId);
  const clock = { now: () => new Date() };
  const history = createHistoryService({
    db,
    audit: createAuditService({ auditRepo: createAuditRepo(db), clock }),
    clock,
    archive: async (month) => void (await archiveMonth(db, dir, month)),
  });
  const round = await history.applyRetention();
  expect(round.dropped).toEqual(expect.arrayContaining(['invocations_p202503', 'usage_events_p202503']));

  const manifests: Record<string, ArchiveManifest> = {};
  for (const partition of ['invocations_p202503', 'usage_events_p202503']) {
    const manifest = JSON.parse(readFileSync(join(dir, `${partition}.manifest.json`), 'utf8')) as ArchiveManifest;
    expect(manifest).toMatchObject({ partition, rows: ROWS, from: '2025-03-01T00:00:00.000Z', to: '2025-04-01T00:00:00.000Z' });
    expect(manifest.files.reduce((s, f) => s + f.rows, 0)).toBe(ROWS);
    manifests[partition] = manifest;
  }

  // The one-line query of docs/operations.md.
  const duck = await (await DuckDBInstance.create(':memory:')).connect();
  const sums = await duck.runAndReadAll(
    `select count(*) as n, sum(units) as units, count(model) as models from '${join(dir, 'usage_events_p202503.*.parquet')}'`,
  );
  expect(sums.getRowObjectsJS()[0]).toEqual({ n: BigInt(ROWS), units: units, models: BigInt(ROWS / 2) });
  const read = await duck.runAndReadAll(
    `select request_id, status, quota_units, total_latency_ms, error_message, attempts, started_at
       from '${join(dir, 'invocations_p202503.*.parquet')}' where request_id = 'req_7'`,
  );
  expect(read.getRowObjectsJson()[0]).toEqual({
    request_id: 'req_7',
    status: 'UPSTREAM_ERROR',
    quota_units: '7000000000',
    total_latency_ms: 7 / 3,
    error_message: 'upstream said "no"',
    attempts: '[{"n":7,"model":"gpt-4o"}]',
    started_at: '2025-03-01 00:07:00',
  });
  duck.closeSync();

  // `nexus archive verify` re-reads both archives, and a copy of one whose file changed after its archive: it says
  // which file and fails (one run of the CLI: a process start costs seconds on a loaded host).
  const copy = mkdtempSync(join(tmpdir(), 'nexus-archive-changed-'));
  try {
    const changed = manifests.usage_events_p202503!.files[0]!.file;
    copyFileSync(join(dir, 'usage_events_p202503.manifest.json'), join(copy, 'usage_events_p202503.manifest.json'));
    const bytes = readFileSync(join(dir, changed));
    const middle = bytes.length >> 1;
    bytes.writeUInt8(bytes.readUInt8(middle) ^ 0xff, middle);
    writeFileSync(join(copy, changed), bytes);
    const checked = await verify([
      join(dir, 'invocations_p202503.manifest.json'),
      join(dir, 'usage_events_p202503.manifest.json'),
      join(copy, 'usage_events_p202503.manifest.json'),
    ]);
    expect(checked.code, checked.stdout).toBe(1);
    for (const [partition, manifest] of Object.entries(manifests)) {
      expect(checked.stdout).toContain(`${partition}: ${ROWS} rows in ${manifest.files.length} files, as the manifest says`);
    }
    expect(checked.stdout).toContain(`MISMATCH  ${changed}: SHA-256`);
    expect(checked.stdout).toContain('usage_events_p202503: 1 of 1 files do not match the manifest');
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
});

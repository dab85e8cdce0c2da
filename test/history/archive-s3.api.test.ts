/**
 * Archive to S3-compatible storage (docs/operations.md, "Archive to S3"): a Nexus configured with
 * NEXUS_ARCHIVE_S3_BUCKET (and a path-style endpoint, as MinIO's) writes an expired month's Parquet files and manifest
 * to the bucket through the AWS SDK, against a store on 127.0.0.1 (test/support/s3-server.ts). A store that fails
 * its uploads keeps the month in PostgreSQL, and the next round archives and drops it; the objects round-trip
 * (checksums and rows as the manifest says), `nexus archive fetch s3://...` copies them down for DuckDB to read, and
 * `nexus archive verify s3://...` reads them back and names a file changed in the bucket.
 */
import { DuckDBInstance } from '@duckdb/node-api';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ArchiveManifest } from '../../src/domain/history/archive.js';
import { s3ClientOf } from '../../src/domain/history/archive-s3.js';
import { newId } from '../../src/ids.js';
import { projectRoot } from '../support/paths.js';
import { startS3Server, type S3TestServer } from '../support/s3-server.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { until } from '../gateway/gateway-support.js';
import { parseMetrics, sumOf } from '../observability/prom-text.js';
import { seedMonth } from './seed-month.js';

const MONTH = new Date(Date.UTC(2025, 2, 1));
const ROWS = 180;
const BUCKET = 'nexus-archive';
const PREFIX = 'history/eu';
const PARTITIONS = ['invocations_p202503', 'usage_events_p202503'];
/** The AWS SDK's standard chain reads them from the environment: the store only checks that requests are signed. */
const CREDENTIALS = { AWS_ACCESS_KEY_ID: 'AKIAARCHIVETEST00000', AWS_SECRET_ACCESS_KEY: 'archive-test-secret-0000000000000000000' };

let s3: S3TestServer;
let t: TestApp;
let dir: string;
const saved: Record<string, string | undefined> = {};

beforeAll(async () => {
  for (const [name, value] of Object.entries(CREDENTIALS)) {
    saved[name] = process.env[name];
    process.env[name] = value;
  }
  s3 = await startS3Server();
  t = await startTestApp({
    env: {
      NEXUS_ARCHIVE_S3_BUCKET: BUCKET,
      NEXUS_ARCHIVE_S3_PREFIX: PREFIX,
      NEXUS_ARCHIVE_S3_ENDPOINT: s3.url,
      NEXUS_ARCHIVE_S3_REGION: 'eu-central-1',
      NEXUS_ARCHIVE_S3_FORCE_PATH_STYLE: 'true',
    },
  });
  dir = mkdtempSync(join(tmpdir(), 'nexus-archive-s3-'));
  // The app's history job makes its months as it starts, each under a short lock timeout, as the rounds below drop
  // theirs: the test's rounds begin once the job's first round is over.
  await until(async () => {
    const samples = parseMetrics(await (await fetch(`${t.url}/metrics`)).text());
    return sumOf(samples, 'nexus_job_runs_total', { job: 'history' }) >= 1;
  }, 30_000);
});
afterAll(async () => {
  await t?.close();
  await s3?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

const exists = async (partition: string) =>
  (await t.database.db.raw<{ rows: { t: string | null }[] }>('select to_regclass(?)::text as t', [partition])).rows[0]!.t !== null;

const object = (name: string) => s3.objects.get(`${BUCKET}/${PREFIX}/${name}`);

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

const run = promisify(execFile);
/** `nexus archive <args>`, with the store's variables and the SDK's credentials in its environment. */
const archiveCli = (args: string[]) =>
  run(join(projectRoot, 'node_modules', '.bin', 'tsx'), ['src/cli.ts', 'archive', ...args], {
    cwd: projectRoot,
    env: {
      PATH: process.env.PATH,
      ...CREDENTIALS,
      NEXUS_ARCHIVE_S3_ENDPOINT: s3.url,
      NEXUS_ARCHIVE_S3_REGION: 'eu-central-1',
      NEXUS_ARCHIVE_S3_FORCE_PATH_STYLE: 'true',
    },
  }).then(
    ({ stdout }) => ({ code: 0, stdout }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout + err.stderr }),
  );

it('keeps a month whose upload fails, then archives it to the bucket, drops it, and reads it back', async () => {
  const workspaceId = newId();
  const { units } = await seedMonth(t.database.db, MONTH, ROWS, workspaceId);
  const history = t.nexus.services.history;

  // The store answers 500 to every upload: the round fails saying which object, and the months stay whole.
  s3.failPuts = true;
  await expect(history.applyRetention()).rejects.toThrow(
    `archive: storing s3://${BUCKET}/${PREFIX}/invocations_p202503.0001.parquet failed: the store answered 500 InternalError`,
  );
  expect(s3.requests.filter((r) => r.startsWith('PUT ')).length).toBeGreaterThan(0);
  for (const partition of PARTITIONS) expect(await exists(partition)).toBe(true);
  expect(Number((await t.database.db('invocations_p202503').count<{ n: string }[]>('* as n'))[0]!.n)).toBe(ROWS);
  expect(s3.objects.size).toBe(0);

  // The next round, the store answering: both months archived, then dropped.
  s3.failPuts = false;
  const round = await history.applyRetention();
  expect(round.dropped).toEqual(expect.arrayContaining(PARTITIONS));
  for (const partition of PARTITIONS) expect(await exists(partition)).toBe(false);
  // Every object went with its Content-MD5, which the store checked.
  expect(s3.putsWithMd5).toBe(4);

  // The bucket lists each month's file and manifest, under the prefix (ListObjectsV2, through the SDK).
  const listed = await s3ClientOf({ endpoint: s3.url, region: 'eu-central-1', forcePathStyle: true }).send(
    new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `${PREFIX}/` }),
  );
  expect((listed.Contents ?? []).map((o) => o.Key)).toEqual(
    PARTITIONS.flatMap((p) => [`${PREFIX}/${p}.0001.parquet`, `${PREFIX}/${p}.manifest.json`]),
  );

  // Each manifest's rows and checksums are the objects' own; the files are Parquet.
  for (const partition of PARTITIONS) {
    const stored = object(`${partition}.manifest.json`)!;
    expect(stored.contentType).toBe('application/json');
    const manifest = JSON.parse(stored.bytes.toString('utf8')) as ArchiveManifest;
    expect(manifest).toMatchObject({ partition, rows: ROWS, from: '2025-03-01T00:00:00.000Z', to: '2025-04-01T00:00:00.000Z' });
    expect(manifest.files.reduce((s, f) => s + f.rows, 0)).toBe(ROWS);
    for (const f of manifest.files) {
      const file = object(f.file)!;
      expect(file.contentType).toBe('application/vnd.apache.parquet');
      expect({ sha256: sha256(file.bytes), bytes: file.bytes.length }).toEqual({ sha256: f.sha256, bytes: f.bytes });
      expect(file.bytes.subarray(0, 4).toString('latin1')).toBe('PAR1');
    }
  }

  // Restore: `nexus archive fetch` copies both archives down (each file checked), and DuckDB reads them there.
  const fetched = await archiveCli(['fetch', ...PARTITIONS.map((p) => `s3://${BUCKET}/${PREFIX}/${p}.manifest.json`), dir]);
  expect(fetched.code, fetched.stdout).toBe(0);
  for (const partition of PARTITIONS) {
    expect(fetched.stdout).toContain(`${partition}: ${ROWS} rows in 1 files copied to ${dir}`);
    expect(readFileSync(join(dir, `${partition}.manifest.json`))).toEqual(object(`${partition}.manifest.json`)!.bytes);
  }
  const duck = await (await DuckDBInstance.create(':memory:')).connect();
  const sums = await duck.runAndReadAll(
    `select count(*) as n, sum(units) as units, count(model) as models from '${join(dir, 'usage_events_p202503.*.parquet')}'`,
  );
  expect(sums.getRowObjectsJS()[0]).toEqual({ n: BigInt(ROWS), units, models: BigInt(ROWS / 2) });
  const read = await duck.runAndReadAll(
    `select request_id, status, error_message, started_at from '${join(dir, 'invocations_p202503.*.parquet')}' where request_id = 'req_14'`,
  );
  expect(read.getRowObjectsJson()[0]).toEqual({
    request_id: 'req_14',
    status: 'UPSTREAM_ERROR',
    error_message: 'upstream said "no"',
    started_at: '2025-03-01 00:14:00',
  });
  duck.closeSync();

  // `nexus archive verify` reads the manifests and files back from the bucket; a file changed there is named.
  const ok = await archiveCli(['verify', ...PARTITIONS.map((p) => `s3://${BUCKET}/${PREFIX}/${p}.manifest.json`)]);
  expect(ok.code, ok.stdout).toBe(0);
  for (const partition of PARTITIONS) expect(ok.stdout).toContain(`${partition}: ${ROWS} rows in 1 files, as the manifest says`);
  const changed = object('usage_events_p202503.0001.parquet')!;
  changed.bytes = Buffer.from(changed.bytes);
  changed.bytes.writeUInt8(changed.bytes.readUInt8(changed.bytes.length >> 1) ^ 0xff, changed.bytes.length >> 1);
  const bad = await archiveCli(['verify', `s3://${BUCKET}/${PREFIX}/usage_events_p202503.manifest.json`]);
  expect(bad.code, bad.stdout).toBe(1);
  expect(bad.stdout).toContain('MISMATCH  usage_events_p202503.0001.parquet: SHA-256');
  // The credentials are never in what it prints.
  expect(bad.stdout).not.toContain(CREDENTIALS.AWS_SECRET_ACCESS_KEY);
  // Three runs of the CLI: a process start costs seconds on a loaded host.
}, 120_000);

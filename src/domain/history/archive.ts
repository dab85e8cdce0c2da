/**
 * A month written to Parquet before it is dropped (docs/operations.md, "Archive"): to a store (archive-store.ts: a
 * directory, NEXUS_ARCHIVE_DIR, or an S3-compatible bucket), the partition's rows in files of at most FILE_ROWS rows
 * each (`<partition>.<n>.parquet`, read a page at a time, so the memory is one file's rows whatever the month holds),
 * and a manifest (`<partition>.manifest.json`) listing each file with its rows and SHA-256. The month is dropped only
 * once every file and the manifest are stored and read back from the store (each file's SHA-256 and rows as written),
 * and the rows counted in the files equal the partition's count. `nexus archive verify` re-reads a manifest's files
 * and compares.
 *
 * Written with hyparquet-writer (pure JavaScript: no native binary to install beside Nexus) and read back with
 * hyparquet, its reader. Columns keep their types: uuid and text as strings, bigint as INT64, integer as INT32,
 * double precision as DOUBLE, boolean, timestamptz as a timestamp (milliseconds, UTC), json and jsonb as JSON text.
 */
import { createHash } from 'node:crypto';
import { basename, dirname } from 'node:path';
import type { ColumnSource } from 'hyparquet-writer';
import type { ArchiveS3Access } from '../../config-archive.js';
import type { Queryable } from '../../db/database.js';
import { dirStore, parseS3Url, s3Store, type ArchiveStore } from './archive-store.js';
import type { MonthPartition } from './history-repo.js';

/** Rows per Parquet file (and per page read from the partition). */
const FILE_ROWS = 100_000;

interface ArchiveFile {
  file: string;
  rows: number;
  sha256: string;
  bytes: number;
}

export interface ArchiveManifest {
  table: string;
  partition: string;
  from: string;
  to: string;
  rows: number;
  archivedAt: string;
  files: ArchiveFile[];
}

interface Column {
  name: string;
  type: string;
}

type BasicType = NonNullable<ColumnSource['type']>;

const TYPES: Record<string, BasicType> = {
  uuid: 'STRING',
  text: 'STRING',
  bigint: 'INT64',
  integer: 'INT32',
  'double precision': 'DOUBLE',
  boolean: 'BOOLEAN',
  'timestamp with time zone': 'TIMESTAMP',
  json: 'STRING',
  jsonb: 'STRING',
};

/** A column's values as Parquet takes them (JSON as its text; null stays null). */
function valuesOf(column: Column, rows: Record<string, unknown>[]): unknown[] {
  const json = column.type === 'json' || column.type === 'jsonb';
  return rows.map((r) => {
    const v = r[column.name];
    if (v === null || v === undefined) return null;
    if (json) return typeof v === 'string' ? v : JSON.stringify(v);
    if (column.type === 'bigint') return typeof v === 'bigint' ? v : BigInt(v as string);
    return v;
  });
}

async function columnsOf(q: Queryable, table: string): Promise<Column[]> {
  const { rows } = await q.raw<{ rows: { name: string; type: string }[] }>(
    `select a.attname as name, format_type(a.atttypid, null) as type
       from pg_attribute a where a.attrelid = to_regclass(?) and a.attnum > 0 and not a.attisdropped order by a.attnum`,
    [table],
  );
  for (const c of rows)
    if (!TYPES[c.type]) throw new Error(`archive: column ${table}.${c.name} has type ${c.type}, which it does not write`);
  return rows;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** The rows a Parquet file holds, from its footer. */
async function rowsIn(bytes: Uint8Array): Promise<number> {
  const { parquetMetadata } = await import('hyparquet');
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return Number(parquetMetadata(buffer).num_rows);
}

/** Stores a file and reads it back: throws unless the store holds its bytes (SHA-256) and `rows` rows. */
async function storeFile(store: ArchiveStore, file: string, bytes: Uint8Array, rows: number): Promise<string> {
  const sum = sha256(bytes);
  await store.put(file, bytes, 'application/vnd.apache.parquet');
  const back = await store.get(file);
  if (sha256(back) !== sum) throw new Error(`archive: ${store.where(file)} reads back other than the bytes written`);
  if ((await rowsIn(back)) !== rows) throw new Error(`archive: ${store.where(file)} reads back other than the ${rows} rows written`);
  return sum;
}

/**
 * Writes the month's partition to the store (a directory's path: that directory) and its manifest; throws (and the
 * month is not dropped) unless every file and the manifest are stored and all the partition's rows are in the files.
 */
export async function archiveMonth(q: Queryable, to: ArchiveStore | string, month: MonthPartition): Promise<ArchiveManifest> {
  const store = typeof to === 'string' ? dirStore(to) : to;
  // Loaded when a month is archived, not with the process: most processes never write or read a Parquet file.
  const { parquetWriteBuffer } = await import('hyparquet-writer');
  const columns = await columnsOf(q, month.name);
  const files: ArchiveFile[] = [];
  let after: string | undefined;
  for (let n = 1; ; n++) {
    const page = q(month.name).select('*').orderBy('id').limit(FILE_ROWS);
    if (after) page.where('id', '>', after);
    const rows = (await page) as Record<string, unknown>[];
    if (!rows.length) break;
    const bytes = new Uint8Array(
      parquetWriteBuffer({
        columnData: columns.map((c) => ({ name: c.name, type: TYPES[c.type]!, data: valuesOf(c, rows) as ColumnSource['data'] })),
      }),
    );
    const file = `${month.name}.${String(n).padStart(4, '0')}.parquet`;
    files.push({ file, rows: rows.length, sha256: await storeFile(store, file, bytes, rows.length), bytes: bytes.length });
    after = rows[rows.length - 1]!.id as string;
    if (rows.length < FILE_ROWS) break;
  }
  const rows = files.reduce((s, f) => s + f.rows, 0);
  const counted = Number((await q(month.name).count<{ count: string | bigint }[]>('* as count'))[0]!.count);
  if (counted !== rows) throw new Error(`archive: ${month.name} holds ${counted} rows, its files ${rows}`);
  const manifest: ArchiveManifest = {
    table: month.table,
    partition: month.name,
    from: month.from.toISOString(),
    to: month.to.toISOString(),
    rows,
    archivedAt: new Date().toISOString(),
    files,
  };
  const name = `${month.name}.manifest.json`;
  const text = `${JSON.stringify(manifest, null, 2)}\n`;
  await store.put(name, Buffer.from(text), 'application/json');
  if (Buffer.from(await store.get(name)).toString('utf8') !== text)
    throw new Error(`archive: ${store.where(name)} reads back other than written`);
  return manifest;
}

/** One file of a manifest, read again: its checksum and rows against the manifest's. */
export interface VerifiedFile {
  file: string;
  ok: boolean;
  problem?: string;
}

/** The store a manifest's path or `s3://bucket/key` URL is in (S3: reached with `s3`), and the manifest's name there. */
export function manifestStore(manifestPath: string, s3: () => ArchiveS3Access): { store: ArchiveStore; name: string } {
  const url = parseS3Url(manifestPath);
  if (!url) return { store: dirStore(dirname(manifestPath)), name: basename(manifestPath) };
  return { store: s3Store({ ...s3(), bucket: url.bucket, prefix: url.prefix }), name: url.name };
}

/**
 * Re-reads every file a manifest lists (beside it, in its store), comparing each one's SHA-256 and the rows decoded
 * from it (every row read, not only the footer's count) with the manifest's.
 */
export async function verifyManifest(store: ArchiveStore, name: string): Promise<{ manifest: ArchiveManifest; files: VerifiedFile[] }> {
  const manifest = JSON.parse(Buffer.from(await store.get(name)).toString('utf8')) as ArchiveManifest;
  const files: VerifiedFile[] = [];
  for (const f of manifest.files) {
    const { bytes: _bytes, ...checked } = await verifyFile(store, f);
    files.push(checked);
  }
  return { manifest, files };
}

/**
 * Copies a manifest's files, then the manifest, from one store to another (a bucket's to a directory, to restore from
 * it), each file checked as verifyManifest checks it; a file that does not match is not copied, nor the manifest.
 */
export async function copyManifest(
  from: ArchiveStore,
  name: string,
  to: ArchiveStore,
): Promise<{ manifest: ArchiveManifest; files: VerifiedFile[] }> {
  const text = await from.get(name);
  const manifest = JSON.parse(Buffer.from(text).toString('utf8')) as ArchiveManifest;
  const files: VerifiedFile[] = [];
  for (const f of manifest.files) {
    const { bytes, ...checked } = await verifyFile(from, f);
    files.push(checked);
    if (bytes) await to.put(basename(f.file), bytes, 'application/vnd.apache.parquet');
  }
  if (files.every((f) => f.ok)) await to.put(name, text, 'application/json');
  return { manifest, files };
}

async function verifyFile(store: ArchiveStore, f: ArchiveFile): Promise<VerifiedFile & { bytes?: Uint8Array }> {
  let bytes: Uint8Array;
  try {
    bytes = await store.get(basename(f.file));
  } catch (err) {
    return { file: f.file, ok: false, problem: `cannot be read: ${(err as Error).message}` };
  }
  const sum = sha256(bytes);
  if (sum !== f.sha256) return { file: f.file, ok: false, problem: `SHA-256 ${sum}, the manifest says ${f.sha256}` };
  let rows: number;
  try {
    const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const { parquetReadObjects } = await import('hyparquet');
    rows = (await parquetReadObjects({ file: buffer })).length;
  } catch (err) {
    return { file: f.file, ok: false, problem: `is no Parquet file: ${(err as Error).message}` };
  }
  if (rows !== f.rows) return { file: f.file, ok: false, problem: `${rows} rows, the manifest says ${f.rows}` };
  return { file: f.file, ok: true, bytes };
}

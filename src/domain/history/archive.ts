/**
 * A month written to Parquet before it is dropped (docs/operations.md, "Archive"): in NEXUS_ARCHIVE_DIR, the
 * partition's rows in files of at most FILE_ROWS rows each (`<partition>.<n>.parquet`, read a page at a time, so the
 * memory is one file's rows whatever the month holds), and a manifest (`<partition>.manifest.json`) listing each
 * file with its rows and SHA-256. The month is dropped only once every file is written, read back, and the rows
 * counted in them equal the partition's count. `nexus archive verify` re-reads a manifest's files and compares.
 *
 * Written with hyparquet-writer (pure JavaScript: no native binary to install beside Nexus) and read back with
 * hyparquet, its reader. Columns keep their types: uuid and text as strings, bigint as INT64, integer as INT32,
 * double precision as DOUBLE, boolean, timestamptz as a timestamp (milliseconds, UTC), json and jsonb as JSON text.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { ColumnSource } from 'hyparquet-writer';
import type { Queryable } from '../../db/database.js';
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

/** Writes `bytes` to `path` whole or not at all (a temporary file renamed). */
function writeWhole(path: string, bytes: Uint8Array | string): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, path);
}

/** The rows a Parquet file holds, from its footer. */
async function rowsIn(bytes: Uint8Array): Promise<number> {
  const { parquetMetadata } = await import('hyparquet');
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return Number(parquetMetadata(buffer).num_rows);
}

/** Writes the month's partition to `dir` and its manifest; throws (and the month is not dropped) unless all its rows are in the files. */
export async function archiveMonth(q: Queryable, dir: string, month: MonthPartition): Promise<ArchiveManifest> {
  // Loaded when a month is archived, not with the process: most processes never write or read a Parquet file.
  const { parquetWriteBuffer } = await import('hyparquet-writer');
  mkdirSync(dir, { recursive: true });
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
    writeWhole(join(dir, file), bytes);
    if ((await rowsIn(readFileSync(join(dir, file)))) !== rows.length)
      throw new Error(`archive: ${file} reads back other than the ${rows.length} rows written`);
    files.push({ file, rows: rows.length, sha256: sha256(bytes), bytes: bytes.length });
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
  writeWhole(join(dir, `${month.name}.manifest.json`), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/** One file of a manifest, read again: its checksum and rows against the manifest's. */
export interface VerifiedFile {
  file: string;
  ok: boolean;
  problem?: string;
}

/**
 * Re-reads every file a manifest lists (beside it), comparing each one's SHA-256 and the rows decoded from it (every
 * row read, not only the footer's count) with the manifest's.
 */
export async function verifyManifest(manifestPath: string): Promise<{ manifest: ArchiveManifest; files: VerifiedFile[] }> {
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as ArchiveManifest;
  const dir = dirname(manifestPath);
  const files: VerifiedFile[] = [];
  for (const f of manifest.files) files.push(await verifyFile(dir, f));
  return { manifest, files };
}

async function verifyFile(dir: string, f: ArchiveFile): Promise<VerifiedFile> {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(join(dir, basename(f.file)));
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
  return { file: f.file, ok: true };
}

/**
 * Seeding by COPY for the benches: rows made in this process and streamed to PostgreSQL (COPY ... FROM STDIN), as a
 * bulk load writes them, and the UUID v7 ids the gateway mints, made for a seeded row's time.
 */
import { randomFillSync } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';

/**
 * A UUID v7 of time `ms` (RFC 9562): what the gateway's ids are, made for a seeded row's time. With `n` (a row's
 * number), the same id for the same `ms` and `n` each time (n in its last six bytes instead of random ones): a row
 * made twice, its own and in a reference to it.
 */
export function uuidAt(ms: number, n?: number): string {
  const b = n === undefined ? randomFillSync(Buffer.alloc(16)) : Buffer.alloc(16);
  if (n !== undefined) b.writeUIntBE(n, 10, 6);
  b.writeUIntBE(ms, 0, 6);
  b[6] = (b[6]! & 0x0f) | 0x70;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/**
 * COPY lines [from, to) (tab-separated, each made by `line(i)` with its newline; `\N` a null) into `table`'s
 * `columns`, 10,000 lines a chunk.
 */
export async function copyRows(client: pg.Client, table: string, columns: string[], from: number, to: number, line: (i: number) => string) {
  let i = from;
  // A chunk at a time, the event loop let go between chunks (Nexus serves in the benches' process).
  const source = Readable.from(
    (async function* () {
      while (i < to) {
        const end = Math.min(to, i + 10_000);
        let chunk = '';
        for (; i < end; i++) chunk += line(i);
        yield chunk;
        await new Promise((r) => setImmediate(r));
      }
    })(),
  );
  await pipeline(source, client.query(copyFrom(`copy ${table} (${columns.join(', ')}) from stdin`)));
}

/** The columns of a seeded usage event, in the order the seeds' lines give them (bench-history.ts, console-scale.ts). */
export const USAGE_EVENT_SEED_COLUMNS = [
  'id',
  'workspace_id',
  'workspace_access_id',
  'quota_period_id',
  'invocation_id',
  'kind',
  'units',
  'input_tokens',
  'cached_input_tokens',
  'output_tokens',
  'model',
  'created_at',
];

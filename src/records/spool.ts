/**
 * The gateway's spool: call records that wait for the database, as JSON lines
 * in files of a directory in the data dir (NEXUS_DATA_DIR/spool).
 * - A process appends to a file of its own: calls-<host>-<pid>-<n>.jsonl.
 * - To write them, a process claims a file by renaming it to
 *   replay-<host>-<pid>-<n>.jsonl (its own: a rename succeeds for one process
 *   only), writes its records in batches and deletes it. Its own files first;
 *   then those of the processes of this host that died (their pid is gone).
 *   A live process looks for those every few seconds (foreign()), so a file
 *   left by a process that stopped while the database was away is written
 *   soon after the database is back, without a restart.
 * - Writing a record twice records it once (call-repo.ts), so a replay cut
 *   short and done again charges nothing twice.
 * The files hold what the records hold: ids, token counts, model names and
 * timings; never a key or a request body.
 */
import { createReadStream } from 'node:fs';
import { appendFile, mkdir, readdir, rename, unlink } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { alive } from '../db/data-dir-lock.js';
import { recordElement } from '../db/row-record.js';
import { INVOCATION_COLUMNS } from '../domain/recording/record-sql.js';
import { LEASE_CALL_COLUMNS } from '../domain/recording/settlement-sql.js';
import type { CallRows } from './call-rows.js';

const BATCH = 200;
const NAME = /^(calls|replay)-(.+)-(\d+)-(\d+)\.jsonl$/;

/** A host name as a file name may hold it. */
const hostPart = (name: string) => name.replace(/[^A-Za-z0-9.]/g, '_');

export function createSpool(dir: string, options: { host?: string; pid?: number; isAlive?: (pid: number) => boolean } = {}) {
  const host = hostPart(options.host ?? hostname());
  const pid = options.pid ?? process.pid;
  const isAlive = options.isAlive ?? alive;
  let seq = 0;
  let file: string | null = null;
  /** Records appended to this process's files and not yet written to the database. */
  let size = 0;
  let appending: Promise<void> = Promise.resolve();
  let replaying: Promise<number> | null = null;

  const fileName = (kind: 'calls' | 'replay') => `${kind}-${host}-${pid}-${Date.now()}${String(++seq).padStart(4, '0')}.jsonl`;

  /** A record's line: its rows only (a queued record carries more than them). */
  function line(r: CallRows): string {
    return JSON.stringify({ id: r.id, invocation: r.invocation, leaseCall: r.leaseCall }) + '\n';
  }

  /** A line's rows; a line of a version that spooled them as JSON objects, as the rows they name. */
  function rowsOf(text: string): CallRows {
    const o = JSON.parse(text) as { id: string; invocation: string | object; leaseCall: string | object | null };
    const element = (columns: readonly string[], row: string | object) => (typeof row === 'string' ? row : recordElement(columns, row));
    return {
      id: o.id,
      invocation: element(INVOCATION_COLUMNS, o.invocation),
      leaseCall: o.leaseCall === null ? null : element(LEASE_CALL_COLUMNS, o.leaseCall),
    };
  }

  /** The spool directory's file names; none before its first file. */
  async function names(): Promise<string[]> {
    try {
      return await readdir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  /** Whether `m` (a spool file name matched) is a file of another process of this host that is gone. */
  function leftByDead(m: RegExpExecArray): boolean {
    const owner = Number(m[3]);
    return m[2] === host && owner !== pid && !isAlive(owner);
  }

  /** The files this process may replay now: its own, and those of this host's dead processes, claimed. */
  async function claim(): Promise<string[]> {
    // New records go to a new file from now on: the current one is claimed with the others.
    file = null;
    await appending;
    const claimed: string[] = [];
    for (const name of (await names()).sort()) {
      const m = NAME.exec(name);
      if (!m) continue;
      const mine = m[2] === host && Number(m[3]) === pid;
      if (!mine && !leftByDead(m)) continue;
      if (mine && m[1] === 'replay') {
        // Claimed by an earlier replay of this process that was cut short.
        claimed.push(name);
        continue;
      }
      const to = fileName('replay');
      try {
        await rename(join(dir, name), join(dir, to));
        claimed.push(to);
      } catch (err) {
        // Another process claimed it first.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    return claimed;
  }

  async function replayFile(name: string, write: (rows: CallRows[]) => Promise<void>): Promise<number> {
    const path = join(dir, name);
    const lines = createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity });
    let batch: CallRows[] = [];
    let n = 0;
    for await (const text of lines) {
      if (!text.trim()) continue;
      batch.push(rowsOf(text));
      if (batch.length >= BATCH) {
        await write(batch);
        n += batch.length;
        batch = [];
      }
    }
    if (batch.length) {
      await write(batch);
      n += batch.length;
    }
    await unlink(path);
    return n;
  }

  return {
    /** Appends the records to this process's file (in order: appends are chained). */
    append(records: CallRows[]): Promise<void> {
      const text = records.map(line).join('');
      const next = appending.then(async () => {
        if (!file) {
          await mkdir(dir, { recursive: true, mode: 0o700 });
          file = join(dir, fileName('calls'));
        }
        await appendFile(file, text, { mode: 0o600 });
        size += records.length;
      });
      appending = next.catch(() => {});
      return next;
    },

    /**
     * Writes every record waiting in the spool files this process may claim, each file's records in
     * batches, the file deleted once written; returns how many records. A write that fails leaves the
     * file (this process's now) for the next replay.
     */
    replay(write: (rows: CallRows[]) => Promise<void>): Promise<number> {
      replaying ??= (async () => {
        let n = 0;
        try {
          for (const name of await claim()) n += await replayFile(name, write);
          size = 0;
          return n;
        } finally {
          replaying = null;
        }
      })();
      return replaying;
    },

    /** Whether the spool holds files of this host's processes that are gone (one readdir; none: no spool yet). */
    async foreign(): Promise<boolean> {
      return (await names()).some((name) => {
        const m = NAME.exec(name);
        return m !== null && leftByDead(m);
      });
    },

    size: () => size,
  };
}

export type Spool = ReturnType<typeof createSpool>;

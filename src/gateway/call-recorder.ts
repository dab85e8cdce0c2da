/**
 * What happens after the response's last byte, off the critical path: the
 * call's settlement, invocation (with its attempt) and usage events, written
 * by call-repo.ts from the rows' JSON made when the call ended. Calls that end
 * within GROUP_WINDOW_MS of each other, or while a write is in flight, are
 * written together by the next statement (group commit): one statement per
 * batch, however busy the gateway. A failed batch is retried call by call with
 * backoff; if the database stays away the call goes uncharged: its lease
 * returns the units when released. `written` tells the lease when its calls are
 * on disk. Also the key's lastRequestAt, at most once a minute per key.
 */
import { withRetries } from '../db/retry.js';
import type { InferenceKeyRepo } from '../domain/inference-keys/inference-key-repo.js';
import type { Admission } from '../domain/quota/quota-leases.js';
import type { Logger } from '../observability/logger.js';
import type { CallRepo, CallRows } from './call-repo.js';

/** Every field is always present (a call's records share one object shape). */
export interface CallRecord extends CallRows {
  requestId: string;
  keyId: string;
  lastRequestAt: Date | null;
  /** The quota lease admission the call was settled on: handed to `written` once the record is written. */
  admission: Admission | undefined;
}

const LAST_REQUEST_INTERVAL_MS = 60_000;
const MAX_BATCH = 200;
/** How long the first call of a batch waits for others to end before their statement is sent. */
const GROUP_WINDOW_MS = 5;

export function createCallRecorder(deps: {
  repo: Pick<CallRepo, 'record'>;
  keys: Pick<InferenceKeyRepo, 'touchLastRequest'>;
  logger: Logger;
  /** Told of each admitted call once its record is written, or given up after the retries. */
  written: (admission: Admission) => void;
}) {
  const { repo, keys, logger } = deps;
  const queue: CallRecord[] = [];
  const pending = new Set<Promise<void>>();
  let flushing: Promise<void> | null = null;
  const keyTouchedAt = new Map<string, number>();

  function written(records: CallRecord[]): void {
    for (const r of records) if (r.admission) deps.written(r.admission);
  }

  async function writeAlone(record: CallRecord): Promise<void> {
    try {
      await withRetries(() => repo.record([record]));
    } catch (err) {
      logger.error({
        msg: 'gateway settlement failed; the call goes uncharged (its units return to the period when its lease is released)',
        requestId: record.requestId,
        error: (err as Error).message,
      });
    }
    written([record]);
  }

  async function flush(): Promise<void> {
    while (queue.length) {
      const batch = queue.splice(0, MAX_BATCH);
      let ok = true;
      try {
        await repo.record(batch);
      } catch {
        ok = false;
        // One bad record must not hold the others back: each is retried on its own.
        await Promise.all(batch.map(writeAlone));
      }
      if (ok) written(batch);
    }
  }

  function schedule(): void {
    if (flushing) return;
    // Group commit: the calls ending within the window share one statement (and one commit).
    const gathered = queue.length >= MAX_BATCH ? Promise.resolve() : new Promise<void>((r) => setTimeout(r, GROUP_WINDOW_MS));
    flushing = gathered.then(flush).finally(() => {
      flushing = null;
      if (queue.length) schedule();
    });
    track(flushing);
  }

  /** Whether the key's lastRequestAt is due a write (checked first, so most calls start no write at all). */
  function keyDue(keyId: string, lastRequestAt: Date | null, now: Date): boolean {
    const known = Math.max(keyTouchedAt.get(keyId) ?? 0, lastRequestAt?.getTime() ?? 0);
    return now.getTime() - known >= LAST_REQUEST_INTERVAL_MS;
  }

  async function touchKey(keyId: string, now: Date): Promise<void> {
    const nowMs = now.getTime();
    keyTouchedAt.set(keyId, nowMs);
    if (keyTouchedAt.size > 100_000) keyTouchedAt.clear();
    try {
      // Its condition keeps it to one write a minute across processes too.
      await keys.touchLastRequest(keyId, now);
    } catch (err) {
      logger.warn({ msg: 'could not update lastRequestAt', keyId, error: (err as Error).message });
    }
  }

  function track(p: Promise<void>): void {
    pending.add(p);
    void p.finally(() => pending.delete(p));
  }

  return {
    record(record: CallRecord, now: Date): void {
      queue.push(record);
      schedule();
      if (keyDue(record.keyId, record.lastRequestAt, now)) track(touchKey(record.keyId, now));
    },
    /** Resolves when every write started so far is done (tests, shutdown). */
    async drain(): Promise<void> {
      while (pending.size || queue.length) await Promise.allSettled([...pending]);
    },
  };
}

export type CallRecorder = ReturnType<typeof createCallRecorder>;

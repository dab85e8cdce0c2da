/**
 * What happens after the response's last byte, off the critical path: the
 * call's settlement, invocation (with its attempt) and usage events, written
 * by call-repo.ts from the rows' JSON made when the call ended. Calls that end
 * within a window of each other, or while a write is in flight, are written
 * together by the next statement (group commit): one statement per batch,
 * however busy the gateway. The window counts from the first call of its batch
 * and adapts to the rate: it closes GROUP_WINDOW_MS after that call when no
 * other call ended meanwhile (a quiet gateway's record follows its call within
 * milliseconds), and stays open a slice more while each slice brings calls, up
 * to MAX_WINDOW_MS or FLUSH_AT calls (a busy gateway's statement carries tens of
 * calls: its fixed cost, most of what a statement costs PostgreSQL, is shared by
 * more of them). The calls that end while a statement runs gather in the next
 * window, counted from the first of them: once the statement is done they are
 * written at once if that one has waited a slice out, else when it has (written
 * at once whatever their number, each statement at an even rate would carry only
 * the calls of one statement's time, and pay its fixed cost for each few). `written` tells the lease when its calls'
 * records are safe (in the database, or in the spool). Also the key's
 * lastRequestAt, at most once a minute per key.
 *
 * No record is given up while the database is away (src/database-unavailable.ts): the
 * records wait in memory, and each second those waiting go to a spool file
 * under the data dir (spool.ts). They are written when the database answers
 * again, by this process, or by another process on that data dir: at its start,
 * or, while it runs, within CLAIM_EVERY_MS of the first process's end. Writing a record twice records it once (the statement is
 * idempotent by invocation id). A record the database refuses for another
 * reason is retried alone with backoff, then given up with an error log.
 *
 * Request logs (request-log.ts) ride with the records: written after each batch, in one statement of their own,
 * sealed then. Unlike a record, a log is given up rather than waited for: at most MAX_LOGS_WAITING logs of about
 * MAX_LOG_BYTES_WAITING wait in memory (never in the spool), one more is dropped and counted, and a batch the
 * database refuses is dropped and counted too.
 */
import { SpanStatusCode, type Span } from '@opentelemetry/api';
import { withRetries } from '../db/retry.js';
import { isDatabaseUnavailable } from '../database-unavailable.js';
import type { InferenceKeyRepo } from '../domain/inference-keys/inference-key-repo.js';
import type { Admission } from '../domain/quota/quota-leases.js';
import type { RequestLogEntry } from '../domain/request-logs/request-log-types.js';
import type { Logger } from '../observability/logger.js';
import type { CallRows } from './call-rows.js';
import type { Spool } from './spool.js';

/** Every field is always present (a call's records share one object shape). */
export interface CallRecord extends CallRows {
  requestId: string;
  keyId: string;
  lastRequestAt: Date | null;
  /** The quota lease admission the call was settled on: handed to `written` once the record is safe. */
  admission: Admission | undefined;
  /** The call's recording span (traces on): ended once the record is safe. */
  span: Span | undefined;
}

const LAST_REQUEST_INTERVAL_MS = 60_000;
const MAX_BATCH = 200;
/** A slice of the group commit's window: the first call of a batch waits this long for others, then a slice more while they come. */
const GROUP_WINDOW_MS = 5;
/**
 * The longest the first call of a batch waits for others (the window's slices together), unless the recorder is
 * given another (NEXUS_RECORD_WINDOW_MS): one slice, so a killed process's answered JSON calls left uncharged are
 * at most those of its last 5 ms and a statement (docs/reliability.md).
 */
const MAX_WINDOW_MS = GROUP_WINDOW_MS;
/** Calls that close the window at once: a statement of this many shares its fixed cost well enough. */
const FLUSH_AT = 50;
/** While the database is away: how often the records waiting in memory go to the spool. */
const SPILL_EVERY_MS = 1000;
/** While the database is away: the first and the longest wait before it is tried again. */
const PROBE_FIRST_MS = 250;
const PROBE_MAX_MS = 5000;
/** How often a running process looks for spool files left by this host's processes that are gone. */
const CLAIM_EVERY_MS = 2000;
/** Request logs waiting to be written, at most: their count and their bytes (about). */
const MAX_LOGS_WAITING = 1000;
const MAX_LOG_BYTES_WAITING = 32 * 1024 * 1024;
const MAX_LOG_BATCH = 100;

/** A call's request log, its entry made when it is written (request-log.ts). */
export interface PendingLog {
  /** About what it holds in memory. */
  size: number;
  entry(): RequestLogEntry;
}

/** Why a request log was not written: too many waiting, or its batch failed. */
export type LogDropped = 'pressure' | 'failed';

export interface RecorderStats {
  /** Records waiting in memory to be written. */
  queued: number;
  /** Records waiting in this process's spool files. */
  spooled: number;
  /** Whether the database is taken to be away. */
  outage: boolean;
}

/** What the recorder tells the metrics. */
interface RecorderEvents {
  batch(size: number): void;
  /** unavailable: a write found the database away; refused: a batch refused (retried one by one); given_up: a record refused alone. */
  failure(kind: 'unavailable' | 'refused' | 'given_up'): void;
  spooled(records: number): void;
  /** Request logs written, and dropped (and why). */
  logsWritten(count: number): void;
  logsDropped(reason: LogDropped, count: number): void;
}

export interface CallRecorderDeps {
  /** Writes a batch (call-repo.ts, its costs handed on by records.ts). */
  repo: { record(calls: CallRows[]): Promise<void> };
  keys: Pick<InferenceKeyRepo, 'touchLastRequest'>;
  logger: Logger;
  /** Told of each admitted call once its record is safe (written or spooled), or given up. */
  written: (admission: Admission) => void;
  /** Where records wait while the database is away; none: they wait in memory. */
  spool?: Spool | undefined;
  /** Metrics: told of each batch written (its size), of each failed write, and of the records spooled. */
  events?: RecorderEvents | undefined;
  /** Seals and writes a batch of request logs (records.ts); none: logs are dropped. */
  logs?: { write(entries: RequestLogEntry[]): Promise<void> } | undefined;
  /** The group commit's longest window, in ms (MAX_WINDOW_MS), and the calls that close it (FLUSH_AT). */
  window?: { maxMs: number; flushAt?: number | undefined } | undefined;
}

export class CallRecorder {
  private readonly queue: CallRecord[] = [];
  private readonly logs: PendingLog[] = [];
  private logBytes = 0;
  private readonly pending = new Set<Promise<void>>();
  private flushing: Promise<void> | null = null;
  /** Closes the group commit's window now (FLUSH_AT calls wait), while one is open. */
  private closeWindow: (() => void) | null = null;
  private readonly keyTouchedAt = new Map<string, number>();
  private outage = false;
  private probeMs = PROBE_FIRST_MS;
  private probe: NodeJS.Timeout | undefined;
  private spill: NodeJS.Timeout | undefined;
  private looking = false;
  private readonly claimTimer: NodeJS.Timeout | undefined;
  private readonly maxWindowMs: number;
  private readonly flushAt: number;
  /** When the first of the calls waiting was queued (Date.now()): their window counts from it. */
  private firstQueuedAt = 0;

  constructor(private readonly deps: CallRecorderDeps) {
    this.maxWindowMs = deps.window?.maxMs ?? MAX_WINDOW_MS;
    this.flushAt = deps.window?.flushAt ?? FLUSH_AT;
    /**
     * Spool files a process of this host left when it stopped (a drain while the database was away) are
     * written by this one as soon as the database answers: one readdir every CLAIM_EVERY_MS otherwise.
     */
    this.claimTimer = deps.spool ? setInterval(() => this.claimForeign(deps.spool!), CLAIM_EVERY_MS) : undefined;
    this.claimTimer?.unref();
  }

  record(record: CallRecord, now: Date): void {
    if (!this.queue.length) this.firstQueuedAt = Date.now();
    this.queue.push(record);
    if (this.queue.length >= this.flushAt) this.closeWindow?.();
    this.schedule();
    if (!this.outage && this.keyDue(record.keyId, record.lastRequestAt, now)) this.track(this.touchKey(record.keyId, now));
  }

  /** A call's request log: written after the next batch, or dropped and counted when too many wait. */
  log(pending: PendingLog): void {
    if (!this.deps.logs || this.logs.length >= MAX_LOGS_WAITING || this.logBytes + pending.size > MAX_LOG_BYTES_WAITING) {
      this.deps.events?.logsDropped('pressure', 1);
      return;
    }
    this.logs.push(pending);
    this.logBytes += pending.size;
    this.schedule();
  }

  /** Writes the records a process that stopped left in the spool (at start). */
  recover(): Promise<void> {
    const done = this.deps.spool ? this.replaySpool() : Promise.resolve();
    this.track(done);
    return done;
  }

  /** Stops looking for spool files left by other processes. */
  close(): void {
    clearInterval(this.claimTimer);
  }

  stats(): RecorderStats {
    return { queued: this.queue.length, spooled: this.deps.spool?.size() ?? 0, outage: this.outage };
  }

  /**
   * Resolves when every write started so far is done (tests, shutdown). While the database is away, the
   * records waiting go to the spool instead (the next start writes them).
   */
  async drain(): Promise<void> {
    for (;;) {
      if (this.outage) {
        clearTimeout(this.probe);
        clearInterval(this.spill);
        await this.spillQueue();
        this.dropLogs(this.logs.length, 'failed');
        return;
      }
      if (!this.pending.size && !this.queue.length && !this.logs.length) return;
      if (!this.pending.size) this.schedule();
      await Promise.allSettled([...this.pending]);
    }
  }

  private written(records: CallRecord[]): void {
    for (const r of records) {
      if (r.admission) this.deps.written(r.admission);
      r.span?.end();
    }
  }

  /** The database is away: records wait, spill to the spool each second, and the database is tried again. */
  private enterOutage(err: unknown): void {
    const { spool, events, logger } = this.deps;
    events?.failure('unavailable');
    if (!this.outage) logger.warn({ msg: 'the database is unavailable: gateway records wait for it', error: (err as Error).message });
    this.outage = true;
    if (spool && !this.spill) this.spill = setInterval(() => void this.spillQueue(), SPILL_EVERY_MS);
    this.spill?.unref();
    clearTimeout(this.probe);
    this.probe = setTimeout(() => {
      this.probeMs = Math.min(this.probeMs * 2, PROBE_MAX_MS);
      this.track(this.tryAgain());
    }, this.probeMs);
    this.probe.unref();
  }

  private leaveOutage(): void {
    if (this.outage) this.deps.logger.info({ msg: 'the database answers again: gateway records are written' });
    this.outage = false;
    this.probeMs = PROBE_FIRST_MS;
    clearInterval(this.spill);
    this.spill = undefined;
  }

  /** The records waiting in memory go to the spool; their leases may be released. */
  private async spillQueue(): Promise<void> {
    const { spool, events, logger } = this.deps;
    if (!spool || !this.queue.length) return;
    const records = this.queue.splice(0, this.queue.length);
    try {
      await spool.append(records);
      events?.spooled(records.length);
      this.written(records);
    } catch (err) {
      this.queue.unshift(...records);
      logger.error({ msg: 'could not write the gateway spool; records wait in memory', error: (err as Error).message });
    }
  }

  /** One statement, to see whether the database is back: the oldest records, or the spool's. */
  private async tryAgain(): Promise<void> {
    const { repo, spool, logger } = this.deps;
    try {
      if (this.queue.length) {
        const batch = this.queue.slice(0, MAX_BATCH);
        await repo.record(batch);
        this.queue.splice(0, batch.length);
        this.written(batch);
      } else if (spool) {
        await spool.replay((rows) => repo.record(rows));
      }
      this.leaveOutage();
      this.schedule();
      if (spool) this.track(this.replaySpool());
    } catch (err) {
      if (isDatabaseUnavailable(err)) this.enterOutage(err);
      else {
        logger.error({ msg: 'gateway records could not be written', error: (err as Error).message });
        this.leaveOutage();
        this.schedule();
      }
    }
  }

  /** Writes what waits in the spool (this process's, and those of dead processes on this data dir). */
  private async replaySpool(): Promise<void> {
    const { repo, spool, logger } = this.deps;
    try {
      const n = await spool!.replay((rows) => repo.record(rows));
      if (n) logger.info({ msg: 'wrote the gateway records that waited in the spool', records: n });
    } catch (err) {
      if (isDatabaseUnavailable(err)) this.enterOutage(err);
      else logger.error({ msg: 'could not write the gateway spool', error: (err as Error).message });
    }
  }

  private async writeAlone(record: CallRecord): Promise<void> {
    try {
      await withRetries(() => this.deps.repo.record([record]));
    } catch (err) {
      if (isDatabaseUnavailable(err)) {
        this.queue.push(record);
        this.enterOutage(err);
        return;
      }
      this.deps.events?.failure('given_up');
      record.span?.setStatus({ code: SpanStatusCode.ERROR, message: 'the database refused the record' });
      this.deps.logger.error({
        msg: 'a gateway call could not be recorded and goes uncharged (the database refuses its record)',
        requestId: record.requestId,
        error: (err as Error).message,
      });
    }
    this.written([record]);
  }

  /**
   * Writes the calls waiting, a statement per MAX_BATCH; those that ended meanwhile follow at once only while
   * FLUSH_AT of them wait, else they are left to their window (schedule(), once this write is done).
   */
  private async flush(): Promise<void> {
    const { queue } = this;
    while (queue.length && !this.outage) {
      await this.write(queue.splice(0, MAX_BATCH));
      if (queue.length < this.flushAt) break;
    }
    if (!this.outage) await this.flushLogs();
  }

  private async write(batch: CallRecord[]): Promise<void> {
    try {
      await this.deps.repo.record(batch);
    } catch (err) {
      if (isDatabaseUnavailable(err)) {
        this.queue.unshift(...batch);
        this.enterOutage(err);
        return;
      }
      // One bad record must not hold the others back: each is retried on its own.
      this.deps.events?.failure('refused');
      await Promise.all(batch.map((record) => this.writeAlone(record)));
      return;
    }
    this.deps.events?.batch(batch.length);
    this.written(batch);
  }

  /** The request logs waiting, their entries made and sealed now, a statement per MAX_LOG_BATCH; a failed one is dropped. */
  private async flushLogs(): Promise<void> {
    const { logs, events, logger } = this.deps;
    while (this.logs.length && logs) {
      const batch = this.logs.splice(0, MAX_LOG_BATCH);
      for (const pending of batch) this.logBytes -= pending.size;
      try {
        await logs.write(batch.map((pending) => pending.entry()));
        events?.logsWritten(batch.length);
      } catch (err) {
        events?.logsDropped('failed', batch.length);
        logger.warn({ msg: 'request logs could not be written and are dropped', logs: batch.length, error: (err as Error).message });
      }
    }
  }

  private dropLogs(count: number, reason: LogDropped): void {
    if (!count) return;
    this.logs.splice(0, count);
    this.logBytes = 0;
    this.deps.events?.logsDropped(reason, count);
  }

  private schedule(): void {
    if (this.flushing || this.outage) return;
    // Group commit: the calls ending within the window share one statement (and one commit).
    const gathered = this.queue.length >= this.flushAt ? Promise.resolve() : this.gather();
    this.flushing = gathered
      .then(() => this.flush())
      .finally(() => {
        this.flushing = null;
        if (this.queue.length || (this.logs.length && !this.outage)) this.schedule();
      });
    this.track(this.flushing);
  }

  /**
   * The group commit's window, counted from the first call waiting: a slice of GROUP_WINDOW_MS after it, then
   * another while the last brought a call, until MAX_WINDOW_MS after it; FLUSH_AT calls waiting close it at once
   * (record()). Calls that waited a slice out behind a statement are written at once.
   */
  private gather(): Promise<void> {
    const open = () => Date.now() - this.firstQueuedAt;
    const first = GROUP_WINDOW_MS - open();
    if (first <= 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let seen = this.queue.length;
      let timer: NodeJS.Timeout;
      const close = () => {
        clearTimeout(timer);
        this.closeWindow = null;
        resolve();
      };
      const slice = () => {
        const waiting = this.queue.length;
        if (waiting === seen || open() >= this.maxWindowMs) return close();
        seen = waiting;
        timer = setTimeout(slice, GROUP_WINDOW_MS);
      };
      this.closeWindow = close;
      timer = setTimeout(slice, Math.min(first, GROUP_WINDOW_MS));
    });
  }

  /** Whether the key's lastRequestAt is due a write (checked first, so most calls start no write at all). */
  private keyDue(keyId: string, lastRequestAt: Date | null, now: Date): boolean {
    const known = Math.max(this.keyTouchedAt.get(keyId) ?? 0, lastRequestAt?.getTime() ?? 0);
    return now.getTime() - known >= LAST_REQUEST_INTERVAL_MS;
  }

  private async touchKey(keyId: string, now: Date): Promise<void> {
    this.keyTouchedAt.set(keyId, now.getTime());
    if (this.keyTouchedAt.size > 100_000) this.keyTouchedAt.clear();
    try {
      // Its condition keeps it to one write a minute across processes too.
      await this.deps.keys.touchLastRequest(keyId, now);
    } catch (err) {
      this.deps.logger.warn({ msg: 'could not update lastRequestAt', keyId, error: (err as Error).message });
    }
  }

  /** Looks for spool files a process of this host left, and writes them (one look at a time, none during an outage). */
  private claimForeign(spool: Spool): void {
    if (this.looking || this.outage) return;
    this.looking = true;
    spool
      .foreign()
      .then((found) => {
        if (found && !this.outage) this.track(this.replaySpool());
      })
      .catch((err: Error) => this.deps.logger.warn({ msg: 'could not read the gateway spool directory', error: err.message }))
      .finally(() => (this.looking = false));
  }

  private track(p: Promise<void>): void {
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }
}

export function createCallRecorder(deps: CallRecorderDeps): CallRecorder {
  return new CallRecorder(deps);
}

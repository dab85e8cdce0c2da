/**
 * NEXUS_WORKERS=N: the primary of a node:cluster. It serves nothing and opens no database itself: it forks N
 * workers, each a whole Nexus (src/server.ts) on the one port (the primary hands them the connections in turn).
 *
 * - Migrations: the first worker starts alone and migrates the database (as any Nexus does at start); the others
 *   are forked once it has started and serves, so two never race for knex's migration lock (the loser of that race
 *   fails to start). While PostgreSQL cannot be reached, the first worker waits for it as a single process does
 *   (src/db/wait-for-database.ts), serving /healthz meanwhile. If it cannot start (a migration fails, PostgreSQL
 *   is not reached within NEXUS_DATABASE_STARTUP_TIMEOUT_MS, the port is taken), the primary exits 1. Without
 *   NEXUS_MANAGEMENT_KEY, the first worker makes and prints the root key once it serves.
 * - Quota across workers is exact as across machines: each worker holds its own quota leases in PostgreSQL.
 * - A worker that dies is forked again, after 0.5 s, doubled (up to 30 s) while the new ones die young.
 * - SIGTERM/SIGINT: forwarded to every worker as SIGTERM; each drains as a single process does
 *   (NEXUS_SHUTDOWN_TIMEOUT_MS), and the primary exits once they have all gone: 0 if each exited 0. A worker still
 *   there 7 s past the drain timeout is killed (a worker gives its own close 5 s).
 */
import cluster, { type Worker } from 'node:cluster';
import type { Config } from './config.js';
import { createLogger } from './observability/logger.js';

/**
 * The primary and its workers write to one stdout and stderr, the primary's, inherited. Node writes to a pipe
 * asynchronously on POSIX: lines that wait while the reader is slow go out later in one writev, which the kernel may
 * cut anywhere once it is longer than the pipe's atomic size (4 KiB), so another process's line lands inside one of
 * ours and a log shipper reads two broken lines. Blocking writes make each line a write of its own, whole up to
 * 4 KiB. The price: a process whose reader has stopped reading waits for it (as pino's default synchronous
 * destination does) instead of holding its lines in memory. Called by the primary and by each worker (src/server.ts).
 */
export function writeWholeLines(): void {
  for (const stream of [process.stdout, process.stderr]) {
    (stream as unknown as { _handle?: { setBlocking?: (blocking: boolean) => number } })._handle?.setBlocking?.(true);
  }
}

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 30_000;
/** A worker that lived this long was healthy: the next restart waits the first delay again. */
const HEALTHY_AFTER_MS = 30_000;
const KILL_GRACE_MS = 7_000;

export function runPrimary(config: Config): { stop(signal: string): void } {
  const logger = createLogger(config.logLevel, undefined, { primary: true, pid: process.pid });
  const startedAt = new Map<Worker, number>();
  const restarts = new Set<NodeJS.Timeout>();
  let delay = FIRST_DELAY_MS;
  let stopping = false;
  let started = false;
  let failed = false;

  function fork(): Worker {
    const worker = cluster.fork();
    startedAt.set(worker, Date.now());
    worker.on('message', (message: unknown) => {
      if ((message as { nexus?: string } | null)?.nexus !== 'listening') return;
      if (!started) {
        started = true;
        logger.info({ msg: 'first worker listening: starting the others', workers: config.workers });
        for (let i = 1; i < config.workers; i++) fork();
      }
    });
    return worker;
  }

  cluster.on('exit', (worker, code, signal) => {
    const lived = Date.now() - (startedAt.get(worker) ?? Date.now());
    startedAt.delete(worker);
    if (code !== 0) failed = true;
    if (stopping) {
      if (startedAt.size === 0) {
        logger.info({ msg: 'all workers stopped' });
        process.exit(failed ? 1 : 0);
      }
      return;
    }
    if (!started) {
      // The first worker never listened: its own lines (stderr) say why. Forking it again would fail the same way.
      logger.error({ msg: 'the first worker could not start', code, signal });
      process.exit(1);
    }
    delay = lived >= HEALTHY_AFTER_MS ? FIRST_DELAY_MS : delay;
    logger.error({ msg: 'worker died: starting another', worker: worker.id, workerPid: worker.process.pid, code, signal, inMs: delay });
    const timer = setTimeout(() => {
      restarts.delete(timer);
      if (!stopping) fork();
    }, delay);
    restarts.add(timer);
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  });

  logger.info({ msg: 'primary starting workers', workers: config.workers });
  fork();

  return {
    stop(signal: string) {
      if (stopping) return;
      stopping = true;
      for (const timer of restarts) clearTimeout(timer);
      logger.info({ msg: 'stopping workers', signal, workers: startedAt.size });
      if (startedAt.size === 0) process.exit(0);
      for (const worker of startedAt.keys()) worker.process.kill('SIGTERM');
      setTimeout(() => {
        for (const worker of startedAt.keys()) {
          logger.error({ msg: 'worker did not stop in time: killed', worker: worker.id, workerPid: worker.process.pid });
          worker.process.kill('SIGKILL');
        }
      }, config.shutdownTimeoutMs + KILL_GRACE_MS).unref();
    },
  };
}

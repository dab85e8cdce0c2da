/**
 * A start while PostgreSQL cannot be reached (down, restarting, not yet up beside Nexus): the database is tried
 * again with backoff until it answers and the migrations are applied, or until the time the start may take is
 * up (NEXUS_DATABASE_STARTUP_TIMEOUT_MS). Meanwhile the process serves what needs no database (src/server.ts,
 * src/app.ts). Any other failure (a refused password, a database that does not exist, a migration that fails)
 * ends the start as before: waiting would not change it.
 */
import pg from 'pg';
import { isDatabaseUnavailable } from '../database-unavailable.js';
import type { Logger } from '../observability/logger.js';
import type { Db } from './database.js';
import { migrateLatest } from './migrate.js';

/** The first wait between two tries; it doubles up to MAX_DELAY_MS. */
const FIRST_DELAY_MS = 100;
/**
 * The longest wait between two tries: a database that comes back is found within this and one try (a
 * refused connection fails at once), and the process serves within a second or two of its return.
 */
const MAX_DELAY_MS = 500;
/**
 * How long one try may take: a connection that is accepted and never answered (a network partition, a pooler
 * whose PostgreSQL is down and holds the query) is a failed try, not a start that hangs.
 */
const TRY_TIMEOUT_MS = 2000;

/** The time allowed is up: its message is the one line the process prints before it exits. */
export class DatabaseWaitTimeout extends Error {}

export interface DatabaseWait {
  /** PostgreSQL's URL (DATABASE_URL). */
  url: string;
  schema: string | undefined;
  /** How long the start may wait (NEXUS_DATABASE_STARTUP_TIMEOUT_MS); 0: one try. */
  timeoutMs: number;
  logger: Logger;
  /** Called once, when a first try finds the database unavailable: the process serves meanwhile. */
  onWaiting?: (() => void) | undefined;
}

/** What an error says, for a line: an AggregateError (one error per address of a host) has no message of its own. */
function describe(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown; errors?: unknown[] };
  if (typeof e?.message === 'string' && e.message) return e.message;
  if (Array.isArray(e?.errors) && e.errors.length) return e.errors.map(describe).join('; ');
  return typeof e?.code === 'string' ? e.code : String(err);
}

/**
 * One connection of its own (not the pool's: a try that times out leaves no connection waiting there), one
 * `select 1`, closed. Throws what the database answered, or pg's timeout after `timeoutMs`.
 */
async function reach(url: string, timeoutMs: number): Promise<void> {
  const client = new pg.Client({
    connectionString: url,
    application_name: 'nexus',
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
  } finally {
    // Not waited for: a connection that never answered need not answer its close either.
    client.end().catch(() => {});
  }
}

/**
 * Applies the migrations on `db` once the database answers, trying again while it is unavailable; throws
 * DatabaseWaitTimeout when the time is up. Logs one line when it starts waiting and one when the database
 * answers.
 */
export async function migrateWhenReachable(db: Db, wait: DatabaseWait): Promise<void> {
  const startedAt = Date.now();
  const deadline = startedAt + wait.timeoutMs;
  let delay = FIRST_DELAY_MS;
  let waiting = false;
  for (;;) {
    try {
      await reach(wait.url, Math.max(100, Math.min(TRY_TIMEOUT_MS, deadline - Date.now())));
      // The database may go again between the two: then the migration fails as unavailable, and is tried again.
      await migrateLatest(db, wait.schema);
      if (waiting) wait.logger.info({ msg: 'the database answers: starting', waitedMs: Date.now() - startedAt });
      return;
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new DatabaseWaitTimeout(
          `Nexus cannot start: the database did not answer within ${wait.timeoutMs / 1000} s (NEXUS_DATABASE_STARTUP_TIMEOUT_MS): ${describe(err)}`,
        );
      }
      if (!waiting) {
        waiting = true;
        wait.logger.warn({
          msg: 'the database is unavailable: waiting for it (NEXUS_DATABASE_STARTUP_TIMEOUT_MS); /healthz answers 200, /readyz 503 meanwhile',
          error: describe(err),
          timeoutMs: wait.timeoutMs,
        });
        wait.onWaiting?.();
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(delay, left)));
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }
}

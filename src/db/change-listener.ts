/**
 * The LISTEN side of the change feed (src/domain/changes/change-feed.ts): one
 * dedicated connection, outside the knex pool, that hears the other processes'
 * notifications. It needs a session of its own for as long as it listens, which a
 * PgBouncer in transaction pooling cannot give: NEXUS_DATABASE_LISTEN_URL can point
 * it at PostgreSQL directly.
 *
 * When the connection drops it reconnects with backoff (100 ms doubling to 5 s,
 * jittered). Whatever was announced while it was away is lost, so each time it
 * listens again `onListening` tells the owner to drop everything it cached. The
 * cache is not dropped when the connection goes: while PostgreSQL is away the
 * gateway serves recent entries for a bounded grace (auth-cache.ts).
 *
 * With `onHeard`, the session is asked every `pingMs` while it listens whether it still listens on the channel (so its
 * last query, in pg_stat_activity, still names the channel). PostgreSQL sends a listening
 * session the notifications it has been signalled of before it says it is ready for the next query, so an answer
 * vouches that every notification committed before the question was asked has arrived (and been handed to
 * `onPayload`, which runs as each arrives, before the answer's promise settles). A session that leaves a question
 * unanswered for `pingTimeoutMs` is taken as lost: a connection a network dropped without a word would otherwise
 * look alive until TCP's keepalive gave up on it. A session that answers that it does not listen is not its own: a
 * transaction pooler handed the question to another server session. Such a listener cannot vouch for anything, so it
 * stops asking for good (`onFailure` tells the owner) and carries on as a listener without pings does.
 */
import pg from 'pg';
import type { Logger } from '../observability/logger.js';

/** How the listener's session shows in pg_stat_activity. */
export const LISTENER_APPLICATION_NAME = 'nexus-listen';
const FIRST_RETRY_MS = 100;
const MAX_RETRY_MS = 5000;
const CONNECT_TIMEOUT_MS = 5000;
/** How often a listening session is pinged (with onHeard): four chances within the key cache's default TTL. */
const PING_MS = 250;

export interface ChangeListener {
  /** Resolves once the first attempt to listen has succeeded or failed (it retries on its own after). */
  ready: Promise<void>;
  close(): Promise<void>;
}

export function startChangeListener(deps: {
  url: string;
  channel: string;
  logger: Logger;
  /** A notification's payload. */
  onPayload: (payload: string) => void;
  /** Listening (again): what was announced before may have been missed. */
  onListening: (reconnected: boolean) => void;
  /** An attempt to listen failed or the session was lost (it tries again), or it is not its own (its pings stop). */
  onFailure?: () => void;
  /** The session answered a ping asked at this Date.now(). */
  onHeard?: (askedAt: number) => void;
  pingMs?: number;
  pingTimeoutMs?: number;
}): ChangeListener {
  const { url, channel, logger } = deps;
  let client: pg.Client | undefined;
  let closed = false;
  let failures = 0;
  let listenedOnce = false;
  let retry: NodeJS.Timeout | undefined;
  let pinging: NodeJS.Timeout | undefined;
  /** A ping found its session not listening: the connection goes through a transaction pooler. */
  let pooled = false;

  function scheduleRetry(): void {
    if (closed) return;
    const delay = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** failures);
    failures++;
    retry = setTimeout(() => void connect(), Math.round(delay * (0.75 + Math.random() / 4)));
    retry.unref();
  }

  /** The session is gone (or never came): forget it and try again. */
  function lost(c: pg.Client, err: Error | undefined): void {
    if (c !== client) return;
    client = undefined;
    clearInterval(pinging);
    c.removeAllListeners('notification');
    c.end().catch(() => {});
    if (closed) return;
    logger.warn({ msg: 'change listener disconnected: reconnecting', error: err?.message ?? 'connection ended' });
    deps.onFailure?.();
    scheduleRetry();
  }

  async function connect(): Promise<void> {
    if (closed) return;
    const c = new pg.Client({
      connectionString: url,
      application_name: LISTENER_APPLICATION_NAME,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    client = c;
    c.on('error', (err) => lost(c, err));
    c.on('end', () => lost(c, undefined));
    c.on('notification', (n) => {
      if (n.channel === channel) deps.onPayload(n.payload ?? '');
    });
    try {
      await c.connect();
      await c.query(`listen ${c.escapeIdentifier(channel)}`);
    } catch (err) {
      if (client === c) {
        client = undefined;
        c.end().catch(() => {});
        if (failures === 0 || failures % 10 === 0) {
          logger.warn({ msg: 'change listener cannot listen: retrying', error: (err as Error).message });
        }
        deps.onFailure?.();
        scheduleRetry();
      }
      return;
    }
    if (closed || client !== c) return;
    failures = 0;
    if (listenedOnce) logger.info({ msg: 'change listener reconnected: cached lookups dropped' });
    deps.onListening(listenedOnce);
    listenedOnce = true;
    if (deps.onHeard && !pooled) ping(c, deps.onHeard);
  }

  /** `c` answered a ping from a session that does not listen (see the header): pings stop, the listener stays. */
  function notItsOwn(c: pg.Client): void {
    if (c !== client || pooled) return;
    pooled = true;
    clearInterval(pinging);
    logger.warn({
      msg: 'change listener: its session is not its own (a transaction pooler?), so it cannot vouch that changes are heard: cached keys keep NEXUS_AUTH_CACHE_TTL_MS; point NEXUS_DATABASE_LISTEN_URL at PostgreSQL itself',
    });
    deps.onFailure?.();
  }

  /** Asks the listening session `c` every pingMs, one question at a time, and tells `onHeard` of each answer. */
  function ping(c: pg.Client, onHeard: (askedAt: number) => void): void {
    const timeoutMs = deps.pingTimeoutMs ?? CONNECT_TIMEOUT_MS;
    const question = `select 1 from pg_listening_channels() c where c = ${c.escapeLiteral(channel)}`;
    let asked: number | undefined;
    pinging = setInterval(() => {
      if (asked !== undefined) {
        if (Date.now() - asked > timeoutMs) lost(c, new Error(`no answer to a ping in ${timeoutMs} ms`));
        return;
      }
      const at = (asked = Date.now());
      c.query(question).then(
        ({ rowCount }) => {
          asked = undefined;
          if (rowCount !== 1) notItsOwn(c);
          else if (client === c) onHeard(at);
        },
        (err: Error) => lost(c, err),
      );
    }, deps.pingMs ?? PING_MS);
    pinging.unref();
  }

  const ready = connect();
  return {
    ready,
    async close() {
      closed = true;
      clearTimeout(retry);
      clearInterval(pinging);
      const c = client;
      client = undefined;
      if (c) await c.end().catch(() => {});
    },
  };
}

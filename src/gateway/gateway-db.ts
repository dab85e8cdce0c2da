/**
 * The gateway's own PostgreSQL pool, so control-plane traffic never queues
 * behind it. With NEXUS_GATEWAY_ASYNC_COMMIT=true (off by default) its sessions
 * commit with synchronous_commit=off: a commit returns without waiting for the
 * WAL flush (~4 ms on this machine), so the hot row of a busy access (its quota
 * period) is locked for microseconds instead of a disk flush. The trade,
 * documented in docs/decisions.md: a crash of PostgreSQL itself (not of Nexus)
 * can lose the last moments (at most 3 x wal_writer_delay, 600 ms by default)
 * of leases and settlements; the calls in that window go uncharged. Each
 * transaction stays atomic, so the invariants (no overspend by holds, one usage
 * event per settlement) hold either way.
 */
import knexPkg, { type Knex } from 'knex';
import type pg from 'pg';
import type { Db } from '../db/database.js';
import { isEmbedded } from '../db/database.js';

/**
 * A named statement with positional parameters ($1, $2...). On PostgreSQL it is
 * prepared once per pooled connection, so the statement the gateway runs for
 * every batch of calls is not parsed and planned again each time (with a few
 * calls per batch that was most of PostgreSQL's CPU per call). On PGlite it is
 * an ordinary query.
 *
 * With `prepared` false (NEXUS_DATABASE_PREPARED_STATEMENTS=false) the name is
 * dropped and the statement goes as an unnamed extended-protocol query, parsed
 * each time. That is what a pooler in transaction mode needs (PgBouncer before
 * 1.21, or without max_prepared_statements): pg prepares a named statement once
 * per client connection, but the pooler runs each transaction on whichever
 * server connection is free, so the next execution finds `prepared statement
 * "..." does not exist` there, or a second PREPARE finds it `already exists`.
 */
export type NamedQuery = <T>(name: string, text: string, values: unknown[]) => Promise<T[]>;

export function namedQuery(db: Db, prepared = true): NamedQuery {
  if (isEmbedded(db)) {
    return async <T>(_name: string, text: string, values: unknown[]) => {
      // knex binds '?' in order: each $n becomes '?' with its value repeated where it repeats.
      const bindings: unknown[] = [];
      const sql = text.replace(/\$(\d+)/g, (_m, n: string) => {
        bindings.push(values[Number(n) - 1]);
        return '?';
      });
      return (await db.raw(sql, bindings as never[])).rows as T[];
    };
  }
  const client = db.client as { acquireConnection(): Promise<pg.Client>; releaseConnection(c: pg.Client): Promise<void> };
  return async <T>(name: string, text: string, values: unknown[]) => {
    const conn = await client.acquireConnection();
    try {
      return (await conn.query(prepared ? { name, text, values } : { text, values })).rows as T[];
    } finally {
      await client.releaseConnection(conn);
    }
  };
}

export function createGatewayDb(main: Db, asyncCommit: boolean, poolMax = 10): { db: Db; owned: boolean } {
  if (isEmbedded(main)) return { db: main, owned: false };
  const config = main.client.config as {
    connection: { connectionString?: string; application_name?: string } | string;
    searchPath?: string[] | string;
    log?: Knex.Config['log'];
  };
  const connectionString = typeof config.connection === 'string' ? config.connection : config.connection.connectionString;
  if (!connectionString) return { db: main, owned: false };
  const searchPath = Array.isArray(config.searchPath) ? config.searchPath.join(',') : config.searchPath;
  const options = [...(asyncCommit ? ['-c synchronous_commit=off'] : []), ...(searchPath ? [`-c search_path=${searchPath}`] : [])].join(
    ' ',
  );
  const db = knexPkg({
    client: 'pg',
    connection: { connectionString, application_name: 'nexus-gateway', ...(options ? { options } : {}) },
    pool: { min: 0, max: poolMax },
    ...(config.log ? { log: config.log } : {}),
  });
  return { db, owned: true };
}

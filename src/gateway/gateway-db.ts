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
 *
 * A connection of this pool settles on its plans of the gateway's named statements when it is opened
 * (gatewayIdleStatements, src/db/named-query.ts `settleOnCreate`; none behind a transaction pooler, without prepared
 * statements), and is closed only after NEXUS_GATEWAY_POOL_IDLE_MS unused (5 min by default, against knex's 30 s):
 * each one opened again costs its backend's start and tens of ms of planning (docs/performance.md).
 */
import knexPkg, { type Knex } from 'knex';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { isEmbedded } from '../db/database.js';
import { settleOnCreate, type IdleStatement } from '../db/named-query.js';
import { createQuotaRepo } from '../domain/quota/quota-repo.js';
import { createRateRepo } from '../domain/rate-limits/rate-repo.js';
import { createCallRepo } from '../records/call-repo.js';
import { createAuthRepo } from './auth-repo.js';

/**
 * The named statements of a call's path (a key's lookup, the records, the heartbeat and snapshot, a lease's
 * acquisition, extension and release, a rate allowance's grant and give-back), with values that match no row, so they write nothing: what each new
 * connection of the gateway's pool runs until PostgreSQL keeps their generic plans.
 */
export function gatewayIdleStatements(db: Db, now: Date): IdleStatement[] {
  return [
    ...createAuthRepo(db).idleStatements(now),
    ...createCallRepo(db).idleStatements(now),
    ...createQuotaRepo(db, true).idleStatements(now),
    ...createRateRepo(db, true).idleStatements(now),
  ];
}

/** NEXUS_GATEWAY_ASYNC_COMMIT, NEXUS_DATABASE_POOL_MAX, NEXUS_GATEWAY_POOL_IDLE_MS and NEXUS_DATABASE_PREPARED_STATEMENTS. */
type PoolConfig = Pick<Config, 'gatewayAsyncCommit' | 'databasePoolMax' | 'gatewayPoolIdleMs' | 'databasePreparedStatements'>;

export function createGatewayDb(main: Db, pool: PoolConfig, now: () => Date): { db: Db; owned: boolean } {
  if (isEmbedded(main)) return { db: main, owned: false };
  const config = main.client.config as {
    connection: { connectionString?: string; application_name?: string } | string;
    searchPath?: string[] | string;
    log?: Knex.Config['log'];
  };
  const connectionString = typeof config.connection === 'string' ? config.connection : config.connection.connectionString;
  if (!connectionString) return { db: main, owned: false };
  const searchPath = Array.isArray(config.searchPath) ? config.searchPath.join(',') : config.searchPath;
  const options = [
    ...(pool.gatewayAsyncCommit ? ['-c synchronous_commit=off'] : []),
    ...(searchPath ? [`-c search_path=${searchPath}`] : []),
  ].join(' ');
  const db: Db = knexPkg({
    client: 'pg',
    connection: { connectionString, application_name: 'nexus-gateway', ...(options ? { options } : {}) },
    pool: {
      min: 0,
      max: pool.databasePoolMax,
      idleTimeoutMillis: pool.gatewayPoolIdleMs,
      afterCreate: settleOnCreate(() => (pool.databasePreparedStatements ? gatewayIdleStatements(db, now()) : [])),
    },
    ...(config.log ? { log: config.log } : {}),
  });
  return { db, owned: true };
}

/** The database pools' figures (knex's tarn pools): connections in use, idle, waited for, and the most each opens. */
import { Gauge, type Registry } from 'prom-client';

/** A database handle whose pool is reported (knex: its client's tarn pool, if it has one). */
interface PooledDb {
  client: unknown;
}

/** What the metrics read of a knex (tarn) pool. */
interface TarnPool {
  max: number;
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
}

export function createPoolMetrics(registers: Registry[]) {
  const pools = new Map<string, PooledDb>();
  /** A knex pool's figures (tarn); none when the client has no pool. */
  const poolGauge = (name: string, help: string, read: (pool: TarnPool) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['pool'] as const,
      registers,
      collect() {
        for (const [label, db] of pools) {
          const pool = (db.client as { pool?: TarnPool }).pool;
          if (pool) this.set({ pool: label }, read(pool));
        }
      },
    });
  poolGauge(
    'nexus_db_pool_connections_in_use',
    'Database connections lent out, by pool (main: the Admin API and the domain; gateway: the hot path)',
    (p) => p.numUsed(),
  );
  poolGauge('nexus_db_pool_connections_idle', 'Database connections open and free, by pool', (p) => p.numFree());
  poolGauge('nexus_db_pool_pending_acquires', 'Queries waiting for a database connection, by pool', (p) => p.numPendingAcquires());
  poolGauge('nexus_db_pool_max_connections', 'The largest number of connections each pool opens', (p) => p.max);
  return {
    /** A knex pool to report (in use, idle, waiting), under `label`. */
    watchPool(label: string, db: PooledDb): void {
      pools.set(label, db);
    },
  };
}

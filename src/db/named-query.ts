import type pg from 'pg';
import { isEmbedded, type Db } from './database.js';

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

/** `names` as positional parameters: each one's placeholder ($1 for the first...) and the values in their order. */
export function positional<N extends string>(names: readonly N[]) {
  return {
    at: (name: N) => `$${names.indexOf(name) + 1}`,
    values: (of: Record<N, unknown>): unknown[] => names.map((name) => of[name]),
  };
}

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
  // A transaction's client hands out the transaction's own connection: its statements run in it.
  const client = db.client as { acquireConnection(): Promise<pg.Client>; releaseConnection(c: pg.Client): Promise<void> };
  return async <T>(name: string, text: string, values: unknown[]) => {
    const conn = await client.acquireConnection();
    try {
      return (await run(conn, prepared ? { name, text, values } : { text, values })).rows as T[];
    } finally {
      await client.releaseConnection(conn);
    }
  };
}

/**
 * pg's `query(config)` without a callback makes its promise by setting the Query's callback to a closure of its own,
 * made where the Query is in scope; V8 then keeps every such Query, with its rows and whatever waits on its promise,
 * through young-generation collections until the next full one (a process that runs a statement at a time promoted
 * each one). Given a callback, pg passes it to the Query's constructor and that does not happen
 * (docs/performance.md, "Latency added").
 */
function run(conn: pg.Client, config: pg.QueryConfig): Promise<pg.QueryResult> {
  return new Promise((resolve, reject) => {
    conn.query(config, (err: Error | null, result: pg.QueryResult) => (err ? reject(err) : resolve(result)));
  });
}

/** No row of any table has the nil id: an idle statement's values name it. */
export const NIL_ID = '00000000-0000-0000-0000-000000000000';

/** A named statement with values that match no row: what the warm-up runs to have a connection plan it before a call does. */
export interface IdleStatement {
  name: string;
  text: string;
  values: unknown[];
}

/**
 * PostgreSQL plans a prepared statement for its values at each of its first five executions on a connection, and at
 * the sixth makes the generic plan it keeps from then on (when that plan costs no more than theirs did on average).
 */
const EXECUTIONS_TO_GENERIC_PLAN = 6;

/**
 * Runs each of `statements` on `conn` (a pooled connection held by the caller) until PostgreSQL has settled on its
 * plan: the record statement's plan takes milliseconds, and a fresh pool's first calls would otherwise pay for five
 * of them on each connection, and the relations' catalog entries loaded by each backend.
 */
async function settlePlans(conn: pg.Client, statements: IdleStatement[]): Promise<void> {
  for (const { name, text, values } of statements)
    for (let i = 0; i < EXECUTIONS_TO_GENERIC_PLAN; i++) await run(conn, { name, text, values });
}

/**
 * A pool's `afterCreate`: each connection the pool opens settles on its plans of `statements()` (settlePlans) before
 * the pool hands it out, whenever it is opened (a start's warm-up, a pool that grows under a burst, or one opened
 * again after its connections were closed idle), so no call pays a connection's custom plans. A statement that fails
 * here is planned by the first call that runs it; the connection is handed out either way.
 */
export function settleOnCreate(statements: () => IdleStatement[]) {
  return (conn: pg.Client, done: (err: Error | null, conn: pg.Client) => void): void => {
    Promise.resolve()
      .then(() => settlePlans(conn, statements()))
      .then(
        () => done(null, conn),
        () => done(null, conn),
      );
  };
}

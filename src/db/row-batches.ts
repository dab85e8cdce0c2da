import type { Knex } from 'knex';
import pg from 'pg';

/**
 * A statement's rows as PostgreSQL sends them, in batches of `size` (each row an array of its columns' values, parsed
 * as pg parses them), for an answer written while the statement still runs: no object is made of a row, and no
 * result is held whole (a month of 2,000 users by day, 62,000 rows, kept every row's strings alive across the
 * garbage collector's scavenges until the last arrived). On PostgreSQL only (pg's rows as they come; PGlite has
 * none): callers check isEmbedded first.
 *
 * The statement runs in a transaction of its own on a pooled connection, after `settings` (a statement of
 * `set_config(..., true)`, local to it), and the connection goes back to the pool when its last row has arrived,
 * however long the caller takes to use them. Resolves once the first batch is in (or the statement has ended, or
 * failed: its error is thrown here, before an answer has begun). Rows that arrive faster than the caller takes them
 * wait in memory, as a whole result would; a caller that stops early leaves the rest to be read and dropped.
 */
export async function rowBatches(
  db: Knex,
  sql: string,
  bound: Knex.ValueDict,
  settings: string,
  size: number,
): Promise<AsyncGenerator<unknown[][]>> {
  const { sql: text, bindings } = db.raw(sql, bound).toSQL().toNative();
  const client = db.client as { acquireConnection(): Promise<pg.Client>; releaseConnection(c: pg.Client): Promise<void> };
  const conn = await client.acquireConnection();
  try {
    await conn.query('begin');
    await conn.query(settings);
  } catch (err) {
    await conn.query('rollback').catch(() => undefined);
    await client.releaseConnection(conn);
    throw err;
  }
  const ready: unknown[][][] = [];
  let batch: unknown[][] = [];
  let ended = false;
  let failure: Error | undefined;
  let dropped = false;
  let closing = false;
  let wake: (() => void) | undefined;
  const woken = () => {
    wake?.();
    wake = undefined;
  };
  const end = (err?: Error) => {
    // pg ends a query once ('end' or 'error'); a broken connection's error may follow its end.
    if (closing) return;
    closing = true;
    void conn
      .query(err === undefined ? 'commit' : 'rollback')
      .catch(() => undefined)
      .finally(() => client.releaseConnection(conn))
      .finally(() => {
        ended = true;
        failure = err;
        woken();
      });
  };
  // rowMode is pg's, not in its types' QueryConfig: each row an array of its values.
  const query = new pg.Query({ text, values: bindings as unknown[], rowMode: 'array' } as pg.QueryConfig);
  query.on('row', (row: unknown[]) => {
    if (dropped) return;
    batch.push(row);
    if (batch.length < size) return;
    ready.push(batch);
    batch = [];
    woken();
  });
  query.on('end', () => {
    if (batch.length && !dropped) ready.push(batch);
    batch = [];
    end();
  });
  query.on('error', (err: Error) => end(err));
  void conn.query(query);
  const next = () => (ready.length || ended ? Promise.resolve() : new Promise<void>((resolve) => (wake = resolve)));
  await next();
  if (!ready.length && failure !== undefined) throw failure;
  async function* inTurn(): AsyncGenerator<unknown[][]> {
    try {
      for (;;) {
        await next();
        const rows = ready.shift();
        if (rows) yield rows;
        else if (failure !== undefined) throw failure;
        else if (ended) return;
      }
    } finally {
      dropped = true;
      ready.length = 0;
    }
  }
  return inTurn();
}

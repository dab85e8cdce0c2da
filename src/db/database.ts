/**
 * knex over PostgreSQL (DATABASE_URL) or the embedded PGlite. Both return int8
 * as a JS bigint: that normalisation happens here and nowhere else.
 */
import knexPkg, { type Knex } from 'knex';
import pg from 'pg';
import type ClientPgLiteType from 'knex-pglite';
import type * as PGliteModule from '@electric-sql/pglite';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { lockDataDir } from './data-dir-lock.js';

/**
 * PGlite and its knex dialect are loaded only when an embedded database is made: a process on PostgreSQL never
 * holds their modules (3-5 MiB resident). Loaded with `require`, as knex-pglite (CommonJS) loads PGlite itself, so
 * one copy of PGlite's module is loaded, not its ES module beside its CommonJS one.
 */
const require = createRequire(import.meta.url);

export type Db = Knex;
/** What a repository function accepts as its last argument. */
export type Queryable = Knex | Knex.Transaction;

const INT8_OID = 20;
pg.types.setTypeParser(INT8_OID, (value: string) => BigInt(value));

export interface DatabaseOptions {
  databaseUrl: string | undefined;
  /** A schema to create and use instead of public (tests). */
  schema?: string | undefined;
  /** Where PGlite keeps its files; undefined: in memory. */
  pgliteDir?: string | undefined;
  poolMax?: number;
  /**
   * Where knex's own warnings go (a connection that failed, say). Unset: knex prints them, stack
   * and all, on stdout, which breaks a log of one JSON object per line.
   */
  log?: (level: 'warn' | 'error', message: string) => void;
}

/** What knex hands a dialect's query and response methods (internal to knex, hence the narrow shape). */
interface QueryObject {
  method?: string;
  output?: unknown;
  returning?: unknown;
}

/**
 * knex over PGlite, with two corrections:
 * - a delete answers the number of rows it deleted, as on PostgreSQL (knex-pglite names the statement
 *   after knex's method, 'DEL', which knex's postgres dialect does not know, so it answered the whole
 *   result object, and a loop counting deleted rows never ended);
 * - every statement first lets the event loop turn (setImmediate). PGlite runs in this thread and its
 *   statements resolve without any I/O, so a loop of statements would otherwise never leave the microtask
 *   queue: no timer, no HTTP request (not even /healthz) and no signal handler would run until it ended.
 *   The cost is one turn of the loop per statement.
 */
function embeddedClient(ClientPgLite: typeof ClientPgLiteType): typeof ClientPgLiteType {
  return class EmbeddedClient extends ClientPgLite {
    async _query(connection: unknown, obj: QueryObject): Promise<QueryObject> {
      await new Promise<void>((resolve) => setImmediate(resolve));
      return (ClientPgLite.prototype as unknown as { _query(c: unknown, o: QueryObject): Promise<QueryObject> })._query.call(
        this,
        connection,
        obj,
      );
    }

    processResponse(obj: QueryObject, runner: unknown): unknown {
      const answer = (ClientPgLite.prototype as unknown as { processResponse(o: QueryObject, r: unknown): unknown }).processResponse.call(
        this,
        obj,
        runner,
      );
      if (obj.method === 'del' && !obj.output && !obj.returning && answer && typeof answer === 'object') {
        return (answer as { rowCount?: number }).rowCount ?? 0;
      }
      return answer;
    }
  };
}

/** knex's logger option, from `log`: its deprecation notes are warnings, its debug output (off) is dropped. */
function knexLog(log: NonNullable<DatabaseOptions['log']>): Knex.Config['log'] {
  return {
    warn: (message: string) => log('warn', String(message)),
    error: (message: string) => log('error', String(message)),
    deprecate: (method: string, alternative: string) => log('warn', `${method} is deprecated, use ${alternative}`),
    debug: () => {},
  };
}

export function createDatabase(options: DatabaseOptions): Db {
  const { databaseUrl, schema } = options;
  if (databaseUrl) {
    return knexPkg({
      client: 'pg',
      connection: { connectionString: databaseUrl, application_name: 'nexus' },
      searchPath: schema ? [schema] : undefined,
      ...(options.log ? { log: knexLog(options.log) } : {}),
      pool: {
        min: 0,
        max: options.poolMax ?? 10,
        afterCreate: (conn: pg.Client, done: (err: Error | null, conn: pg.Client) => void) => {
          if (!schema) return done(null, conn);
          conn.query(`create schema if not exists "${schema}"`, (err) => done(err ?? null, conn));
        },
      },
    });
  }
  if (options.pgliteDir) {
    mkdirSync(options.pgliteDir, { recursive: true });
    lockDataDir(options.pgliteDir);
  }
  const { PGlite, types: pgliteTypes } = require('@electric-sql/pglite') as typeof PGliteModule;
  const ClientPgLite = require('knex-pglite') as typeof ClientPgLiteType;
  // Options form: the (dataDir, options) form drops `parsers` for an in-memory database.
  const pglite = new PGlite({
    ...(options.pgliteDir ? { dataDir: options.pgliteDir } : {}),
    parsers: { [pgliteTypes.INT8]: (value: string) => BigInt(value) },
  });
  return knexPkg({
    client: embeddedClient(ClientPgLite),
    dialect: 'postgres',
    connection: () => ({ pglite }),
    ...(options.log ? { log: knexLog(options.log) } : {}),
  } as Knex.Config);
}

/** True when the knex instance talks to the embedded PGlite (one connection). */
export function isEmbedded(db: Db): boolean {
  return db.client.config.client !== 'pg';
}

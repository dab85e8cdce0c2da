/**
 * Whether an error means the database cannot be reached right now (down,
 * restarting, unreachable, out of connections), as opposed to a statement it
 * refused. Such an error is answered 503 `database_unavailable` with
 * Retry-After (errors.ts), and the gateway's records wait for the database
 * instead of being given up (records/call-recorder.ts).
 */

/** Node's socket errors when the server is not there or goes away. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * PostgreSQL's SQLSTATEs of an unavailable server: class 08 (connection exception), 53300 too many
 * connections, 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now (starting up).
 */
const UNAVAILABLE_STATES = /^(08...|53300|57P0[123])$/;

/**
 * pg's and knex's own words when a connection dies or none can be had; pg's when a client's connectionTimeoutMillis
 * (`timeout expired`) or query_timeout (`Query read timeout`) runs out.
 */
const MESSAGES =
  /Connection terminated|connection error and is not queryable|Timeout acquiring a connection|Connection ended unexpectedly|terminating connection|^timeout expired$|^Query read timeout$/i;

export function isDatabaseUnavailable(err: unknown): boolean {
  for (
    let e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 4;
    depth++
  ) {
    if (typeof e.code === 'string' && (SOCKET_CODES.has(e.code) || UNAVAILABLE_STATES.test(e.code))) return true;
    if (e.name === 'KnexTimeoutError') return true;
    if (typeof e.message === 'string' && MESSAGES.test(e.message)) return true;
    // An AggregateError (a host that resolves to several addresses) holds one error per address.
    const errors = (e as { errors?: unknown[] }).errors;
    if (Array.isArray(errors) && errors.some((inner) => isDatabaseUnavailable(inner))) return true;
    e = e.cause as typeof e;
  }
  return false;
}

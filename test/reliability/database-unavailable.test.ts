import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/database-unavailable.js';
import { toAppError } from '../../src/errors.js';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it.each([
    ['a refused connection', withCode('ECONNREFUSED')],
    ['a reset connection', withCode('ECONNRESET')],
    ['PostgreSQL shutting down', withCode('57P01', 'terminating connection due to administrator command')],
    ['PostgreSQL starting up', withCode('57P03', 'the database system is starting up')],
    ['too many connections', withCode('53300')],
    ['a connection exception', withCode('08006')],
    ["pg's dead connection", new Error('Connection terminated unexpectedly')],
    ["pg's connect timeout (connectionTimeoutMillis)", new Error('timeout expired')],
    ["pg's query timeout (query_timeout)", new Error('Query read timeout')],
    [
      "knex's pool timeout",
      Object.assign(new Error('Knex: Timeout acquiring a connection. The pool is probably full.'), { name: 'KnexTimeoutError' }),
    ],
    ['one address of many refused', new AggregateError([withCode('ECONNREFUSED')], 'connect failed')],
    ['a cause', new Error('wrapped', { cause: withCode('ECONNREFUSED') })],
  ])('%s', (_name, err) => {
    expect(isDatabaseUnavailable(err)).toBe(true);
    expect(toAppError(err)).toMatchObject({ code: 'database_unavailable', status: 503 });
  });

  it.each([
    ['a unique violation', withCode('23505')],
    ['a syntax error', withCode('42601')],
    ['a plain error', new Error('boom')],
    ['nothing', undefined],
  ])('not %s', (_name, err) => {
    expect(isDatabaseUnavailable(err)).toBe(false);
    expect(toAppError(err)).toMatchObject({ code: 'internal_error', status: 500 });
  });
});

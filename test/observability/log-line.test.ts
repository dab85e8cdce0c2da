/**
 * logLine: a request line written straight to the console is the line winston writes there, byte for byte (its
 * keys sorted, the logger's meta, its level and timestamp; a bigint as a string, a number that is not finite as
 * null, an undefined field left out); a line with an object in it, a warn line, a logger with transports of its own
 * and a level below the logger's go through winston as before.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import Transport from 'winston-transport';
import { createLogger, logLine, plainLine } from '../../src/observability/logger.js';

/** What the console's stdout is given while a test runs (winston's console transport writes there too). */
let written: string[];
let saved: unknown;
const host = console as unknown as { _stdout?: unknown };

beforeEach(() => {
  written = [];
  saved = host._stdout;
  host._stdout = { write: (text: string) => written.push(text) };
});
afterEach(() => {
  host._stdout = saved;
});

const fields = () => ({
  msg: 'request',
  requestId: 'req_0123',
  path: '/providers/0a1b2c3d-0000-4000-8000-000000000000/v1/chat/completions',
  status: 200,
  durationMs: 1.234,
  model: 'gpt-4o "mini"\n\u2028',
  errorCode: null,
  streamed: false,
  units: 21n,
  ttftMs: Number.NaN,
  traceId: undefined,
  zeta: 'ü',
  Alpha: -0,
  timestamp: '2026-12-06T17:00:00.000Z',
});

describe('logLine', () => {
  it("writes the line winston writes to the console, the logger's meta in it", async () => {
    for (const meta of [undefined, { worker: 2, pid: 4242 }, { primary: true, pid: 1 }]) {
      written = [];
      const logger = createLogger('info', undefined, meta);
      logger.log('info', fields());
      await new Promise((r) => setImmediate(r));
      logLine(logger, 'info', fields());
      expect(written).toHaveLength(2);
      expect(written[1]).toBe(written[0]);
      expect(JSON.parse(written[0]!)).toMatchObject({ level: 'info', units: '21', ttftMs: null, ...(meta ?? {}) });
    }
  });

  it('stamps a line that has no timestamp as winston does', () => {
    const before = Date.now();
    logLine(createLogger('debug'), 'debug', { msg: 'request', status: 204 });
    const line = JSON.parse(written[0]!) as { level: string; timestamp: string };
    expect(line.level).toBe('debug');
    expect(Date.parse(line.timestamp)).toBeGreaterThanOrEqual(before);
    expect(Object.keys(line)).toEqual(['level', 'msg', 'status', 'timestamp']);
  });

  it('leaves to winston a line with an object in it, and writes the same', async () => {
    const line = () => ({ ...fields(), error: { name: 'Error', message: 'boom', stack: 'Error: boom' } });
    expect(plainLine('info', line())).toBeUndefined();
    const logger = createLogger('info');
    logger.log('info', line());
    logLine(logger, 'info', line());
    await new Promise((r) => setImmediate(r));
    expect(written).toHaveLength(2);
    expect(written[1]).toBe(written[0]);
  });

  it("writes nothing below the logger's level, nor when it is silent", () => {
    logLine(createLogger('warn'), 'info', fields());
    logLine(createLogger('silent'), 'info', fields());
    expect(written).toEqual([]);
  });

  it('goes through the transports a logger was given', () => {
    const seen: unknown[] = [];
    const capture = new (class extends Transport {
      override log(info: unknown, next: () => void) {
        seen.push(info);
        next();
      }
    })();
    logLine(createLogger('info', [capture]), 'info', fields());
    expect(written).toEqual([]);
    expect(seen).toEqual([expect.objectContaining({ msg: 'request', level: 'info', units: 21n })]);
  });
});

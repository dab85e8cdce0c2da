/**
 * The logger's limit on repeated lines: past `lines` warn or error lines of one message (and error code)
 * in a window, the others are dropped and a line at the window's end says how many; info lines are never
 * dropped. Real timers, a short window.
 */
import { describe, expect, it } from 'vitest';
import Transport from 'winston-transport';
import { createLogger } from '../../src/observability/logger.js';

class Capture extends Transport {
  readonly lines: Record<string, unknown>[] = [];
  override log(info: Record<string, unknown>, next: () => void) {
    this.lines.push(JSON.parse(JSON.stringify(info)) as Record<string, unknown>);
    next();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function logger(lines: number, windowMs: number) {
  const capture = new Capture();
  return { log: createLogger('info', [capture], undefined, { lines, windowMs }), lines: capture.lines };
}

describe('repeated log lines', () => {
  it('lets `lines` of one message through per window, then says how many it suppressed', async () => {
    const { log, lines } = logger(3, 300);
    for (let i = 0; i < 50; i++) log.warn({ msg: 'the database is unavailable', n: i });
    expect(lines.map((l) => l.n)).toEqual([0, 1, 2]);
    await sleep(450);
    expect(lines.slice(3)).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'log lines suppressed',
        repeated: 'the database is unavailable',
        suppressed: 47,
        windowMs: 300,
      }),
    ]);
    // A new window lets lines through again.
    log.warn({ msg: 'the database is unavailable', n: 50 });
    expect(lines.at(-1)).toMatchObject({ msg: 'the database is unavailable', n: 50 });
  });

  it('counts each message, level and error code apart', async () => {
    const { log, lines } = logger(2, 300);
    for (let i = 0; i < 5; i++) {
      log.warn({ msg: 'request', errorCode: 'database_unavailable' });
      log.warn({ msg: 'request', errorCode: 'not_ready' });
      log.error({ msg: 'request', errorCode: 'database_unavailable' });
      log.warn({ msg: 'quota lease heartbeat failed' });
    }
    expect(lines).toHaveLength(8);
    await sleep(450);
    const summaries = lines.filter((l) => l.msg === 'log lines suppressed');
    expect(summaries).toHaveLength(4);
    expect(summaries).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ level: 'warn', repeated: 'request', errorCode: 'database_unavailable', suppressed: 3 }),
        expect.objectContaining({ level: 'warn', repeated: 'request', errorCode: 'not_ready', suppressed: 3 }),
        expect.objectContaining({ level: 'error', repeated: 'request', errorCode: 'database_unavailable', suppressed: 3 }),
        expect.objectContaining({ level: 'warn', repeated: 'quota lease heartbeat failed', suppressed: 3 }),
      ]),
    );
  });

  it('never drops info lines (the request log), and writes no summary when nothing was suppressed', async () => {
    const { log, lines } = logger(2, 200);
    for (let i = 0; i < 20; i++) log.info({ msg: 'request', n: i });
    log.warn({ msg: 'once' });
    await sleep(300);
    expect(lines.filter((l) => l.msg === 'request')).toHaveLength(20);
    expect(lines.filter((l) => l.msg === 'log lines suppressed')).toEqual([]);
  });
});

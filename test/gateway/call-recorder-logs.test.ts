/**
 * Request logs in the recorder (call-recorder.ts): written after its batch, in statements of at most 100; never
 * queued without bound (past 1,000 waiting, or about 32 MiB, a log is dropped and counted); a batch that fails is
 * dropped and counted, never retried.
 */
import { describe, expect, it } from 'vitest';
import { CallRecorder, type LogDropped, type PendingLog } from '../../src/records/call-recorder.js';
import type { RequestLogEntry } from '../../src/domain/request-logs/request-log-types.js';
import type { Logger } from '../../src/observability/logger.js';

const quiet = { info() {}, warn() {}, error() {} } as unknown as Logger;

const log = (n: number, size = 1000): PendingLog => ({
  size,
  entry: (): RequestLogEntry => ({
    invocationId: `inv-${n}`,
    workspaceId: 'ws',
    createdAt: new Date(0),
    expiresAt: new Date(1),
    content: { request: { headers: {}, body: '', bytes: 0, truncated: false }, response: null },
  }),
});

function recorder(write: (entries: RequestLogEntry[]) => Promise<void>) {
  const counted = { written: 0, dropped: { pressure: 0, failed: 0 } as Record<LogDropped, number>, statements: [] as number[] };
  const r = new CallRecorder({
    repo: { record: async () => {} },
    keys: { touchLastRequest: async () => true },
    logger: quiet,
    written: () => {},
    events: {
      batch() {},
      failure() {},
      spooled() {},
      logsWritten: (n) => (counted.written += n),
      logsDropped: (reason, n) => (counted.dropped[reason] += n),
    },
    logs: {
      write: async (entries) => {
        counted.statements.push(entries.length);
        await write(entries);
      },
    },
  });
  return { r, counted };
}

describe('request logs in the recorder', () => {
  it('writes them in statements of 100, and drops and counts those past 1,000 waiting', async () => {
    const { r, counted } = recorder(async () => {});
    for (let i = 0; i < 1005; i++) r.log(log(i));
    await r.drain();
    expect(counted.written).toBe(1000);
    expect(counted.dropped).toEqual({ pressure: 5, failed: 0 });
    expect(counted.statements).toEqual(Array(10).fill(100));
    r.close();
  });

  it('drops a log that would take the waiting bytes past their bound', async () => {
    const { r, counted } = recorder(async () => {});
    r.log(log(1, 20 * 1024 * 1024));
    r.log(log(2, 20 * 1024 * 1024));
    await r.drain();
    expect(counted.written).toBe(1);
    expect(counted.dropped.pressure).toBe(1);
    r.close();
  });

  it('drops and counts a batch the database refuses, and writes the next', async () => {
    let calls = 0;
    const { r, counted } = recorder(async () => {
      if (++calls === 1) throw new Error('refused');
    });
    r.log(log(1));
    await r.drain();
    r.log(log(2));
    await r.drain();
    expect(counted).toMatchObject({ written: 1, dropped: { pressure: 0, failed: 1 } });
    r.close();
  });
});

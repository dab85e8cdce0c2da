/**
 * The recorder's group commit window (call-recorder.ts): a lone call's record is sent after one slice of 5 ms; while
 * each slice brings calls the window stays open, up to NEXUS_RECORD_WINDOW_MS (5 ms by default: one slice; 25 here); 50
 * calls waiting close it at once. The calls that end while a statement runs gather in a window counted from the
 * first of them.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CallRecorder, type CallRecord } from '../../src/records/call-recorder.js';
import type { CallRows } from '../../src/records/call-rows.js';
import type { Logger } from '../../src/observability/logger.js';

const quiet = { info() {}, warn() {}, error() {}, debug() {} } as unknown as Logger;

let n = 0;
const call = (): CallRecord => ({
  id: `inv-${++n}`,
  invocation: '{}',
  leaseCall: null,
  requestId: `req-${n}`,
  keyId: 'key',
  lastRequestAt: new Date(),
  admission: undefined,
  span: undefined,
});

/** A recorder whose statements take `statementMs` (fake time) each. */
function recorder(maxMs: number | null = 25, statementMs = 0) {
  const statements: { at: number; calls: number }[] = [];
  const r = new CallRecorder({
    repo: {
      record: async (calls: CallRows[]) => {
        statements.push({ at: Date.now(), calls: calls.length });
        if (statementMs) await new Promise((resolve) => setTimeout(resolve, statementMs));
      },
    },
    keys: { touchLastRequest: async () => true },
    logger: quiet,
    written: () => {},
    ...(maxMs === null ? {} : { window: { maxMs } }),
  });
  return { r, statements };
}

describe('the group commit window', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it("sends a lone call's record after one slice of 5 ms", async () => {
    const { r, statements } = recorder();
    r.record(call(), new Date());
    await vi.advanceTimersByTimeAsync(4);
    expect(statements).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(statements).toEqual([{ at: 5, calls: 1 }]);
    r.close();
  });

  it('stays open while calls keep coming, up to 25 ms, then the next batch gathers the same way', async () => {
    const { r, statements } = recorder();
    // A call every millisecond (1,000 a second) for 60 ms.
    for (let ms = 0; ms < 60; ms++) {
      r.record(call(), new Date());
      await vi.advanceTimersByTimeAsync(1);
    }
    await vi.advanceTimersByTimeAsync(100);
    expect(statements[0]).toEqual({ at: 25, calls: 25 });
    expect(statements[1]!.calls).toBeGreaterThanOrEqual(20);
    expect(statements.reduce((s, b) => s + b.calls, 0)).toBe(60);
    r.close();
  });

  it('closes after a slice that brought no call', async () => {
    const { r, statements } = recorder();
    r.record(call(), new Date());
    await vi.advanceTimersByTimeAsync(2);
    r.record(call(), new Date());
    await vi.advanceTimersByTimeAsync(8);
    expect(statements).toEqual([{ at: 10, calls: 2 }]);
    r.close();
  });

  it('by default (NEXUS_RECORD_WINDOW_MS unset) closes after one slice, however busy', async () => {
    const { r, statements } = recorder(null);
    for (let ms = 0; ms < 20; ms++) {
      r.record(call(), new Date());
      await vi.advanceTimersByTimeAsync(1);
    }
    await vi.advanceTimersByTimeAsync(100);
    expect(statements[0]).toEqual({ at: 5, calls: 5 });
    expect(statements.reduce((s, b) => s + b.calls, 0)).toBe(20);
    r.close();
  });

  it('closes at once when 50 calls wait', async () => {
    const { r, statements } = recorder();
    for (let i = 0; i < 50; i++) r.record(call(), new Date());
    await vi.advanceTimersByTimeAsync(0);
    expect(statements).toEqual([{ at: 0, calls: 50 }]);
    r.close();
  });

  it('gathers the calls that end while a statement runs in a window counted from the first of them', async () => {
    const { r, statements } = recorder(null, 3);
    r.record(call(), new Date());
    await vi.advanceTimersByTimeAsync(6);
    // The first statement runs from 5 to 8; two calls end meanwhile, the first at 6.
    r.record(call(), new Date());
    await vi.advanceTimersByTimeAsync(1);
    r.record(call(), new Date());
    await vi.advanceTimersByTimeAsync(3);
    expect(statements).toEqual([{ at: 5, calls: 1 }]);
    await vi.advanceTimersByTimeAsync(1);
    expect(statements).toEqual([
      { at: 5, calls: 1 },
      { at: 11, calls: 2 },
    ]);
    r.close();
  });

  it('writes at once, when a statement ends, the calls whose first has waited a slice out behind it', async () => {
    const { r, statements } = recorder(null, 10);
    r.record(call(), new Date());
    await vi.advanceTimersByTimeAsync(6);
    r.record(call(), new Date());
    await vi.advanceTimersByTimeAsync(9);
    expect(statements).toEqual([
      { at: 5, calls: 1 },
      { at: 15, calls: 1 },
    ]);
    r.close();
  });

  it('shares each statement among a window of calls at an even rate, however long the statements take', async () => {
    const { r, statements } = recorder(null, 2);
    // A call every millisecond for 100 ms; each statement takes 2 ms.
    for (let ms = 0; ms < 100; ms++) {
      r.record(call(), new Date());
      await vi.advanceTimersByTimeAsync(1);
    }
    await vi.advanceTimersByTimeAsync(100);
    expect(statements.reduce((s, b) => s + b.calls, 0)).toBe(100);
    expect(Math.min(...statements.map((b) => b.calls))).toBeGreaterThanOrEqual(5);
    r.close();
  });
});

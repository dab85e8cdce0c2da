/**
 * The finished days' parts and their store (src/domain/invocations/usage-days.ts): a range cut into its whole local
 * days that ended, DST and half-hour zones included; a store bounded by size that drops a day read at another
 * revision; the days a top summary asks for read in the background once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hourOfStart, keptRowsByDay, partsOf, UsageDayCache, type DayReads } from '../../src/domain/invocations/usage-days.js';
import { newId } from '../../src/ids.js';
import { until as until_ } from '../gateway/gateway-support.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.js';

const HOUR = 3_600_000;
const at = (iso: string) => Date.parse(iso);
const spans = (parts: ReturnType<typeof partsOf>) =>
  parts.map(
    (p) => `${new Date(p.since).toISOString().slice(5, 13)}..${new Date(p.until).toISOString().slice(5, 13)}${p.keep ? ' kept' : ''}`,
  );

describe('partsOf', () => {
  it('cuts a range into its partial first day and its whole days that ended, kept, and the rest', () => {
    expect(spans(partsOf(at('2026-03-01T05:00Z'), at('2026-03-05T07:00Z'), 'UTC', at('2026-03-04T02:00Z')))).toEqual([
      '03-01T05..03-02T00 kept',
      '03-02T00..03-03T00 kept',
      '03-03T00..03-04T00 kept',
      '03-04T00..03-05T07',
    ]);
  });

  it("keeps New York's 23-hour day and Kolkata's days from their first whole hour", () => {
    expect(spans(partsOf(at('2026-03-07T05:00Z'), at('2026-03-10T04:00Z'), 'America/New_York', at('2026-12-01T00:00Z')))).toEqual([
      '03-07T05..03-08T05 kept',
      '03-08T05..03-09T04 kept',
      '03-09T04..03-10T04 kept',
    ]);
    expect(spans(partsOf(at('2026-03-01T18:00Z'), at('2026-03-03T19:00Z'), 'Asia/Kolkata', at('2026-12-01T00:00Z')))).toEqual([
      '03-01T18..03-01T19 kept',
      '03-01T19..03-02T19 kept',
      '03-02T19..03-03T19 kept',
    ]);
  });

  it('keeps a range within one day that ended as one part, and reads the days after the finished ones as one', () => {
    expect(spans(partsOf(at('2026-03-01T05:00Z'), at('2026-03-01T09:00Z'), 'UTC', at('2026-12-01T00:00Z')))).toEqual([
      '03-01T05..03-01T09 kept',
    ]);
    expect(spans(partsOf(at('2026-03-01T00:00Z'), at('2026-03-03T00:00Z'), 'UTC', at('2026-03-01T23:00Z')))).toEqual([
      '03-01T00..03-03T00',
    ]);
  });
});

describe('UsageDayCache', () => {
  it('answers a day at the revision it was kept at, and drops it at another', () => {
    const cache = new UsageDayCache(1000);
    cache.set('a', '1', ['x'], 10);
    expect(cache.get('a', '1')).toEqual(['x']);
    expect(cache.get('a', '2')).toBeUndefined();
    expect(cache.get('a', '1')).toBeUndefined();
  });

  it('keeps at most its size, the least recently read dropped first', () => {
    const cache = new UsageDayCache(30);
    cache.set('a', '0', ['a'], 10);
    cache.set('b', '0', ['b'], 10);
    cache.set('c', '0', ['c'], 10);
    expect(cache.get('a', '0')).toEqual(['a']);
    cache.set('d', '0', ['d'], 10);
    expect(cache.get('b', '0')).toBeUndefined();
    expect(cache.get('a', '0')).toEqual(['a']);
    cache.set('e', '0', ['e'], 40);
    expect(cache.get('e', '0')).toBeUndefined();
    expect(new UsageDayCache(0).enabled).toBe(false);
  });
});

describe('keptRowsByDay', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('answers nothing while a part is not kept, reads and keeps the parts in the background, then answers them kept', async () => {
    const since = at('2026-03-01T00:00Z');
    const until = at('2026-03-04T00:00Z');
    const asked: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const reads: DayReads<{ start: string }> = {
      cache: new UsageDayCache(1 << 20),
      db: database.db,
      workspaceId: newId(),
      kind: 'test',
      timeZone: 'UTC',
      read: async (from, to) => {
        asked.push(`${from.toISOString()}..${to.toISOString()}`);
        await gate;
        const rows = [];
        for (let day = from.getTime(); day < to.getTime(); day += 24 * HOUR) rows.push({ start: String(day / 1000) });
        return rows;
      },
      startOf: (row) => hourOfStart(row.start),
      sizeOf: () => 100,
    };
    expect(await keptRowsByDay(reads, since, until)).toBeUndefined();
    expect(await keptRowsByDay(reads, since, until)).toBeUndefined();
    open();
    await until_(async () => (await keptRowsByDay(reads, since, until)) !== undefined);
    // One read of the three days, in the background (the second answer did not start another).
    expect(asked).toEqual(['2026-03-01T00:00:00.000Z..2026-03-04T00:00:00.000Z']);
    const rows = [];
    for await (const batch of (await keptRowsByDay(reads, since, until))!) rows.push(...batch);
    expect(rows.map((r) => r.start)).toEqual([since, since + 24 * HOUR, since + 48 * HOUR].map((ms) => String(ms / 1000)));
    expect(asked).toHaveLength(1);
  });
});

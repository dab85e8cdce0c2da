/**
 * The key cache while the change feed vouches that every other process's change has been heard (its listener's
 * pings): an entry of a key with a current period answers for the listening TTL, not only the TTL. Every other entry,
 * one read before a lease on its period was released here, and every entry once the feed stops vouching, answers for
 * the TTL, as without a listener.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createAuthCache } from '../../src/gateway/auth-cache.js';
import type { AuthRow } from '../../src/gateway/auth-repo.js';

const TTL = 1000;
const LISTENING_TTL = 60_000;
const far = new Date('2100-01-01T00:00:00Z');
const withPeriod = { key_id: 'k1', workspace_access_id: 'a1', workspace_id: 'w', period_id: 'p1', period_end: far } as unknown as AuthRow;
const noPeriod = { key_id: 'k2', workspace_access_id: 'a2', workspace_id: 'w', period_id: null, period_end: null } as unknown as AuthRow;

afterEach(() => {
  vi.useRealTimers();
});

/** A cache over fixed rows per token, its date moved by the test, and `heard` the feed's word (0: none). */
function cacheHeard() {
  // The cache reads Date.now(): only the date is faked; timers run as they do.
  vi.useFakeTimers({ toFake: ['Date'] });
  const start = Date.now();
  const feed = { heard: 0 };
  const rows: Record<string, AuthRow | null> = { period: withPeriod, none: noPeriod, unknown: null };
  const cache = createAuthCache({
    repo: { lookup: async (hash) => rows[hash.slice(2)] ?? null },
    clock: { now: () => new Date() },
    ttlMs: TTL,
    outageGraceMs: 0,
    hash: (token) => `h:${token}`,
    heardThrough: () => feed.heard,
    listeningTtlMs: LISTENING_TTL,
  });
  /** Moves the date to `ms` after the start; the feed last heard everything `heardAgo` ms before it (null: not at all). */
  const at = (ms: number, heardAgo: number | null = 100) => {
    vi.setSystemTime(start + ms);
    feed.heard = heardAgo === null ? 0 : start + ms - heardAgo;
  };
  return { cache, at };
}

const settled = () => new Promise((r) => setTimeout(r, 0));

describe('the key cache while every change is heard', () => {
  it('keeps an entry of a key with a current period for the listening TTL, and reads it again in its last quarter', async () => {
    const { cache, at } = cacheHeard();
    try {
      at(0);
      const entry = await cache.lookup('period', 'conn');
      at(TTL * 10);
      expect(cache.cached('period', 'conn')).toBe(entry);
      at(LISTENING_TTL * 0.75 - 1);
      expect(cache.cached('period', 'conn')).toBe(entry);
      expect(cache.queries()).toBe(1);
      // In its last quarter: still answered, and read again in the background.
      at(LISTENING_TTL * 0.75);
      expect(cache.cached('period', 'conn')).toBe(entry);
      expect(cache.queries()).toBe(2);
      await settled();
      expect(cache.cached('period', 'conn')).not.toBe(entry);
    } finally {
      cache.close();
    }
  });

  it('keeps an entry with no row, or with no current period, for the TTL only', async () => {
    const { cache, at } = cacheHeard();
    try {
      at(0);
      await cache.lookup('unknown', 'conn');
      await cache.lookup('none', 'conn');
      at(TTL - 1);
      expect(cache.cached('unknown', 'conn')?.row).toBeNull();
      expect(cache.cached('none', 'conn')?.row).toBe(noPeriod);
      at(TTL);
      expect(cache.cached('unknown', 'conn')).toBeUndefined();
      expect(cache.cached('none', 'conn')).toBeUndefined();
    } finally {
      cache.close();
    }
  });

  it('keeps every entry for the TTL only once the feed has not vouched for a TTL, and again for longer once it does', async () => {
    const { cache, at } = cacheHeard();
    try {
      at(0);
      const entry = await cache.lookup('period', 'conn');
      // Last heard a TTL ago: a change made since may be unheard.
      at(TTL * 2, TTL);
      expect(cache.cached('period', 'conn')).toBeUndefined();
      at(TTL * 2, TTL - 1);
      expect(cache.cached('period', 'conn')).toBe(entry);
      // Not listening at all (the session is gone).
      at(TTL * 3, null);
      expect(cache.cached('period', 'conn')).toBeUndefined();
      // Within the TTL an entry answers whatever the feed says, as without a listener.
      at(TTL * 3, null);
      const again = await cache.lookup('period', 'conn');
      at(TTL * 4 - 1, null);
      expect(cache.cached('period', 'conn')).toBe(again);
    } finally {
      cache.close();
    }
  });

  it('keeps an entry read before a lease on its period was released here for the TTL only', async () => {
    const { cache, at } = cacheHeard();
    try {
      at(0);
      const before = await cache.lookup('period', 'conn');
      at(TTL / 2);
      cache.leaseReleased('p1');
      // Within the TTL: answered, as any entry.
      expect(cache.cached('period', 'conn')).toBe(before);
      at(TTL);
      expect(cache.cached('period', 'conn')).toBeUndefined();
      // One read after the release lives the listening TTL again; a release on another period does not touch it.
      const after = await cache.lookup('period', 'conn');
      cache.leaseReleased('p2');
      at(TTL * 5);
      expect(cache.cached('period', 'conn')).toBe(after);
      expect(cache.queries()).toBe(2);
    } finally {
      cache.close();
    }
  });
});

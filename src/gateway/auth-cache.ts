/**
 * The gateway's first database round trip (call-repo.ts's lookup: key hash ->
 * key, access, workspace, connection and the access's current quota period with
 * its strategy, in one join), cached per (key, connection) for at most
 * config.authCacheTtlMs (default 1 s, at most 5 s): a revoked or expired key,
 * a suspended access or connection and an archived workspace take effect within
 * that bound. A cached period that has ended is never used, and one the
 * quota admission finds over (split by a plan change) is read again at once
 * (gateway.ts). While the database cannot be reached, a key seen lately keeps
 * its last answer for a bounded grace (outageGraceMs).
 */
import { isDatabaseUnavailable } from '../db/unavailable.js';
import type { Clock } from '../domain/actor.js';
import type { AuthRow, CallRepo } from './call-repo.js';
import type { MaskedKey } from './secret-mask.js';

/** What a call needs of its connection beyond the row: made once per entry (gateway.ts), kept only as long as it. */
export interface Upstream {
  /** The connection's decrypted key. */
  apiKey: string;
  /** That key as the answers' mask looks for it (null: too short to look for). */
  maskedKey: MaskedKey | null;
  /** The connection's parsed base URL. */
  baseUrl: URL;
}

export interface CacheEntry extends Partial<Upstream> {
  row: AuthRow | null;
  loadedAt: number;
}

const MAX_ENTRIES = 10_000;

export function createAuthCache(deps: {
  repo: Pick<CallRepo, 'lookup'>;
  clock: Clock;
  ttlMs: number;
  /**
   * While the database cannot be reached, an entry up to this old still answers (the gateway carries on
   * for a bounded time: half a lease TTL, as long as its leases admit calls without the database).
   */
  outageGraceMs: number;
  hash: (token: string) => string;
}) {
  const { repo, clock, ttlMs, hash } = deps;
  const keepMs = Math.max(ttlMs, deps.outageGraceMs);
  /**
   * Keyed by the presented key itself and the connection, so a hit costs no HMAC. The key is held no
   * longer than the decrypted provider key next to it: entries are dropped by a sweep once they are
   * past both their TTL and the outage grace.
   */
  const entries = new Map<string, CacheEntry>();
  const sweep = setInterval(() => {
    const oldest = Date.now() - keepMs;
    for (const [k, e] of entries) if (e.loadedAt < oldest) entries.delete(k);
  }, Math.max(ttlMs, 100));
  sweep.unref();

  const load = (keyHash: string, connectionId: string): Promise<AuthRow | null> => repo.lookup(keyHash, connectionId, clock.now());

  return {
    /** The entry for (key, connection): cached when fresh, else one query. */
    async lookup(token: string, connectionId: string): Promise<CacheEntry> {
      const cacheKey = `${connectionId} ${token}`;
      const nowMs = Date.now();
      const hit = entries.get(cacheKey);
      if (hit && nowMs - hit.loadedAt < ttlMs && (!hit.row?.period_end || hit.row.period_end.getTime() > clock.now().getTime())) {
        return hit;
      }
      let row: AuthRow | null;
      try {
        row = await load(hash(token), connectionId);
      } catch (err) {
        if (hit && nowMs - hit.loadedAt < deps.outageGraceMs && isDatabaseUnavailable(err)) return hit;
        throw err;
      }
      const entry: CacheEntry = { row, loadedAt: nowMs };
      if (ttlMs > 0) {
        if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!);
        entries.set(cacheKey, entry);
      }
      return entry;
    },
    /** The entry for (key, connection) read again now, replacing the cached one. */
    async reload(token: string, connectionId: string): Promise<CacheEntry> {
      const entry: CacheEntry = { row: await load(hash(token), connectionId), loadedAt: Date.now() };
      if (ttlMs > 0) entries.set(`${connectionId} ${token}`, entry);
      return entry;
    },
    clear(): void {
      entries.clear();
    },
    close(): void {
      clearInterval(sweep);
      entries.clear();
    },
  };
}

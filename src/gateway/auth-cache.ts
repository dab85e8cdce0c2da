/**
 * The gateway's first database round trip (auth-repo.ts's lookup: key hash -> key, access, workspace, connection and
 * the access's current quota period with its strategy, in one join), cached per (key, connection) for at most
 * config.authCacheTtlMs (default 1 s, at most 5 s), and read again in the background once an entry in use is past
 * three quarters of it, so a key in steady use has no call wait for its lookup. While the change feed vouches that it
 * has heard every other process's change until a TTL ago (its listener's pings), an entry of a key with a current
 * period lives config.authCacheListeningTtlMs instead (60 s by default). A change that decides a call
 * (a key revoked, an access suspended or renewed or moved to another plan, a
 * workspace or connection archived, a provider key rotated, a plan's rate limits changed) drops the entries it
 * touches at once (`invalidate`, fed by src/domain/changes/change-feed.ts: on
 * commit in the process that made it, by NOTIFY in the others); the TTL is the
 * bound when a notification may have been lost. An expired key is refused by its
 * expires_at, read on every call. A cached period that has ended is never used, and one the
 * quota admission finds over (split by a plan change) is read again at once
 * (metered-call.ts). While the database cannot be reached, a key seen lately keeps
 * its last answer for a bounded grace (outageGraceMs).
 *
 * A lookup is single-flight per (key, connection): the calls that miss while one is under way wait for
 * it and share its answer, so a burst of a new key's calls costs one query, not one per call. A failure
 * is shared by those waiters and not kept: the next call queries again. A call that comes after an
 * invalidation never joins a lookup started before it (that one may have read the row as it was).
 */
import { isDatabaseUnavailable } from '../database-unavailable.js';
import type { Clock } from '../domain/actor.js';
import type { Change } from '../domain/changes/change-feed.js';
import type { AuthRepo, AuthRow } from './auth-repo.js';
import { openProviderApiKey } from '../domain/provider-connections/provider-secret.js';
import type { SecretBox } from '../domain/security/secret-box.js';
import { maskedKey, type MaskedKey } from './secret-mask.js';
import { visibleSecret } from '../protocols/index.js';

/** What a call needs of its connection beyond the row: made once per entry (upstreamOf), kept only as long as it. */
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
  /** The presented key's hash (the lookup's), kept for the entry's next lookup. */
  keyHash?: string;
}

/**
 * An entry read again takes its predecessor's upstream when the connection's key and address are the ones it was
 * made from (a rotated key has another ciphertext, a changed connection another row): the provider key is not
 * decrypted again at every TTL, and is held no longer than an entry for its connection is.
 */
function carryUpstream(from: CacheEntry, to: CacheEntry): void {
  const a = from.row;
  const b = to.row;
  if (from.apiKey === undefined || !a || !b || a.connection_id !== b.connection_id) return;
  if (a.api_key_ciphertext !== b.api_key_ciphertext || a.api_key_key_id !== b.api_key_key_id) return;
  if (a.protocol_profile !== b.protocol_profile) return;
  to.apiKey = from.apiKey;
  to.maskedKey = from.maskedKey;
  if (a.base_url === b.base_url) to.baseUrl = from.baseUrl;
}

/** The connection's decrypted key, its mask and its parsed base URL, made once per cache entry. */
export function upstreamOf(entry: CacheEntry, auth: AuthRow, secretBox: SecretBox): Upstream {
  entry.apiKey ??= openProviderApiKey(secretBox, {
    id: auth.connection_id!,
    api_key_ciphertext: auth.api_key_ciphertext!,
    api_key_key_id: auth.api_key_key_id!,
  });
  if (entry.maskedKey === undefined) {
    // The part of a structured secret an answer could echo (a Bedrock API key, or access key id: its protocol's).
    entry.maskedKey = maskedKey(visibleSecret(auth.protocol_profile!, entry.apiKey));
  }
  entry.baseUrl ??= new URL(auth.base_url!);
  return entry as Upstream;
}

/** Whether a change touches the entry of `cacheKey` ("<connection id> <key>") and `row` (a route holds no key's row). */
function touches({ kind, id }: Change, cacheKey: string, row: AuthRow | null): boolean {
  if (kind === 'connection') return cacheKey.startsWith(`${id} `);
  if (row === null || kind === 'route') return false;
  if (kind === 'key') return row.key_id === id;
  if (kind === 'access') return row.workspace_access_id === id;
  return kind === 'plan' ? row.plan_id === id : row.workspace_id === id;
}

const MAX_ENTRIES = 10_000;
/** The share of its life after which an entry in use is read again in the background, still answering meanwhile. */
const REFRESH_AFTER = 0.75;

/**
 * How long an entry may answer: listeningTtlMs for a key's row with a current period while the change feed vouches
 * that every change made until a TTL ago has been heard and no lease on the period was released here since the row
 * was read (its numbers are the quota headers of answers admitted on no lease); else the TTL. (No row, or one with no
 * period, may be made valid by what no change announces: a period starting.)
 */
function entryLives(ttlMs: number, listeningTtlMs: number, heardThrough: () => number) {
  /** When this process last released a lease on a period. */
  const released = new Map<string, number>();
  return {
    of(hit: CacheEntry, nowMs: number): number {
      const periodId = hit.row?.period_id;
      if (listeningTtlMs === ttlMs || !periodId || heardThrough() <= nowMs - ttlMs) return ttlMs;
      return (released.get(periodId) ?? -1) >= hit.loadedAt ? ttlMs : listeningTtlMs;
    },
    leaseReleased(periodId: string): void {
      released.set(periodId, Date.now());
    },
    /** Forgets the releases older than any entry that lives on what was heard. */
    sweep(nowMs: number): void {
      for (const [periodId, at] of released) if (nowMs - at >= listeningTtlMs) released.delete(periodId);
    },
  };
}

export function createAuthCache(deps: {
  repo: Pick<AuthRepo, 'lookup'>;
  clock: Clock;
  ttlMs: number;
  /**
   * While the database cannot be reached, an entry up to this old still answers (the gateway carries on
   * for a bounded time: half a lease TTL, as long as its leases admit calls without the database).
   */
  outageGraceMs: number;
  hash: (token: string) => string;
  /** Date.now() until which every other process's change has been heard (the change feed's), and how long its entries may live then. */
  heardThrough?: () => number;
  listeningTtlMs?: number;
}) {
  const { repo, clock, ttlMs, hash } = deps;
  const lives = entryLives(ttlMs, Math.max(ttlMs, deps.listeningTtlMs ?? 0), deps.heardThrough ?? (() => 0));
  /**
   * Keyed by the presented key itself and the connection, so a hit costs no HMAC. The key is held no
   * longer than the decrypted provider key next to it: entries are dropped by a sweep once they are
   * past both their life and the outage grace.
   */
  const entries = new Map<string, CacheEntry>();
  const sweep = setInterval(
    () => {
      const nowMs = Date.now();
      for (const [k, e] of entries) if (nowMs - e.loadedAt >= Math.max(lives.of(e, nowMs), deps.outageGraceMs)) entries.delete(k);
      lives.sweep(nowMs);
    },
    Math.max(ttlMs, 100),
  );
  sweep.unref();

  /**
   * Counts invalidations. A lookup that was under way when one came may have read the row as it was
   * before the change: its answer serves its own call but is not cached, and the entry it would have
   * replaced goes too (the next call reads the row again).
   */
  let generation = 0;
  /** Lookup queries made (tests). */
  let queries = 0;
  const load = (keyHash: string, connectionId: string): Promise<AuthRow | null> => {
    queries++;
    return repo.lookup(keyHash, connectionId, clock.now());
  };
  /** The lookup under way per (key, connection), and the generation it started in. */
  const flying = new Map<string, { generation: number; answer: Promise<CacheEntry> }>();
  const store = (cacheKey: string, entry: CacheEntry, loadedIn: number): void => {
    if (ttlMs <= 0) return;
    if (loadedIn !== generation) {
      entries.delete(cacheKey);
      return;
    }
    if (entries.size >= MAX_ENTRIES && !entries.has(cacheKey)) entries.delete(entries.keys().next().value!);
    entries.set(cacheKey, entry);
  };

  /** The cached entry when it may answer now: within its life, and its period (if any) not ended. */
  const fresh = (hit: CacheEntry, nowMs: number): boolean =>
    nowMs - hit.loadedAt < lives.of(hit, nowMs) && (!hit.row?.period_end || hit.row.period_end.getTime() > clock.now().getTime());
  /** The lookup of (key, connection) under way in this generation, or one started now (single-flight). */
  const flightOf = (cacheKey: string, token: string, connectionId: string, hit: CacheEntry | undefined, nowMs: number) => {
    const under = flying.get(cacheKey);
    if (under && under.generation === generation) return under;
    const loadedIn = generation;
    const keyHash = hit?.keyHash ?? hash(token);
    const answer = load(keyHash, connectionId).then((row) => {
      const entry: CacheEntry = { row, loadedAt: nowMs, keyHash };
      if (hit && loadedIn === generation) carryUpstream(hit, entry);
      store(cacheKey, entry, loadedIn);
      return entry;
    });
    const flight = { generation: loadedIn, answer };
    flying.set(cacheKey, flight);
    void answer
      .catch(() => {})
      .finally(() => {
        if (flying.get(cacheKey) === flight) flying.delete(cacheKey);
      });
    return flight;
  };

  return {
    /**
     * The entry for (key, connection) when the cache holds it fresh, without a promise (the gateway's usual
     * case: lookup's answer, a few microtask turns sooner); undefined: ask lookup. One past REFRESH_AFTER is read again.
     */
    cached(token: string, connectionId: string): CacheEntry | undefined {
      const cacheKey = `${connectionId} ${token}`;
      const hit = entries.get(cacheKey);
      const nowMs = Date.now();
      if (!hit || !fresh(hit, nowMs)) return undefined;
      if (nowMs - hit.loadedAt >= lives.of(hit, nowMs) * REFRESH_AFTER) flightOf(cacheKey, token, connectionId, hit, nowMs);
      return hit;
    },
    /** The entry for (key, connection): cached when fresh, else one query. */
    async lookup(token: string, connectionId: string): Promise<CacheEntry> {
      const cacheKey = `${connectionId} ${token}`;
      const nowMs = Date.now();
      const hit = entries.get(cacheKey);
      if (hit && fresh(hit, nowMs)) return hit;
      try {
        return await flightOf(cacheKey, token, connectionId, hit, nowMs).answer;
      } catch (err) {
        if (hit && nowMs - hit.loadedAt < deps.outageGraceMs && isDatabaseUnavailable(err)) return hit;
        throw err;
      }
    },
    /** The entry for (key, connection) read again now, replacing the cached one. */
    async reload(token: string, connectionId: string): Promise<CacheEntry> {
      const loadedIn = generation;
      const entry: CacheEntry = { row: await load(hash(token), connectionId), loadedAt: Date.now() };
      store(`${connectionId} ${token}`, entry, loadedIn);
      return entry;
    },
    /** The key's row read now, for an answer that is not a call (/v1/me): not cached, so no key is kept for it. */
    read(token: string, connectionId: string): Promise<AuthRow | null> {
      return load(hash(token), connectionId);
    },
    /** Drops the entries a change touched (null: every entry), with the provider keys decrypted for them. */
    invalidate(change: Change | null): void {
      generation++;
      if (!change) {
        entries.clear();
        return;
      }
      for (const [cacheKey, { row }] of entries) if (touches(change, cacheKey, row)) entries.delete(cacheKey);
    },
    /**
     * A lease on the period was released here: the entries read before it hold the period as it was (the quota headers
     * of answers admitted on no lease show it), so they answer no longer than the TTL.
     */
    leaseReleased: lives.leaseReleased,
    /** How many lookup queries it has made (tests). */
    queries: () => queries,
    clear(): void {
      generation++;
      entries.clear();
    },
    close(): void {
      clearInterval(sweep);
      entries.clear();
      flying.clear();
    },
  };
}

/**
 * The gateway's first database round trip: key hash -> key, access, workspace,
 * connection and the access's current quota period with its strategy, in one
 * join. Results are cached per (key, connection) for at most
 * config.authCacheTtlMs (default 1 s, at most 5 s): a revoked or expired key,
 * a suspended access or connection and an archived workspace take effect within
 * that bound. A cached period that has ended is never used, and one the
 * quota admission finds over (split by a plan change) is read again at once
 * (gateway.ts).
 */
import type { Knex } from 'knex';
import type { Clock } from '../domain/actor.js';
import type { MaskedKey } from './secret-mask.js';

export interface AuthRow {
  key_id: string;
  workspace_id: string;
  workspace_access_id: string;
  expires_at: Date;
  revoked_at: Date | null;
  last_request_at: Date | null;
  access_status: string;
  access_starts_at: Date;
  access_ends_at: Date | null;
  workspace_status: string;
  allow_unmetered_passthrough: boolean;
  connection_id: string | null;
  protocol_profile: 'openai' | 'anthropic' | null;
  base_url: string | null;
  connection_status: string | null;
  api_key_ciphertext: string | null;
  api_key_key_id: string | null;
  upstream_timeout_ms: number | null;
  period_id: string | null;
  period_end: Date | null;
  granted_units: bigint | null;
  reserved_units: bigint | null;
  consumed_units: bigint | null;
  input_multiplier_ppm: bigint | null;
  output_multiplier_ppm: bigint | null;
  cached_input_multiplier_ppm: bigint | null;
  max_output_tokens: number | null;
}

const LOOKUP = `
select k.id as key_id, k.workspace_id, k.workspace_access_id, k.expires_at, k.revoked_at, k.last_request_at,
       a.status as access_status, a.access_starts_at, a.access_ends_at,
       w.status as workspace_status, w.allow_unmetered_passthrough,
       c.id as connection_id, c.protocol_profile, c.base_url, c.status as connection_status,
       c.api_key_ciphertext, c.api_key_key_id, c.upstream_timeout_ms,
       p.id as period_id, p.period_end, p.granted_units, p.reserved_units, p.consumed_units,
       s.input_multiplier_ppm, s.output_multiplier_ppm, s.cached_input_multiplier_ppm, s.max_output_tokens
  from inference_keys k
  join workspace_accesses a on a.id = k.workspace_access_id
  join workspaces w on w.id = k.workspace_id
  left join provider_connections c on c.id = cast(? as uuid) and c.workspace_id = k.workspace_id
  left join lateral (
    select * from quota_periods qp
     where qp.workspace_access_id = a.id and qp.period_start <= ? and qp.period_end > ?
     order by qp.period_start desc limit 1) p on true
  left join quota_strategies s on s.id = p.quota_strategy_id
 where k.key_hash = ?`;

interface Entry {
  row: AuthRow | null;
  loadedAt: number;
  /** The connection's decrypted key, kept only as long as the entry. */
  apiKey?: string;
  /** That key as the answers' mask looks for it (null: too short to look for). */
  maskedKey?: MaskedKey | null;
  /** The connection's parsed base URL. */
  baseUrl?: URL;
}

const MAX_ENTRIES = 10_000;

export function createAuthCache(deps: { db: Knex; clock: Clock; ttlMs: number; hash: (token: string) => string }) {
  const { db, clock, ttlMs, hash } = deps;
  /**
   * Keyed by the presented key itself and the connection, so a hit costs no HMAC (it was ~3% of a
   * call's CPU). The key is held no longer than the decrypted provider key next to it: entries
   * past their TTL are dropped by a sweep every TTL.
   */
  const entries = new Map<string, Entry>();
  const sweep = setInterval(() => {
    const oldest = Date.now() - ttlMs;
    for (const [k, e] of entries) if (e.loadedAt < oldest) entries.delete(k);
  }, Math.max(ttlMs, 100));
  sweep.unref();

  async function load(keyHash: string, connectionId: string): Promise<AuthRow | null> {
    const now = clock.now();
    const result = await db.raw(LOOKUP, [connectionId, now, now, keyHash]);
    return ((result.rows as AuthRow[])[0] ?? null);
  }

  return {
    /** The entry for (key, connection): cached when fresh, else one query. */
    async lookup(token: string, connectionId: string): Promise<Entry> {
      const cacheKey = `${connectionId} ${token}`;
      const nowMs = Date.now();
      const hit = entries.get(cacheKey);
      if (hit && nowMs - hit.loadedAt < ttlMs && (!hit.row?.period_end || hit.row.period_end.getTime() > clock.now().getTime())) {
        return hit;
      }
      const entry: Entry = { row: await load(hash(token), connectionId), loadedAt: nowMs };
      if (ttlMs > 0) {
        if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!);
        entries.set(cacheKey, entry);
      }
      return entry;
    },
    /** The entry for (key, connection) read again now, replacing the cached one. */
    async reload(token: string, connectionId: string): Promise<Entry> {
      const entry: Entry = { row: await load(hash(token), connectionId), loadedAt: Date.now() };
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

export type AuthCache = ReturnType<typeof createAuthCache>;

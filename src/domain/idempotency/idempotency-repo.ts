/** All SQL of idempotency_keys. A row is keyed by (principal_id, idempotency_key). */
import type { Queryable } from '../../db/database.js';

export interface IdempotencyRow {
  principal_id: string;
  idempotency_key: string;
  method: string;
  path: string;
  request_hash: string;
  /** When the claim was made (or taken over): it identifies the claim. */
  created_at: Date;
  /** null while the claim's operation runs. */
  response_status: number | null;
  /** The sealed answer: { keyId, ciphertext }. */
  response_body: unknown;
  response_headers: Record<string, string> | null;
}

interface ClaimKey {
  principalId: string;
  key: string;
}

const keyOf = (k: ClaimKey) => ({ principal_id: k.principalId, idempotency_key: k.key });

export function createIdempotencyRepo(db: Queryable) {
  return {
    /** Inserts an unfinished claim unless the key has a row; true when this one was inserted. */
    async insertClaim(
      k: ClaimKey,
      claim: { method: string; path: string; requestHash: string; at: Date },
      q: Queryable = db,
    ): Promise<boolean> {
      const inserted = await q('idempotency_keys')
        .insert({ ...keyOf(k), method: claim.method, path: claim.path, request_hash: claim.requestHash, created_at: claim.at })
        .onConflict(['principal_id', 'idempotency_key'])
        .ignore()
        .returning('idempotency_key');
      return inserted.length > 0;
    },

    async find(k: ClaimKey, q: Queryable = db): Promise<IdempotencyRow | undefined> {
      return q('idempotency_keys').where(keyOf(k)).first();
    },

    /** Deletes the key's row if it was made before `before` (past the replay window). */
    async deleteIfOlder(k: ClaimKey, before: Date, q: Queryable = db): Promise<void> {
      await q('idempotency_keys').where(keyOf(k)).where('created_at', '<', before).delete();
    },

    /**
     * Moves an unfinished claim made before `staleBefore` to `now`, making it the caller's. The
     * condition is checked on the locked row, so of two concurrent takers only one gets it.
     */
    async takeOver(k: ClaimKey, staleBefore: Date, now: Date, q: Queryable = db): Promise<boolean> {
      const taken = await q('idempotency_keys')
        .where(keyOf(k))
        .whereNull('response_status')
        .where('created_at', '<', staleBefore)
        .update({ created_at: now })
        .returning('idempotency_key');
      return taken.length > 0;
    },

    /** Stores the answer of the claim made at `claimedAt`; nothing if that claim is no longer the row's. */
    async complete(
      k: ClaimKey,
      claimedAt: Date,
      response: { status: number; sealedBody: unknown; headers: Record<string, string> },
      q: Queryable = db,
    ): Promise<void> {
      await q('idempotency_keys')
        .where({ ...keyOf(k), created_at: claimedAt })
        .whereNull('response_status')
        .update({
          response_status: response.status,
          response_body: JSON.stringify(response.sealedBody),
          response_headers: JSON.stringify(response.headers),
        });
    },

    /** Deletes the unfinished claim made at `claimedAt` (unless another request took it over). */
    async release(k: ClaimKey, claimedAt: Date, q: Queryable = db): Promise<void> {
      await q('idempotency_keys')
        .where({ ...keyOf(k), created_at: claimedAt })
        .whereNull('response_status')
        .delete();
    },

    /** Deletes up to `limit` rows made before `before`; returns how many. */
    async deleteOlderThan(before: Date, limit: number, q: Queryable = db): Promise<number> {
      const batch = q('idempotency_keys').select('principal_id', 'idempotency_key').where('created_at', '<', before).limit(limit);
      return q('idempotency_keys').whereIn(['principal_id', 'idempotency_key'], batch).delete();
    },
  };
}

export type IdempotencyRepo = ReturnType<typeof createIdempotencyRepo>;

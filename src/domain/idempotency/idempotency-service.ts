/**
 * Idempotency-Key (DESIGN.md): the same key and body within 24 h replays the first
 * answer; the same key with another body or path is refused. The key is claimed
 * (a row without a response) before the operation runs, so two concurrent
 * retries cannot both execute it. A claim left unfinished for longer than any
 * request can take belongs to a request that died with its process: a retry
 * takes it over.
 */
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import type { Clock } from '../actor.js';
import type { KeyHasher } from '../security/key-hash.js';
import type { SecretBox } from '../security/secret-box.js';

const TTL_MS = 24 * 3600 * 1000;

/**
 * How long an unfinished claim holds its key. Longer than any admin request can
 * take: the provider probe is bounded by NEXUS_PROVIDER_PROBE_TIMEOUT_MS (at most
 * 60 s, plus 5 s of DNS), a billing provider call by 15 s (a checkout makes up to
 * three). Past it, the request is taken for dead (crash, restart) and a retry may
 * run the operation again.
 */
export const CLAIM_LOCK_TIMEOUT_MS = 5 * 60 * 1000;

/** Rows deleted per statement by purgeExpired: short statements, short locks. */
export const PURGE_BATCH_SIZE = 500;

export interface StoredResponse {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

/** `claimedAt` identifies this claim: only its holder may complete or release it. */
export type Claim = { kind: 'claimed'; claimedAt: Date } | { kind: 'replay'; response: StoredResponse };

/**
 * A body as JSON that does not depend on how it was written: object keys sorted
 * (at any depth), arrays in their order. No body is the empty object, so a
 * retry that sends `{}` where the first call sent nothing is the same request.
 */
export function canonicalJson(body: unknown): string {
  return canonical(body ?? {});
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    const members = Object.keys(object)
      .filter((name) => object[name] !== undefined)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonical(object[name])}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Stored answers can hold secrets shown once (an inference key's plaintext), so
 * they are sealed like every other secret at rest, bound to their key.
 */
export function createIdempotencyService(deps: { db: Db; clock: Clock; secretBox: SecretBox; requestHasher: KeyHasher }) {
  const { db, clock, secretBox, requestHasher } = deps;
  const aad = (principalId: string, key: string) => `idempotency:${principalId}:${key}`;

  /**
   * Moves a stale unfinished claim to `now`, making it this request's. The condition
   * is re-checked on the locked row, so of two concurrent retries only one gets it.
   */
  async function takeOver(principalId: string, key: string, now: Date): Promise<boolean> {
    const taken = await db('idempotency_keys')
      .where({ principal_id: principalId, idempotency_key: key })
      .whereNull('response_status')
      .where('created_at', '<', new Date(now.getTime() - CLAIM_LOCK_TIMEOUT_MS))
      .update({ created_at: now })
      .returning('idempotency_key');
    return taken.length > 0;
  }

  return {
    /**
     * What identifies a request under its key. Over the canonical body, so key order
     * and an absent body vs `{}` do not make a retry another request. Keyed (HMAC
     * with a server-side key): bodies hold secrets (provider and billing credentials),
     * and a plain hash would let a reader of the database confirm a guessed secret offline.
     */
    requestHash(method: string, path: string, body: unknown): string {
      return requestHasher.hash(`${method} ${path}\n${canonicalJson(body)}`);
    },

    async claim(principalId: string, key: string, method: string, path: string, hash: string): Promise<Claim> {
      const ofKey = { principal_id: principalId, idempotency_key: key };
      for (let attempt = 0; attempt < 3; attempt++) {
        const now = clock.now();
        const inserted = await db('idempotency_keys')
          .insert({ ...ofKey, method, path, request_hash: hash, created_at: now })
          .onConflict(['principal_id', 'idempotency_key'])
          .ignore()
          .returning('idempotency_key');
        if (inserted.length) return { kind: 'claimed', claimedAt: now };
        const row = await db('idempotency_keys').where(ofKey).first();
        if (!row) continue;
        const age = now.getTime() - new Date(row.created_at).getTime();
        if (age > TTL_MS) {
          await db('idempotency_keys').where(ofKey).where('created_at', '<', new Date(now.getTime() - TTL_MS)).delete();
          continue;
        }
        if (row.request_hash !== hash || row.method !== method || row.path !== path) {
          throw new AppError('idempotency_key_reused', 'This Idempotency-Key was used with another request', { param: 'Idempotency-Key' });
        }
        if (row.response_status === null) {
          if (age <= CLAIM_LOCK_TIMEOUT_MS) {
            throw new AppError('idempotency_key_in_use', 'A request with this Idempotency-Key is still in progress', { param: 'Idempotency-Key' });
          }
          if (await takeOver(principalId, key, now)) return { kind: 'claimed', claimedAt: now };
          continue;
        }
        const stored = row.response_body as { keyId: string; ciphertext: string };
        const body = JSON.parse(secretBox.open(stored, aad(principalId, key))) as unknown;
        return { kind: 'replay', response: { status: row.response_status, body: body ?? undefined, headers: row.response_headers ?? {} } };
      }
      throw new AppError('idempotency_key_in_use', 'A request with this Idempotency-Key is still in progress', { param: 'Idempotency-Key' });
    },

    /** Records the answer of the claim's operation; a no-op if the claim was taken over meanwhile. */
    async complete(principalId: string, key: string, claimedAt: Date, response: StoredResponse): Promise<void> {
      await db('idempotency_keys')
        .where({ principal_id: principalId, idempotency_key: key, created_at: claimedAt })
        .whereNull('response_status')
        .update({
          response_status: response.status,
          response_body: JSON.stringify(secretBox.seal(JSON.stringify(response.body ?? null), aad(principalId, key))),
          response_headers: JSON.stringify(response.headers),
        });
    },

    /** A failure that may succeed on retry (5xx) frees the key (unless another request took the claim over). */
    async release(principalId: string, key: string, claimedAt: Date): Promise<void> {
      await db('idempotency_keys')
        .where({ principal_id: principalId, idempotency_key: key, created_at: claimedAt })
        .whereNull('response_status')
        .delete();
    },

    /**
     * Deletes the rows past the replay window (they replay nothing any more, and a
     * stored answer can hold a key's plaintext), a batch per statement. Returns how many.
     */
    async purgeExpired(batchSize = PURGE_BATCH_SIZE): Promise<number> {
      const cutoff = new Date(clock.now().getTime() - TTL_MS);
      let purged = 0;
      for (;;) {
        const batch = db('idempotency_keys').select('principal_id', 'idempotency_key').where('created_at', '<', cutoff).limit(batchSize);
        const deleted = await db('idempotency_keys').whereIn(['principal_id', 'idempotency_key'], batch).delete();
        purged += deleted;
        if (deleted < batchSize) return purged;
      }
    },
  };
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;

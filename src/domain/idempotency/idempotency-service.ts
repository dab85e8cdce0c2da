/**
 * Idempotency-Key (DESIGN.md): the same key and body within 24 h replays the first
 * answer; the same key with another body or path is refused. The key is claimed
 * (a row without a response) before the operation runs, so two concurrent
 * retries cannot both execute it.
 */
import { createHash } from 'node:crypto';
import type { Db } from '../../db/database.js';
import { AppError } from '../../errors.js';
import type { Clock } from '../actor.js';
import type { SecretBox } from '../security/secret-box.js';

const TTL_MS = 24 * 3600 * 1000;

export interface StoredResponse {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

export type Claim = { kind: 'claimed' } | { kind: 'replay'; response: StoredResponse };

export function requestHash(method: string, path: string, body: unknown): string {
  return createHash('sha256').update(`${method} ${path}\n${JSON.stringify(body ?? null)}`).digest('hex');
}

/**
 * Stored answers can hold secrets shown once (an inference key's plaintext), so
 * they are sealed like every other secret at rest, bound to their key.
 */
export function createIdempotencyService(deps: { db: Db; clock: Clock; secretBox: SecretBox }) {
  const { db, clock, secretBox } = deps;
  const aad = (principalId: string, key: string) => `idempotency:${principalId}:${key}`;

  return {
    async claim(principalId: string, key: string, method: string, path: string, hash: string): Promise<Claim> {
      for (let attempt = 0; attempt < 2; attempt++) {
        const inserted = await db('idempotency_keys')
          .insert({ principal_id: principalId, idempotency_key: key, method, path, request_hash: hash, created_at: clock.now() })
          .onConflict(['principal_id', 'idempotency_key'])
          .ignore()
          .returning('idempotency_key');
        if (inserted.length) return { kind: 'claimed' };
        const row = await db('idempotency_keys').where({ principal_id: principalId, idempotency_key: key }).first();
        if (!row) continue;
        if (clock.now().getTime() - new Date(row.created_at).getTime() > TTL_MS) {
          await db('idempotency_keys').where({ principal_id: principalId, idempotency_key: key, created_at: row.created_at }).delete();
          continue;
        }
        if (row.request_hash !== hash || row.method !== method || row.path !== path) {
          throw new AppError('idempotency_key_reused', 'This Idempotency-Key was used with another request', { param: 'Idempotency-Key' });
        }
        if (row.response_status === null) {
          throw new AppError('idempotency_key_in_use', 'A request with this Idempotency-Key is still in progress', { param: 'Idempotency-Key' });
        }
        const stored = row.response_body as { keyId: string; ciphertext: string };
        const body = JSON.parse(secretBox.open(stored, aad(principalId, key))) as unknown;
        return { kind: 'replay', response: { status: row.response_status, body: body ?? undefined, headers: row.response_headers ?? {} } };
      }
      throw new AppError('idempotency_key_in_use', 'A request with this Idempotency-Key is still in progress', { param: 'Idempotency-Key' });
    },

    async complete(principalId: string, key: string, response: StoredResponse): Promise<void> {
      await db('idempotency_keys')
        .where({ principal_id: principalId, idempotency_key: key })
        .update({
          response_status: response.status,
          response_body: JSON.stringify(secretBox.seal(JSON.stringify(response.body ?? null), aad(principalId, key))),
          response_headers: JSON.stringify(response.headers),
        });
    },

    /** A failure that may succeed on retry (5xx) frees the key. */
    async release(principalId: string, key: string): Promise<void> {
      await db('idempotency_keys').where({ principal_id: principalId, idempotency_key: key }).whereNull('response_status').delete();
    },
  };
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;

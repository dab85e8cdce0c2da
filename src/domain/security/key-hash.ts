/**
 * Management and inference keys are stored only as a keyed hash (HMAC-SHA256).
 * The hashing key is derived from the encryption key with HKDF, under its own label;
 * another use (idempotency request hashes) passes a label of its own, so its hashes
 * can never be compared with a key's.
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

const KEY_HASH_LABEL = 'nexus/key-hash/v1';
export const IDEMPOTENCY_HASH_LABEL = 'nexus/idempotency-request-hash/v1';

export function createKeyHasher(encryptionKey: Buffer, label = KEY_HASH_LABEL) {
  const hashKey = Buffer.from(hkdfSync('sha256', encryptionKey, Buffer.alloc(0), label, 32));
  return {
    hash(token: string): string {
      return createHmac('sha256', hashKey).update(token, 'utf8').digest('hex');
    },
  };
}

export type KeyHasher = ReturnType<typeof createKeyHasher>;

/** A high-entropy token: prefix + 32 random bytes in base64url. */
export function generateToken(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

export function constantTimeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

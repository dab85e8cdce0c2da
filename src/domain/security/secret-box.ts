/**
 * Secrets at rest: AES-256-GCM, a random 96-bit nonce per write, the key id
 * stored beside the ciphertext (so keys can rotate) and associated data that
 * binds a ciphertext to its row: copied to another row, it fails to decrypt.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

export interface SealedSecret {
  keyId: string;
  /** base64 of nonce (12) | ciphertext | tag (16) */
  ciphertext: string;
}

export function keyIdOf(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

export function createSecretBox(current: Buffer, previous: readonly Buffer[] = []) {
  const keys = new Map<string, Buffer>([[keyIdOf(current), current]]);
  for (const key of previous) keys.set(keyIdOf(key), key);
  const currentId = keyIdOf(current);

  function seal(plaintext: string, associatedData: string): SealedSecret {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', current, nonce);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return { keyId: currentId, ciphertext: Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64') };
  }

  function open(sealed: SealedSecret, associatedData: string): string {
    const key = keys.get(sealed.keyId);
    if (!key) throw new Error(`no encryption key with id ${sealed.keyId} is configured`);
    const raw = Buffer.from(sealed.ciphertext, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(raw.subarray(raw.length - 16));
    return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString('utf8');
  }

  return { seal, open, currentKeyId: currentId };
}

export type SecretBox = ReturnType<typeof createSecretBox>;

/** Keys shorter than this show no character at all. */
const MIN_LENGTH_WITH_TAIL = 12;
const MAX_TAIL = 4;
/** A recognisable type marker: up to 5 letters and the first dash or underscore (`sk-`, `pdl_`, `nvapi-`). */
const TYPE_PREFIX = /^[A-Za-z]{1,5}[-_]/;

/**
 * `sk-...Ab3x`: a hint that gives away no useful part of the key. It shows at
 * most a quarter of the key's characters: its last 4 at most, and the type
 * prefix only when it fits in that quarter beside them (so real keys, 40+
 * characters, keep `sk-...Ab3x`, while `abcdefgh-ijk` shows `...ijk`). A key
 * under 12 characters shows `...` alone.
 */
export function secretPreview(secret: string): string {
  if (secret.length < MIN_LENGTH_WITH_TAIL) return '...';
  const budget = Math.floor(secret.length / 4);
  const tail = secret.slice(-Math.min(MAX_TAIL, budget));
  const prefix = TYPE_PREFIX.exec(secret)?.[0] ?? '';
  const head = prefix.length + tail.length <= budget ? prefix : '';
  return `${head}...${tail}`;
}

import { randomFillSync } from 'node:crypto';
import { validate, version } from 'uuid';

/**
 * Time-ordered ids (UUID v7, RFC 9562): 48 bits of Unix milliseconds, then a
 * 32-bit sequence (random at each new millisecond, +1 within one, carried into
 * the timestamp on overflow), then random bits; so ids made one after the other
 * by this process sort in the order they were made, and newest-first order is
 * id order. The random bytes come from one pooled randomFillSync per 256 ids:
 * a gateway call makes several ids, and a CSPRNG call for each would be a visible
 * share of its CPU.
 */
const POOL_IDS = 256;
const pool = Buffer.alloc(16 * POOL_IDS);
let poolAt = pool.length;
let lastMs = -1;
let seq = 0;
const HEX = Array.from({ length: 256 }, (_, i) => (i + 0x100).toString(16).slice(1));
const bytes = new Uint8Array(16);

function random(n: number): number {
  if (poolAt + n > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const at = poolAt;
  poolAt += n;
  return at;
}

export function newId(): string {
  let ms = Date.now();
  if (ms > lastMs) {
    const r = random(4);
    // 31 random bits: room to count up within the millisecond.
    seq = pool.readUInt32BE(r) >>> 1;
    lastMs = ms;
  } else {
    seq = (seq + 1) >>> 0;
    if (seq === 0) lastMs++;
    ms = lastMs;
  }
  const r = random(6);
  bytes[0] = (ms / 0x10000000000) & 0xff;
  bytes[1] = (ms / 0x100000000) & 0xff;
  bytes[2] = (ms >>> 24) & 0xff;
  bytes[3] = (ms >>> 16) & 0xff;
  bytes[4] = (ms >>> 8) & 0xff;
  bytes[5] = ms & 0xff;
  bytes[6] = 0x70 | ((seq >>> 28) & 0x0f);
  bytes[7] = (seq >>> 20) & 0xff;
  bytes[8] = 0x80 | ((seq >>> 14) & 0x3f);
  bytes[9] = (seq >>> 6) & 0xff;
  bytes[10] = ((seq << 2) & 0xff) | (pool[r]! & 0x03);
  bytes[11] = pool[r + 1]!;
  bytes[12] = pool[r + 2]!;
  bytes[13] = pool[r + 3]!;
  bytes[14] = pool[r + 4]!;
  bytes[15] = pool[r + 5]!;
  const h = HEX;
  return (
    h[bytes[0]]! +
    h[bytes[1]]! +
    h[bytes[2]]! +
    h[bytes[3]]! +
    '-' +
    h[bytes[4]]! +
    h[bytes[5]]! +
    '-' +
    h[bytes[6]]! +
    h[bytes[7]]! +
    '-' +
    h[bytes[8]]! +
    h[bytes[9]]! +
    '-' +
    h[bytes[10]]! +
    h[bytes[11]]! +
    h[bytes[12]]! +
    h[bytes[13]]! +
    h[bytes[14]]! +
    h[bytes[15]]!
  );
}

export function isUuid(value: string): boolean {
  return validate(value);
}

const UUID_FORM = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A UUID's text form (RFC 9562: 8-4-4-4-12 hex digits, either case), whatever its version: what the contract's `format: uuid` takes. */
export function hasUuidForm(value: string): boolean {
  return UUID_FORM.test(value);
}

/**
 * A UUID as Nexus stores and compares it: lower case (RFC 9562's output form). A client may send one in
 * upper case; anything that is not a UUID is returned as it is.
 */
export function canonicalUuid(value: string): string {
  return UUID_FORM.test(value) ? value.toLowerCase() : value;
}

export function isUuidV7(value: string): boolean {
  return validate(value) && version(value) === 7;
}

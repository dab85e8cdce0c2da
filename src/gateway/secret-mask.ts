/**
 * The provider's key never reaches the end user, even when the upstream writes it into its answer
 * (a debugging server or a misconfigured proxy that echoes the request's headers): every occurrence
 * in the body is overwritten with `*`, byte for byte, so a Content-Length stays true.
 *
 * Streamed, so a key split across two chunks is caught too: the end of a chunk that could begin
 * the key is held back until the next chunk shows whether it does. Only such a tail is held (an SSE
 * event ends with a blank line, which begins no key), so a stream's events are not delayed.
 */
const STAR = 0x2a;
const EMPTY = Buffer.alloc(0);

/**
 * Keys shorter than this are not looked for: a short test key would mask ordinary text. Real
 * providers' keys are far longer.
 */
const MIN_MASKED_KEY_LENGTH = 16;

/** A key as the mask looks for it, worked out once per key (the gateway keeps it with the cached key). */
export interface MaskedKey {
  readonly text: string;
  readonly bytes: Buffer;
}

/** The key to look for, or null when it is too short to be looked for. */
export function maskedKey(key: string): MaskedKey | null {
  return key.length >= MIN_MASKED_KEY_LENGTH ? { text: key, bytes: Buffer.from(key, 'utf8') } : null;
}

/** One answer's mask (it holds back what may begin the key between chunks). */
export class SecretMask {
  private readonly key: string;
  private readonly secret: Buffer;
  private carry: Buffer = EMPTY;

  constructor(key: MaskedKey) {
    this.key = key.text;
    this.secret = key.bytes;
  }

  /** A mask for this key, or none when the key is too short to be looked for. */
  static for(key: string): SecretMask | undefined {
    const masked = maskedKey(key);
    return masked ? new SecretMask(masked) : undefined;
  }

  /** The bytes of `chunk` (after any held back before) that can go out now, the key masked. */
  push(chunk: Buffer): Buffer {
    const joined = this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk;
    const data = this.masked(joined, joined !== chunk);
    const hold = this.partialKeyAtEnd(data);
    this.carry = hold ? Buffer.from(data.subarray(data.length - hold)) : EMPTY;
    return hold ? data.subarray(0, data.length - hold) : data;
  }

  /**
   * Text made of whole SSE events (what the usage inspector passes on when it rewrites a stream), or a whole text
   * read at once (an error answer's message for the record): a key cannot straddle two of them, so nothing is held
   * back, and the text need not become bytes here.
   */
  pushEvents(text: string): string {
    return text.includes(this.key) ? text.replaceAll(this.key, '*'.repeat(this.key.length)) : text;
  }

  /** What is still held back: at the end of the body it is not the start of a key. */
  end(): Buffer {
    const rest = this.carry;
    this.carry = EMPTY;
    return rest;
  }

  private masked(data: Buffer, owned: boolean): Buffer {
    let at = data.indexOf(this.secret);
    if (at === -1) return data;
    // The upstream's chunk may still be read elsewhere (the usage inspector): written over in a copy.
    const out = owned ? data : Buffer.from(data);
    for (; at !== -1; at = out.indexOf(this.secret, at + this.secret.length)) out.fill(STAR, at, at + this.secret.length);
    return out;
  }

  /** The length of the longest end of `data` that is a proper beginning of the key. */
  private partialKeyAtEnd(data: Buffer): number {
    const first = this.secret[0];
    for (let i = Math.max(0, data.length - this.secret.length + 1); i < data.length; i++) {
      if (data[i] === first && data.subarray(i).equals(this.secret.subarray(0, data.length - i))) return data.length - i;
    }
    return 0;
  }
}

/**
 * AWS's binary event-stream framing (`application/vnd.amazon.eventstream`), as Bedrock's ConverseStream
 * and InvokeModelWithResponseStream answer. A frame is a 4-byte total length, a 4-byte header length, a
 * CRC32 of those, the headers, the payload and a CRC32 of the whole. The decoder only cuts the bytes into
 * frames by their length prefix, across chunk boundaries; each frame is checked and decoded by smithy's
 * EventStreamCodec (both CRCs, the header types), the codec the AWS SDKs read the same streams with.
 *
 * A frame that does not decode (a bad checksum, a length out of range, a truncated stream) is an
 * EventStreamError: the meter records the stream by the missing-usage rule, it never throws further.
 */
import { EventStreamCodec } from '@smithy/core/event-streams';
import type { Message, MessageHeaders } from '@smithy/core/event-streams';

/** The frame's prelude (total length, header length, prelude CRC) and its trailing message CRC. */
const PRELUDE_BYTES = 12;
const MIN_FRAME_BYTES = PRELUDE_BYTES + 4;
/** The largest frame accepted: AWS's event-stream limit (16 MiB of payload, 128 KiB of headers), rounded up. */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024 + 128 * 1024 + MIN_FRAME_BYTES;

export const EVENT_STREAM_CONTENT_TYPE = 'application/vnd.amazon.eventstream';

const toUtf8 = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
const fromUtf8 = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));

/** One codec serves every stream: decode and encode keep no state between frames. */
const codec = new EventStreamCodec(toUtf8, fromUtf8);

export class EventStreamError extends Error {
  /** The frames the chunk completed before the broken one. */
  before: EventFrame[] = [];
}

/** A decoded frame: its string headers (`:event-type`, `:message-type`, `:content-type`, ...) and its payload. */
export interface EventFrame {
  headers: Record<string, string>;
  body: Uint8Array;
  /** Its bytes as they came (a frame is forwarded unchanged). */
  raw: Buffer;
}

function stringHeaders(headers: MessageHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name in headers) {
    const h = headers[name]!;
    if (h.type === 'string') out[name] = h.value;
  }
  return out;
}

/** Splits a byte stream into event-stream frames as its chunks come. */
export class EventStreamDecoder {
  private held: Buffer[] = [];
  private heldBytes = 0;

  /**
   * The frames this chunk completes, in order. Throws EventStreamError (with the frames before it) on a frame
   * that does not decode: the stream is not read further.
   */
  push(chunk: Buffer): EventFrame[] {
    const frames: EventFrame[] = [];
    let buf = chunk;
    if (this.heldBytes) {
      this.held.push(chunk);
      this.heldBytes += chunk.length;
      // Not even the length prefix, or not the whole frame yet: wait for more (bytes joined once, when it is whole).
      if (this.heldBytes < 4) return frames;
      const need = this.frameLength();
      // A length out of range is not waited for: it is refused below.
      if (need >= MIN_FRAME_BYTES && need <= MAX_FRAME_BYTES && this.heldBytes < need) return frames;
      buf = Buffer.concat(this.held, this.heldBytes);
      this.held = [];
      this.heldBytes = 0;
    }
    let at = 0;
    try {
      while (buf.length - at >= 4) {
        const length = buf.readUInt32BE(at);
        if (length < MIN_FRAME_BYTES || length > MAX_FRAME_BYTES) {
          throw new EventStreamError(`An event-stream frame declares ${length} bytes, outside ${MIN_FRAME_BYTES}..${MAX_FRAME_BYTES}`);
        }
        if (buf.length - at < length) break;
        frames.push(decodeFrame(buf.subarray(at, at + length)));
        at += length;
      }
    } catch (err) {
      (err as EventStreamError).before = frames;
      throw err;
    }
    if (at < buf.length) {
      const rest = buf.subarray(at);
      this.held = [rest];
      this.heldBytes = rest.length;
    }
    return frames;
  }

  /** The declared length of the frame the held bytes begin (they hold at least its 4-byte prefix). */
  private frameLength(): number {
    const first = this.held[0]!;
    if (first.length >= 4) return first.readUInt32BE(0);
    const prefix = Buffer.concat(this.held, this.heldBytes).subarray(0, 4);
    return prefix.readUInt32BE(0);
  }

  /** The stream ended: throws EventStreamError when it ended inside a frame. */
  end(): void {
    if (this.heldBytes) {
      const held = this.heldBytes;
      this.held = [];
      this.heldBytes = 0;
      throw new EventStreamError(`The event stream ended inside a frame (${held} bytes left over)`);
    }
  }
}

function decodeFrame(raw: Buffer): EventFrame {
  let message: Message;
  try {
    message = codec.decode(raw);
  } catch (err) {
    throw new EventStreamError(`An event-stream frame does not decode: ${(err as Error).message}`);
  }
  return { headers: stringHeaders(message.headers), body: message.body, raw };
}

/** A frame of an `event` message of `eventType` carrying a JSON payload (a cut stream's end is made of these). */
export function eventFrame(eventType: string, payload: unknown): Buffer {
  const bytes = codec.encode({
    headers: {
      ':event-type': { type: 'string', value: eventType },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'event' },
    },
    body: fromUtf8(JSON.stringify(payload)),
  });
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A frame of an `exception` message (`:exception-type`), with its JSON `{ message }` payload. */
export function exceptionFrame(exceptionType: string, message: string): Buffer {
  const bytes = codec.encode({
    headers: {
      ':exception-type': { type: 'string', value: exceptionType },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'exception' },
    },
    body: fromUtf8(JSON.stringify({ message })),
  });
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

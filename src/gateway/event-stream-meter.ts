/**
 * A metered stream in AWS's binary event-stream framing (src/protocols/event-stream.ts), as Bedrock's
 * ConverseStream answers: the same meter as an SSE stream's (stream-meter.ts: the protocol's reader, the
 * output count, the cut at the output bound), over frames instead of text events. Each `event` frame's
 * JSON payload reaches the reader as `{ [its :event-type]: payload }`, the shape the AWS SDKs give the
 * caller (`{ metadata: { usage } }`, `{ contentBlockDelta: { delta } }`). Frames go out whole and unchanged;
 * a cut stream ends with the frames its reader makes.
 *
 * A frame that does not decode ends what the client gets: the frames before it, then an
 * `internalServerException` frame saying the provider's stream broke (the SDK raises it as an error with
 * that message), and the relay ends the answer and aborts the upstream request; the call is recorded by
 * the rule for a stream without its usage (metered-call.ts) and counted as malformed.
 */
import type { Inspector } from '../protocols/inspectors.js';
import { EventStreamDecoder, EventStreamError, exceptionFrame, type EventFrame } from '../protocols/event-stream.js';
import { StreamMeter, type StreamBounds } from './stream-meter.js';

const EMPTY = Buffer.alloc(0);

export class EventStreamMeter extends StreamMeter {
  private readonly decoder = new EventStreamDecoder();

  constructor(inspector: Inspector, bounds: StreamBounds) {
    super(inspector, bounds);
  }

  push(chunk: Buffer): Buffer {
    if (this.cut || this.malformed) return EMPTY;
    let frames: EventFrame[];
    try {
      frames = this.decoder.push(chunk);
    } catch (err) {
      if (!(err instanceof EventStreamError)) throw err;
      const before = this.forward(err.before);
      return this.cut ? before : this.broke(err, [before]);
    }
    return this.forward(frames);
  }

  end(): Buffer {
    if (this.cut || this.malformed) return EMPTY;
    try {
      this.decoder.end();
    } catch (err) {
      if (!(err instanceof EventStreamError)) throw err;
      return this.broke(err, []);
    }
    return EMPTY;
  }

  private forward(frames: EventFrame[]): Buffer {
    const out: Buffer[] = [];
    for (const frame of frames) {
      if (!this.onFrame(frame)) {
        const ending = this.ending();
        out.push(typeof ending === 'string' ? Buffer.from(ending) : ending);
        break;
      }
      out.push(frame.raw);
    }
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  /** Reads one frame; false when the stream is cut before it. */
  private onFrame(frame: EventFrame): boolean {
    const type = frame.headers[':message-type'] === 'exception' ? frame.headers[':exception-type'] : frame.headers[':event-type'];
    if (!type) return true;
    let payload: unknown;
    try {
      payload = JSON.parse(Buffer.from(frame.body.buffer, frame.body.byteOffset, frame.body.byteLength).toString('utf8'));
    } catch {
      return true;
    }
    if (!payload || typeof payload !== 'object') return true;
    return this.meterEvent({ [type]: payload });
  }

  private broke(err: EventStreamError, before: Buffer[]): Buffer {
    this.malformed = err;
    this.complete = false;
    return Buffer.concat([...before, exceptionFrame('internalServerException', `The provider's event stream broke: ${err.message}`)]);
  }
}

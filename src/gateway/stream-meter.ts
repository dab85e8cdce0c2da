/**
 * What every metered stream's meter shares, whatever its framing: the usage, model and response id its
 * protocol's reader finds in its events, the output counted so far, and the cut at the call's output
 * bound. A framing's meter (sse-meter.ts for `text/event-stream`, event-stream-meter.ts for AWS's binary
 * `application/vnd.amazon.eventstream`) cuts the bytes into events, hands each event's JSON to
 * meterEvent, and forwards what it keeps. The counting rules are sse-meter.ts's comment.
 */
import type { Inspector, PreparedCall, Usage } from '../protocols/inspectors.js';
import type { AssembledAnswer, StreamReader, StreamState } from '../protocols/stream.js';

/** Bytes of output text counted as one token by the estimate: about twice what a BPE token averages. */
const BYTES_PER_TOKEN = 8;

type Json = Record<string, any>;

/** What the meter needs of its call. */
export type StreamBounds = Pick<PreparedCall, 'usageInjected' | 'inputBound' | 'outputBound'>;

export abstract class StreamMeter implements StreamState {
  usage: Usage | null = null;
  model: string | null = null;
  /** A Responses API stream's response id. */
  responseId: string | null = null;
  /** Whether the final usage report was seen (the stream's accounting is complete). */
  complete = false;
  /** The stream passed its output bound and was cut there (nothing more is read or forwarded). */
  cut = false;
  /** Why the stream could not be read on (a framing that can break: event-stream-meter.ts), if it could not. */
  malformed: Error | undefined;

  /** Events carrying output text, and its bytes. */
  private textEvents = 0;
  private textBytes = 0;
  /** Events carrying output that is not text (an audio or image delta: the reader's otherOutput). */
  private otherEvents = 0;
  /** The protocol's reading of the stream's events (its usage, its output text, the end of a cut stream). */
  private reader: StreamReader;
  /** The output bound as a number, for the estimate's check at each event (exact: an estimate is far below 2^53). */
  private readonly bound: number;

  constructor(
    inspector: Inspector,
    protected readonly bounds: StreamBounds,
  ) {
    this.reader = inspector.stream();
    this.bound = Number(bounds.outputBound);
  }

  /** The upstream's next bytes; returns what goes to the client now (whole events, or a cut stream's end). */
  abstract push(chunk: Buffer): Buffer | string;
  /** What is left at the end of the stream. */
  abstract end(): Buffer | string;

  /**
   * A call that keeps its request log (src/records/request-log.ts): the answer is assembled from the events forwarded to the
   * client. Its reader is wrapped, so that a stream read for its usage alone runs no code of it.
   */
  assembleInto(answer: AssembledAnswer): void {
    const reader = this.reader;
    const assemble = reader.assemble?.bind(reader);
    if (!assemble) return;
    this.reader = {
      read: (event, state) => reader.read(event, state),
      text: (event) => reader.text(event),
      otherOutput: (event) => reader.otherOutput?.(event) ?? false,
      forwarded: (event) => {
        reader.forwarded(event);
        assemble(event, answer);
      },
      ending: (state, cut) => reader.ending(state, cut),
    };
  }

  /** Output tokens the stream carried so far, as counted for its bound (sse-meter.ts's comment). */
  get outputSeen(): bigint {
    const estimate = BigInt(Math.max(this.textEvents, Math.ceil(this.textBytes / BYTES_PER_TOKEN)));
    const reported = this.usage?.outputTokens ?? 0n;
    return reported > estimate ? reported : estimate;
  }

  /** Whether the output counted so far (outputSeen) is past the bound: in numbers, no BigInt made at each event. */
  private pastBound(): boolean {
    if (Math.max(this.textEvents, Math.ceil(this.textBytes / BYTES_PER_TOKEN)) > this.bound) return true;
    const reported = this.usage?.outputTokens;
    return reported !== undefined && reported > this.bounds.outputBound;
  }

  /**
   * The output a stream that ended short is charged for, at most its bound (metered-call.ts): one token per event
   * carrying output (text, reasoning, tool input, or output that is not text: an audio delta), or the output counted
   * if more. Events that carry none (Anthropic's message_start, content_block_start and ping, a chunk naming only its
   * role, the Responses API's response.created) count nothing.
   */
  get outputEstimate(): bigint {
    const events = BigInt(this.textEvents + this.otherEvents);
    const seen = this.outputSeen;
    return events > seen ? events : seen;
  }

  /**
   * One event's data, parsed, read by the protocol's reader; false when the output it carries takes the stream
   * past its bound: the stream is cut before it (the event is not forwarded).
   */
  protected meterEvent(parsed: Json): boolean {
    const reader = this.reader;
    reader.read(parsed, this);
    const text = reader.text(parsed);
    if (text > 0) {
      this.textEvents++;
      this.textBytes += text;
      if (this.pastBound()) {
        this.cut = true;
        this.complete = false;
        return false;
      }
    } else if (reader.otherOutput?.(parsed)) {
      this.otherEvents++;
    }
    reader.forwarded(parsed);
    return true;
  }

  /** The events that end a cut stream, as its protocol ends an answer that reached its cap. */
  protected ending(): string | Buffer {
    return this.reader.ending(this, {
      outputTokens: Number(this.bounds.outputBound),
      // The input as the upstream reported it so far, else the call's input bound.
      inputTokens: Number(this.usage?.inputTokens ?? this.bounds.inputBound),
      cachedTokens: Number(this.usage?.cachedInputTokens ?? 0n),
      usageAsked: !this.bounds.usageInjected,
    });
  }
}

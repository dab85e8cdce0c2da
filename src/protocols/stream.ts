/**
 * A metered stream as a protocol reads it, event by event: what its reader fills in (StreamState), what the end of
 * a stream cut at its output bound reports (StreamCut), and the reader itself (StreamReader). The gateway's stream
 * meters (sse-meter.ts, event-stream-meter.ts) feed each event's parsed data to the protocol's reader.
 */
import type { Usage } from './usage.js';

type Json = Record<string, any>;

/** What a stream's meter (sse-meter.ts) knows of it: its reader fills it in as the events come. */
export interface StreamState {
  usage: Usage | null;
  model: string | null;
  /** A Responses API stream's response id. */
  responseId: string | null;
  /** The upstream's final usage report was read. */
  complete: boolean;
}

/** What the end of a cut stream reports. */
export interface StreamCut {
  /** Its output bound. */
  outputTokens: number;
  /** The input as reported so far, else its bound; the cached part of it. */
  inputTokens: number;
  cachedTokens: number;
  /** The client asked for usage in the stream (the gateway did not add it). */
  usageAsked: boolean;
}

/** A tool call of a stream's answer, as its deltas assemble it. */
export interface AssembledToolCall {
  id?: string | undefined;
  name: string;
  arguments: string;
}

/**
 * A stream's answer assembled from its events, for a call that keeps its request log (docs/request-logs.md): its
 * text and its tool calls, not its frames; the text kept up to `max` bytes. Made only for such a call (the stream
 * meter's assembleInto), so that a stream read for its usage alone assembles nothing.
 */
export class AssembledAnswer {
  text = '';
  /** The text's whole size in bytes, and whether it was cut at `max`. */
  bytes = 0;
  truncated = false;
  readonly toolCalls = new Map<number, AssembledToolCall>();

  constructor(private readonly max: number) {}

  addText(text: unknown): void {
    if (typeof text !== 'string' || !text) return;
    const size = Buffer.byteLength(text);
    const room = this.max - (this.bytes > this.max ? this.max : this.bytes);
    this.bytes += size;
    if (size <= room) this.text += text;
    else {
      this.truncated = true;
      if (room > 0)
        this.text += Buffer.from(text)
          .subarray(0, room)
          .toString('utf8')
          .replace(/\uFFFD$/, '');
    }
  }

  /** A tool call's start (its id and name) or the next piece of its arguments, by its index in the answer. */
  tool(index: number, id: unknown, name: unknown, args: unknown): void {
    let call = this.toolCalls.get(index);
    if (!call) this.toolCalls.set(index, (call = { name: '', arguments: '' }));
    if (typeof id === 'string' && id) call.id = id;
    if (typeof name === 'string' && name) call.name = name;
    if (typeof args === 'string' && call.arguments.length < this.max) call.arguments += args;
  }
}

/** A protocol's reading of one metered stream, event by event (each event's data, parsed). */
export interface StreamReader {
  /** What the event says of the usage, the model and the response id, into `state`. */
  read(event: Json, state: StreamState): void;
  /**
   * The output text the event carries, in bytes (text, reasoning, refusals, tool input): 0 for an event that
   * carries none (a stream's start, a block's start, a ping, a usage report).
   */
  text(event: Json): number;
  /**
   * Whether an event without output text carries other output (an audio or image delta): one token for a stream
   * that ends short (stream-meter.ts, outputEstimate). None: only text is output.
   */
  otherOutput?(event: Json): boolean;
  /** The event goes on to the client: what a cut stream's end is made of is kept. */
  forwarded(event: Json): void;
  /** The answer's text and tool calls the event carries, into `answer` (only for a call that keeps its request log). */
  assemble?(event: Json, answer: AssembledAnswer): void;
  /**
   * The events that end a cut stream, as the protocol ends an answer that reached its cap: SSE text, or the
   * binary frames of an event-stream protocol (streamFraming).
   */
  ending(state: StreamState, cut: StreamCut): string | Buffer;
}

/** An SSE event of `type` with its data (`type` repeated in it, as the protocols that name their events do). */
export const sseEvent = (type: string, data: Json) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

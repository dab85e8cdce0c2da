/**
 * A metered SSE stream, read event by event on its way to the client: the usage
 * the upstream reports, its model and response id, the output it has carried so
 * far, and the call's output bound held against an upstream that ignores the cap
 * it was sent (docs/reliability.md "The output bound").
 *
 * Only whole events reach the client: the bytes after the last blank line wait for
 * the rest of their event. They go out as the upstream sent them, or, when the
 * stream is rewritten (the usage chunk was the gateway's), as the events kept.
 *
 * Output counted so far: the larger of the output tokens the upstream reported
 * (Anthropic's message_start and message_delta; servers that put usage in every
 * chunk) and an estimate from the output text the events carry (content,
 * reasoning, refusals, tool-call arguments, tool input): the larger of the number
 * of events carrying any and one token per 8 bytes of that text in UTF-8.
 * The estimate is a lower bound on purpose, so that a stream which honours its cap
 * is never cut short (a text estimate above the true count would cut every answer
 * that reaches its cap before its end: English averages 4 to 5 bytes a token).
 * Streaming servers send one token an event, so the event count is exact for them
 * whatever text a client asks for: a reply of one-byte tokens counts as many as a
 * reply of long words. A server that packs several tokens into an event is caught
 * by the byte count at about twice its bound for ordinary text.
 *
 * When an event carrying output takes the count past the bound, the stream is cut
 * before that event: the client gets the end its protocol gives an answer that
 * reached its cap (chat: a last chunk with finish_reason "length", the usage chunk
 * if it asked for usage, then [DONE]; Responses API: response.incomplete with
 * reason max_output_tokens; Anthropic: the open content blocks stopped, then
 * message_delta with stop_reason "max_tokens" and message_stop), the relay aborts
 * the upstream request, and the call is charged its output bound.
 *
 * What differs by protocol (how an event reports usage, what output text it
 * carries, the end a cut stream gets) is the protocol's stream reader
 * (src/protocols/); what every framing shares (the reader, the count, the cut) is
 * stream-meter.ts; this meter frames SSE events (event-stream-meter.ts frames
 * AWS's binary ones).
 */
import type { Inspector } from '../protocols/inspectors.js';
import { StreamMeter, type StreamBounds } from './stream-meter.js';

const USAGE_NULL = /,\s*"usage"\s*:\s*null/;
/** Global: `push` walks a chunk's events by lastIndex. */
const EVENT_END = /\r?\n\r?\n/g;
const NEWLINE = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const EMPTY = Buffer.alloc(0);

type Json = Record<string, any>;

/** An event's data as the object it holds, or null: none, `[DONE]`, not JSON, or JSON that is not an object. */
function eventJson(data: string): Json | null {
  if (!data || data === '[DONE]') return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return null;
  }
  return parsed && typeof parsed === 'object' ? parsed : null;
}

/** The data of an SSE event: its `data:` lines joined by newlines ('' when it has none). */
function dataOf(block: string): string {
  // The usual event is one data line.
  if (block.startsWith('data:') && !block.includes('\n')) return block.slice(block[5] === ' ' ? 6 : 5);
  let data = '';
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith('data:')) data += (data ? '\n' : '') + line.slice(line[5] === ' ' ? 6 : 5);
  }
  return data;
}

/** Just past the last blank line of `buf` (an event's end), or 0 when it holds none. */
function lastEventEnd(buf: Buffer): number {
  let at = buf.lastIndexOf(NEWLINE);
  while (at > 0) {
    const before = buf[at - 1];
    if (before === NEWLINE || (before === CR && at >= 2 && buf[at - 2] === NEWLINE)) return at + 1;
    at = buf.lastIndexOf(NEWLINE, at - 1);
  }
  return 0;
}

export class SseMeter extends StreamMeter {
  /** Bytes of an event not yet ended (one Buffer once a chunk held an event's end). */
  private held: Buffer[] = [];
  private readonly rewrite: boolean;

  constructor(inspector: Inspector, bounds: StreamBounds) {
    super(inspector, bounds);
    this.rewrite = bounds.usageInjected;
  }

  /** The upstream's next bytes; returns what goes to the client now (whole events, or a cut stream's end). */
  push(chunk: Buffer): Buffer | string {
    if (this.cut) return EMPTY;
    // An event's end is a newline: a chunk without one only adds to the event under way.
    if (this.held.length && chunk.indexOf(NEWLINE) < 0) {
      this.held.push(chunk);
      return EMPTY;
    }
    const buf = this.held.length ? Buffer.concat([...this.held, chunk]) : chunk;
    const end = lastEventEnd(buf);
    this.held = end < buf.length ? [end ? buf.subarray(end) : buf] : [];
    if (end === 0) return EMPTY;
    const text = buf.toString('utf8', 0, end);
    // The usual stream ends its lines with a bare newline: its events are walked by indexOf, each read from its
    // data line without a block of its own; one with a carriage return anywhere is walked by the full pattern.
    if (!this.rewrite && text.indexOf('\r') < 0) {
      const cutAt = this.meterEvents(text);
      return cutAt < 0 ? buf.subarray(0, end) : text.slice(0, cutAt) + this.endingText();
    }
    let out = '';
    let from = 0;
    EVENT_END.lastIndex = 0;
    for (let match = EVENT_END.exec(text); match; match = EVENT_END.exec(text)) {
      const kept = this.onEvent(text.slice(from, match.index));
      if (this.cut) {
        this.held = [];
        return (this.rewrite ? out : text.slice(0, from)) + this.endingText();
      }
      if (this.rewrite && kept !== null) out += kept + match[0];
      from = EVENT_END.lastIndex;
    }
    return this.rewrite ? out : buf.subarray(0, end);
  }

  /**
   * Reads the events of `text` (whole events, lines ended by a bare newline, forwarded as they came); returns
   * where the event that cut the stream began, or -1 when none did.
   */
  private meterEvents(text: string): number {
    let from = 0;
    for (let at = text.indexOf('\n\n'); at >= 0; at = text.indexOf('\n\n', from)) {
      // One data line (no newline before the event's end): its data read in place; else the block's lines joined.
      const single = text.startsWith('data:', from) && text.indexOf('\n', from) === at;
      const parsed = eventJson(
        single ? text.slice(text.charCodeAt(from + 5) === SPACE ? from + 6 : from + 5, at) : dataOf(text.slice(from, at)),
      );
      if (parsed) this.meterEvent(parsed);
      if (this.cut) {
        this.held = [];
        return from;
      }
      from = at + 2;
    }
    return -1;
  }

  /** What is left at the end of the stream (an unterminated event is forwarded as it came). */
  end(): Buffer | string {
    if (this.cut || !this.held.length) return EMPTY;
    const raw = this.held.length === 1 ? this.held[0]! : Buffer.concat(this.held);
    this.held = [];
    const rest = raw.toString('utf8');
    if (!rest.trim()) return raw;
    const kept = this.onEvent(rest);
    if (this.cut) return this.endingText();
    return this.rewrite ? (kept ?? '') : raw;
  }

  /** Reads one event; returns it as it should reach the client, or null to drop it. */
  private onEvent(block: string): string | null {
    const parsed = eventJson(dataOf(block));
    if (!parsed) return block;
    if (!this.meterEvent(parsed)) return null;
    // Only a stream the gateway asked usage of (an OpenAI chat or completions stream: inspectors.ts) is rewritten.
    if (!this.rewrite || !('usage' in parsed)) return block;
    // Our own usage chunk (no choices): the client did not ask for it; nor for the "usage":null of the others.
    if (parsed.usage === null) return block.replace(USAGE_NULL, '');
    return Array.isArray(parsed.choices) && parsed.choices.length === 0 && this.usage ? null : block;
  }

  /** A cut stream's end, as SSE text. */
  private endingText(): string {
    const ending = this.ending();
    return typeof ending === 'string' ? ending : ending.toString('utf8');
  }
}

/**
 * What a handler module sees and returns. Handlers translate between the wire
 * and the domain: validated input in, one domain call, a DTO out. They never
 * touch express's `res`: the glue in api.ts writes the answer.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { Actor, Clock } from '../domain/actor.js';
import type { EventLoopMonitor } from '../observability/event-loop.js';
import { encodeCursor } from './wire.js';

interface DataShape {
  body?: unknown;
  path?: unknown;
  query?: unknown;
}

export interface HandlerInput<T extends DataShape = DataShape> {
  body: T['body'];
  path: NonNullable<T['path']>;
  query: NonNullable<T['query']>;
  /** Admin operations: the authenticated Management Key; system operations: a system actor. */
  actor: Actor;
  headers: IncomingHttpHeaders;
  /** Where the URLs of the answer start (gatewayBaseUrl, webhookUrl): PublicUrl.forRequest of this request. */
  publicUrl: string;
}

/** An answer as the glue in api.ts writes it. */
export interface HandlerResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Lists: the next page's cursor; the glue turns it into Link and X-Next-Cursor. */
  nextCursor?: string | null;
  /** An answer streamed as it is made (an export): piped with backpressure, never held whole. */
  stream?: Readable;
}

/**
 * The answers an operation's generated `XxxResponses` allows: each of its statuses with that status's
 * body (`void`: none). A handler typed by it that answers another status, or a body that lacks a field,
 * has one the contract does not, or a field of another type, does not compile.
 */
export type Reply<R> = {
  [S in keyof R & number]: { status: S; body: R[S]; headers?: Record<string, string>; nextCursor?: string | null };
}[keyof R & number];

export type Handler = (input: HandlerInput<any>) => Promise<HandlerResult>;

export type HandlerMap = Record<string, Handler>;

/** What handlers read beyond the services: the time DTOs are computed at. */
export interface HandlerContext {
  clock: Clock;
  /** Whether the event loop has stalled lately (/healthz). */
  eventLoop: Pick<EventLoopMonitor, 'stall'>;
}

/**
 * Types a handler by its operation's generated `XxxData` (what it reads) and `XxxResponses` (what it may
 * answer): `handler<CreatePlanData, CreatePlanResponses>(...)`.
 */
export function handler<D extends DataShape, R>(fn: (input: HandlerInput<D>) => Promise<Reply<R>>): Handler {
  return fn as Handler;
}

// The answers' bodies are NoInfer: their type comes from the handler's Reply, not from the argument, so an
// object literal is checked field by field against the contract's body (an extra field fails too).
export const ok = <B>(body: NoInfer<B>): { status: 200; body: B } => ({ status: 200, body });
export const created = <B>(body: NoInfer<B>): { status: 201; body: B } => ({ status: 201, body });
export const noContent = (): { status: 204; body: undefined } => ({ status: 204, body: undefined });
/**
 * A text answer streamed from `lines` (an export of any size): each string, or UTF-8 text kept as a Buffer, is written
 * as it comes, with backpressure. Its body is typed as the operation's (a string) but never held: the glue pipes the
 * stream. `ended` is called once the answer is over, written whole or cut (a client gone, a failure half-way),
 * whether or not a line was read.
 */
export function streamed(
  contentType: string,
  lines: AsyncIterable<string | Buffer>,
  headers: Record<string, string> = {},
  ended?: () => void,
): { status: 200; body: never; headers: Record<string, string>; stream: Readable } {
  const stream = Readable.from(lines, { objectMode: false });
  if (ended) stream.once('close', ended);
  return { status: 200, body: undefined as never, headers: { 'Content-Type': contentType, ...headers }, stream };
}

/**
 * How many of a streamed array's items are made one string and written at once. A page of thousands as one string
 * (megabytes) cost V8 two to four times as much to make and write as the same page in strings of a few hundred
 * items; the cost jumps between strings of about 67 KB (256 usage buckets) and 270 KB (docs/performance.md).
 */
const ITEMS_PER_WRITE = 256;

/**
 * A JSON object streamed as it is made: `head`'s fields, then its array `field`, written a page of `items` at a time
 * as they come (with backpressure), so that an answer of tens of thousands of items is never held whole, and the
 * first items go out while the next are read. Typed by the operation's body `B`: `streamedJson<UsageSummaryDto, 'buckets'>`.
 */
export function streamedJson<B, K extends keyof B>(
  head: Omit<B, K>,
  field: K,
  items: AsyncIterable<(B[K] & unknown[]) | JsonItems>,
): { status: 200; body: never; headers: Record<string, string>; stream: Readable } {
  return streamed('application/json; charset=utf-8', jsonText(head, field, items));
}

/**
 * Items already written as JSON (UTF-8): each text the JSON of some items, comma-separated, without the array's
 * brackets, and never empty; written as they are.
 */
export interface JsonItems {
  jsonItems: readonly Buffer[];
}

/**
 * streamedJson's text, in the strings it writes: the head, then at most ITEMS_PER_WRITE items each (items already
 * JSON as they are), then the end.
 */
export async function* jsonText<B, K extends keyof B>(
  head: Omit<B, K>,
  field: K,
  items: AsyncIterable<(B[K] & unknown[]) | JsonItems>,
): AsyncGenerator<string | Buffer> {
  // The head with the array last and empty, without the "]}" that closes it.
  yield JSON.stringify({ ...head, [field]: [] }).slice(0, -2);
  let separator = '';
  for await (const page of items) {
    if (!Array.isArray(page)) {
      for (const text of page.jsonItems) {
        if (separator) yield separator;
        yield text;
        separator = ',';
      }
      continue;
    }
    for (let from = 0; from < page.length; from += ITEMS_PER_WRITE) {
      yield separator + JSON.stringify(page.slice(from, from + ITEMS_PER_WRITE)).slice(1, -1);
      separator = ',';
    }
  }
  yield ']}';
}

/** A list's page; `nextAfter` (the domain's position) goes out as an opaque cursor. */
export const page = <B extends unknown[]>(
  items: NoInfer<B>,
  nextAfter: string | null,
): { status: 200; body: B; nextCursor: string | null } => ({
  status: 200,
  body: items,
  nextCursor: nextAfter === null ? null : encodeCursor(nextAfter),
});

/**
 * What a handler module sees and returns. Handlers translate between the wire
 * and the domain: validated input in, one domain call, a DTO out. They never
 * touch express's `res`: the glue in api.ts writes the answer.
 */
import type { IncomingHttpHeaders } from 'node:http';
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

export interface HandlerResult {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Lists: the next page's cursor; the glue turns it into Link and X-Next-Cursor. */
  nextCursor?: string | null;
}

export type Handler = (input: HandlerInput<any>) => Promise<HandlerResult>;

export type HandlerMap = Record<string, Handler>;

/** What handlers read beyond the services: the time DTOs are computed at. */
export interface HandlerContext {
  clock: Clock;
  /** Whether the event loop has stalled lately (/healthz). */
  eventLoop: Pick<EventLoopMonitor, 'stall'>;
}

/** Types a handler by the generated `XxxData` of its operation. */
export function handler<T extends DataShape>(fn: (input: HandlerInput<T>) => Promise<HandlerResult>): Handler {
  return fn as Handler;
}

export const ok = (body: unknown, status = 200): HandlerResult => ({ status, body });
export const created = (body: unknown): HandlerResult => ({ status: 201, body });
export const noContent = (): HandlerResult => ({ status: 204 });
/** A list's page; `nextAfter` (the domain's position) goes out as an opaque cursor. */
export const page = (items: unknown[], nextAfter: string | null): HandlerResult => ({
  status: 200,
  body: items,
  nextCursor: nextAfter === null ? null : encodeCursor(nextAfter),
});

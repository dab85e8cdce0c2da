/**
 * Paths a layer above the gateway answers itself: the Batch API's (src/batches/), built by the composition and
 * handed to the gateway (GatewayDeps.batches). The gateway knows only that a request may be one of them, so that it
 * does not read its body ahead, and hands it over once the key's access and the connection's protocol are known.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Protocol } from '../protocols/protocol.js';
import type { RequestLocals } from '../web/locals.js';
import type { CacheEntry } from './auth-cache.js';
import type { AuthRow } from './auth-repo.js';
import type { GatewayTarget } from './path-safety.js';
import type { Sendable } from './upload.js';

/** A request handed over: its key's access and connection known, its body not read yet. */
export interface TakenRequest {
  req: IncomingMessage;
  res: ServerResponse;
  locals: RequestLocals;
  entry: CacheEntry;
  auth: AuthRow;
  protocol: Protocol;
  target: GatewayTarget;
}

/**
 * A request handed back, not metered there: the gateway goes on with it as a call, where its passthrough class
 * decides. `body`: what was read of its body (none: the gateway reads it).
 */
export interface HandedBack {
  body?: Sendable;
}

/** A taken request answered (undefined), or handed back; `boundary`: its multipart boundary, when it is an upload. */
type TakenAnswer = (r: TakenRequest, boundary: string | undefined) => Promise<HandedBack | undefined>;

export interface TakenPaths {
  /** Whether a request on `route` may be one of these, before its connection is known: its body is then left unread. */
  mayTake(route: string): boolean;
  /** What answers the request on its connection's protocol; undefined: a call as any other. */
  take(protocol: Protocol, method: string, route: string): TakenAnswer | undefined;
}

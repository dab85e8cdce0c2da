/**
 * The events a route target's breaker raises (docs/events.md): a breaker that opens on a healthy target is
 * `provider_connection.unhealthy`; one that closes again is `.recovered`; its other moves (to half-open, back to
 * open after a failed probe) raise nothing. Written by the process whose write made the transition (the gateway's
 * route registry: of processes making it at once, one), off the call's path: a failure to write it is logged, never
 * the call's.
 */
import type { Db } from '../../db/database.js';
import type { Logger } from '../../observability/logger.js';
import type { Events } from '../events/outbox.js';
import type { BreakerState } from './route-types.js';

/** A breaker's move, as the gateway's route registry tells it (route-registry.ts BreakerTransition). */
interface BreakerMove {
  routeId: string;
  workspaceId: string;
  connectionId: string;
  from: BreakerState;
  to: BreakerState;
}

/** What announcing a move writes through. */
interface BreakerEventDeps {
  db: Db;
  events: Events;
  logger: Logger;
}

/** The event a move raises, if any. */
function eventOf(move: BreakerMove): 'provider_connection.unhealthy' | 'provider_connection.recovered' | undefined {
  if (move.to === 'open' && move.from === 'closed') return 'provider_connection.unhealthy';
  if (move.to === 'closed' && move.from !== 'closed') return 'provider_connection.recovered';
  return undefined;
}

/** Writes the event of a breaker's move, if it raises one; a failure is logged. */
export function announceBreaker({ db, events, logger }: BreakerEventDeps, move: BreakerMove): void {
  const type = eventOf(move);
  if (!type) return;
  const data = { providerConnectionId: move.connectionId, source: 'breaker' as const, routeId: move.routeId };
  events
    .emit(db, move.workspaceId, type, data)
    .catch((err: Error) => logger.warn({ msg: 'could not write a breaker event', routeId: move.routeId, error: err.message }));
}

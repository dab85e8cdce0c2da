/**
 * The one way to raise an event: `events.emit(tx, workspaceId, type, data)`, in the transaction of the change
 * that caused it. The event and its webhook messages are written by one statement (outbox-repo.ts); the
 * delivery workers (webhook-delivery.ts) of any process send them after the commit. Nothing is sent from here,
 * so a slow or dead receiver never holds a transaction, an Admin answer or a gateway call.
 */
import type { Queryable } from '../../db/database.js';
import { newId } from '../../ids.js';
import type { Clock } from '../actor.js';
import type { EventData, EventType } from './event-catalogue.js';
import { insertEvent } from './outbox-repo.js';

export function createEvents(deps: { clock: Clock }) {
  async function write<T extends EventType>(
    tx: Queryable,
    workspaceId: string,
    type: T,
    data: EventData[T],
    endpointId?: string,
  ): Promise<string> {
    const id = newId();
    await insertEvent(tx, { id, workspaceId, type, data: JSON.stringify(data), createdAt: deps.clock.now() }, endpointId);
    return id;
  }
  return {
    /** Writes the event and queues it for every endpoint of the workspace that wants its type; its id. */
    emit<T extends EventType>(tx: Queryable, workspaceId: string, type: T, data: EventData[T]): Promise<string> {
      return write(tx, workspaceId, type, data);
    },
    /** An event for one endpoint alone (webhook.test), whatever its filter. */
    emitTo<T extends EventType>(tx: Queryable, workspaceId: string, endpointId: string, type: T, data: EventData[T]): Promise<string> {
      return write(tx, workspaceId, type, data, endpointId);
    },
  };
}

export type Events = ReturnType<typeof createEvents>;

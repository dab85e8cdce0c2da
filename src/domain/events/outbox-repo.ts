/**
 * The SQL of emit() (outbox.ts): an event row and its webhook messages, written by one statement in the caller's
 * transaction. The fan-out CTE is shared with the statements that raise events themselves (outbox-sql.ts).
 */
import type { Queryable } from '../../db/database.js';
import { fanOutCte } from './outbox-sql.js';

const EMIT_SQL = (endpoint: boolean) => `
with e as (
  insert into events (id, workspace_id, type, data, created_at) values (?, ?, ?, cast(? as jsonb), ?)
  returning id, workspace_id, type, created_at
), ${fanOutCte('m', 'e', endpoint ? 'cast(? as uuid)' : undefined)}
select id from e`;

/** An event as emit() writes it. */
export interface NewEvent {
  id: string;
  workspaceId: string;
  type: string;
  /** Its data, as JSON. */
  data: string;
  createdAt: Date;
}

/**
 * Writes the event in `tx` and queues it for every endpoint of its workspace that wants its type, or, with
 * `endpointId`, for that endpoint alone.
 */
export async function insertEvent(tx: Queryable, event: NewEvent, endpointId?: string): Promise<void> {
  const bindings: unknown[] = [event.id, event.workspaceId, event.type, event.data, event.createdAt];
  if (endpointId) bindings.push(endpointId);
  await tx.raw(EMIT_SQL(endpointId !== undefined), bindings as never[]);
}

/**
 * The outbox's statements, shared by the one emit() (outbox.ts) and the statements that raise events
 * themselves (the record statement's thresholds, src/domain/recording/threshold-sql.ts): an event row, and one
 * webhook message per endpoint of its workspace that wants its type, written by the same statement, so
 * an event and its deliveries exist exactly when the change that caused them committed.
 */

/**
 * A CTE named `name` that queues the events of CTE `events` (its rows: id, workspace_id, type, created_at)
 * for every ACTIVE endpoint of their workspace subscribed to their type, or, with `endpoint`, for that one
 * endpoint alone (a test event).
 */
export const fanOutCte = (name: string, events: string, endpoint?: string) => `${name} as (
  insert into webhook_messages (event_id, endpoint_id, workspace_id, status, next_attempt_at, created_at)
  select e.id, ep.id, e.workspace_id, 'PENDING', e.created_at, e.created_at
    from ${events} e join webhook_endpoints ep on ep.workspace_id = e.workspace_id
   where ep.status = 'ACTIVE' and ep.deleted_at is null
     and ${endpoint ? `ep.id = ${endpoint}` : '(ep.event_types is null or ep.event_types @> jsonb_build_array(e.type))'}
)`;

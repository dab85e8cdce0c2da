/** An endpoint's deliveries: list and read them with their attempts, replay one or the failed since a time, send a test event. */
import type { Queryable } from '../../db/database.js';
import { AppError } from '../../errors.js';
import type { Actor } from '../actor.js';
import type { Page, PageRequest } from '../pagination.js';
import { get, lockForChange, RESOURCE, type WebhookDeps } from './webhook-lookup.js';
import type { WebhookAttemptRow, WebhookEndpointRow, WebhookMessageRow, WebhookMessageStatus } from './webhook-repo.js';

export interface WebhookMessage extends WebhookMessageRow {
  attempts: WebhookAttemptRow[];
}

function disabled(endpoint: WebhookEndpointRow): AppError {
  return new AppError('webhook_endpoint_disabled', 'The webhook endpoint is disabled: enable it (status ACTIVE) first', {
    current_status: endpoint.status,
  });
}

/** A change that sends: the endpoint locked, and ACTIVE. */
async function lockActive(deps: WebhookDeps, actor: Actor, endpointId: string, tx: Queryable): Promise<WebhookEndpointRow> {
  const endpoint = await lockForChange(deps, actor, endpointId, tx);
  if (endpoint.status !== 'ACTIVE') throw disabled(endpoint);
  return endpoint;
}

async function messageOf(
  deps: WebhookDeps,
  actor: Actor,
  endpointId: string,
  eventId: string,
  q: Queryable = deps.db,
): Promise<WebhookMessageRow> {
  await get(deps, actor, endpointId, q);
  const message = await deps.webhookRepo.findMessage(eventId, endpointId, q);
  if (!message) throw new AppError('webhook_message_not_found', 'Webhook message not found');
  return message;
}

export async function listMessages(
  deps: WebhookDeps,
  actor: Actor,
  endpointId: string,
  filter: { status?: WebhookMessageStatus | undefined; since?: Date | undefined },
  page: PageRequest,
): Promise<Page<WebhookMessage>> {
  const { webhookRepo: repo } = deps;
  await get(deps, actor, endpointId);
  const result = await repo.listMessages(endpointId, filter, page);
  const attempts = await repo.attemptsOf(
    endpointId,
    result.items.map((m) => m.event_id),
  );
  return {
    items: result.items.map((m) => ({ ...m, attempts: attempts.filter((a) => a.event_id === m.event_id) })),
    nextAfter: result.nextAfter,
  };
}

export async function getMessage(deps: WebhookDeps, actor: Actor, endpointId: string, eventId: string): Promise<WebhookMessage> {
  const message = await messageOf(deps, actor, endpointId, eventId);
  return { ...message, attempts: await deps.webhookRepo.attemptsOf(endpointId, [eventId]) };
}

/** Sends the message again (same webhook-id), whatever became of it. */
export async function replay(deps: WebhookDeps, actor: Actor, endpointId: string, eventId: string): Promise<void> {
  const { db, webhookRepo: repo, audit, clock } = deps;
  await db.transaction(async (tx) => {
    const endpoint = await lockActive(deps, actor, endpointId, tx);
    await messageOf(deps, actor, endpointId, eventId, tx);
    await repo.requeue(eventId, endpointId, clock.now(), tx);
    await audit.record(
      actor,
      {
        action: 'webhook_message.replayed',
        resourceType: RESOURCE,
        resourceId: endpointId,
        workspaceId: endpoint.workspace_id,
        changes: { messageId: eventId },
      },
      tx,
    );
  });
}

/** Every FAILED message created at or after `since`, queued again; how many. */
export async function replayFailed(deps: WebhookDeps, actor: Actor, endpointId: string, since: Date): Promise<number> {
  const { db, webhookRepo: repo, audit, clock } = deps;
  return db.transaction(async (tx) => {
    const endpoint = await lockActive(deps, actor, endpointId, tx);
    const count = await repo.requeueFailed(endpointId, since, clock.now(), tx);
    await audit.record(
      actor,
      {
        action: 'webhook_message.replayed_failed',
        resourceType: RESOURCE,
        resourceId: endpointId,
        workspaceId: endpoint.workspace_id,
        changes: { since: since.toISOString(), count },
      },
      tx,
    );
    return count;
  });
}

/** A webhook.test event to this endpoint alone; the queued message. */
export async function sendTest(deps: WebhookDeps, actor: Actor, endpointId: string): Promise<WebhookMessage> {
  const eventId = await deps.db.transaction(async (tx) => {
    const endpoint = await lockActive(deps, actor, endpointId, tx);
    return deps.events.emitTo(tx, endpoint.workspace_id, endpointId, 'webhook.test', { webhookEndpointId: endpointId });
  });
  return { ...(await messageOf(deps, actor, endpointId, eventId)), attempts: [] };
}

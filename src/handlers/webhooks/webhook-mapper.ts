import type { WebhookAttemptDto, WebhookEndpointDto, WebhookEvent, WebhookMessageDto } from '../../../generated/client/types.gen.js';
import type { WebhookMessage } from '../../domain/events/webhook-service.js';
import type { WebhookAttemptRow, WebhookEndpointRow } from '../../domain/events/webhook-repo.js';

/** Never carries the secret (it is shown once, beside this DTO, by create and rotate). */
export function toWebhookEndpointDto(row: WebhookEndpointRow): WebhookEndpointDto {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    url: row.url,
    description: row.description,
    eventTypes: row.event_types,
    status: row.status,
    ...(row.status === 'DISABLED' && row.disabled_reason
      ? { disabledReason: row.disabled_reason as NonNullable<WebhookEndpointDto['disabledReason']> }
      : {}),
    ...(row.failing_since ? { failingSince: row.failing_since.toISOString() } : {}),
    // The last rotation's: the secrets rotated out before it stop signing earlier.
    ...(row.previous_secrets[0] ? { previousSecretValidUntil: new Date(row.previous_secrets[0].expiresAt).toISOString() } : {}),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

function toWebhookAttemptDto(row: WebhookAttemptRow): WebhookAttemptDto {
  return {
    id: row.id,
    outcome: row.outcome,
    ...(row.response_status !== null ? { responseStatus: row.response_status } : {}),
    ...(row.response_body !== null ? { responseBody: row.response_body } : {}),
    ...(row.error !== null ? { error: row.error } : {}),
    latencyMs: row.latency_ms,
    createdAt: row.created_at.toISOString(),
  };
}

/** The message, with the body its deliveries carry (the event's timestamp is its creation). */
export function toWebhookMessageDto(message: WebhookMessage): WebhookMessageDto {
  return {
    id: message.event_id,
    endpointId: message.endpoint_id,
    eventType: message.type,
    status: message.status,
    attemptCount: message.attempt_count,
    ...(message.next_attempt_at && message.status === 'PENDING' ? { nextAttemptAt: message.next_attempt_at.toISOString() } : {}),
    ...(message.last_attempt_at ? { lastAttemptAt: message.last_attempt_at.toISOString() } : {}),
    createdAt: message.created_at.toISOString(),
    payload: { type: message.type, timestamp: message.created_at.toISOString(), data: message.data } as WebhookEvent,
    attempts: message.attempts.map(toWebhookAttemptDto),
  };
}

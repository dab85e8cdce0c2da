/**
 * The event types Nexus sends to webhook endpoints, and the `data` each carries (thin: ids and the figures
 * that triggered it). The contract's WebhookEventType and its `*EventData` schemas say the same on the wire
 * (openapi/areas/webhooks.yaml); docs/events.md says when each is raised.
 */
const EVENT_TYPES = [
  'quota.threshold_crossed',
  'access.status_changed',
  'inference_key.expiring',
  'inference_key.revoked',
  'workspace.budget_crossed',
  'provider_connection.unhealthy',
  'provider_connection.recovered',
  'billing.subscription_changed',
  'webhook_endpoint.disabled',
  'webhook.test',
  'batch.completed',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export function isEventType(value: string): value is EventType {
  return (EVENT_TYPES as readonly string[]).includes(value);
}

/** Why an access's status changed. */
export type AccessChangeReason = 'admin' | 'billing' | 'expiry';

export interface EventData {
  'quota.threshold_crossed': {
    workspaceAccessId: string;
    quotaPeriodId: string;
    thresholdPercent: number;
    grantedUnits: string;
    consumedUnits: string;
    periodEnd: string;
  };
  'access.status_changed': { workspaceAccessId: string; from: string; to: string; reason: AccessChangeReason };
  'inference_key.expiring': { inferenceKeyId: string; workspaceAccessId: string; expiresAt: string };
  'inference_key.revoked': { inferenceKeyId: string; workspaceAccessId: string };
  'workspace.budget_crossed': {
    level: 'soft' | 'hard';
    period: 'DAY' | 'MONTH';
    limitMicros: string;
    spentMicros: string;
    currency: string;
  };
  'provider_connection.unhealthy': {
    providerConnectionId: string;
    source: 'verification' | 'breaker';
    outcome?: string;
    httpStatus?: number;
    routeId?: string;
  };
  'provider_connection.recovered': { providerConnectionId: string; source: 'verification' | 'breaker'; routeId?: string };
  'billing.subscription_changed': {
    workspaceAccessId: string | null;
    billingConnectionId: string;
    externalSubscriptionId: string;
    from: string | null;
    to: string;
  };
  'webhook_endpoint.disabled': { webhookEndpointId: string; reason: 'failing' | 'gone'; failingSince?: string };
  'webhook.test': { webhookEndpointId: string };
  /** Raised by the statement that settles a batch (src/batches/batch-sql.ts, FINISH_SQL). */
  'batch.completed': {
    workspaceAccessId: string;
    invocationId: string;
    batchId: string;
    status: string;
    requests: number;
    settledRequests: number;
    boundUnits: string;
    settledUnits: string;
    costMicros: string;
  };
}

/** Billing rows -> wire DTOs. */
import type {
  BillingCheckoutDto,
  BillingConnectionDto,
  BillingPeriodSyncDto,
  BillingProductMappingDto,
  BillingWebhookEventDto,
  ExternalSubscriptionDto,
} from '../../../generated/client/types.gen.js';
import type {
  BillingConnectionRow,
  CheckoutRow,
  ExternalSubscriptionRow,
  PeriodSyncRow,
  ProductMappingRow,
  WebhookEventRow,
} from '../../domain/billing/billing-repo.js';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : undefined);

function defined<T extends object>(obj: T): T {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined && v !== null)) as T;
}

function webhookUrlOf(publicUrl: string, connectionId: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/webhooks/billing/${connectionId}`;
}

export function toBillingConnectionDto(row: BillingConnectionRow, publicUrl: string): BillingConnectionDto {
  return defined({
    id: row.id,
    workspaceId: row.workspace_id,
    kind: row.kind,
    provider: row.provider,
    mode: row.mode,
    status: row.status,
    name: row.name,
    webhookUrl: webhookUrlOf(publicUrl, row.id),
    credentialConfigured: row.credential_ciphertext !== null,
    webhookSecretConfigured: row.webhook_secret_ciphertext !== null,
    credentialVerificationStatus: row.credential_verification_status,
    credentialPreview: row.credential_preview ?? undefined,
    lastVerifiedAt: iso(row.last_verified_at),
    externalAccountId: row.external_account_id ?? undefined,
  });
}

export function toProductMappingDto(row: ProductMappingRow): BillingProductMappingDto {
  return defined({
    id: row.id,
    billingConnectionId: row.billing_connection_id,
    externalProductId: row.external_product_id,
    externalPriceId: row.external_price_id ?? undefined,
    planId: row.plan_id,
    checkoutEnabled: row.checkout_enabled,
    status: row.status,
    createdAt: row.created_at.toISOString(),
    disabledAt: iso(row.disabled_at),
  });
}

export function toCheckoutDto(row: CheckoutRow, provider: BillingConnectionRow['provider']): BillingCheckoutDto {
  return {
    id: row.id,
    workspaceAccessId: row.workspace_access_id,
    billingConnectionId: row.billing_connection_id,
    productMappingId: row.product_mapping_id,
    provider,
    providerCheckoutId: row.provider_checkout_id,
    url: row.url,
    createdAt: row.created_at.toISOString(),
  };
}

export function toWebhookEventDto(row: WebhookEventRow): BillingWebhookEventDto {
  return defined({
    id: row.id,
    billingConnectionId: row.billing_connection_id,
    providerEventId: row.provider_event_id,
    type: row.event_type,
    providerCreatedAt: iso(row.provider_created_at),
    signatureVerified: true,
    verifiedWith: row.verified_with,
    status: row.status,
    attempts: row.attempts,
    lastError: row.last_error ?? undefined,
    receivedAt: row.received_at.toISOString(),
    processedAt: iso(row.processed_at),
  });
}

export function toExternalSubscriptionDto(row: ExternalSubscriptionRow): ExternalSubscriptionDto {
  return defined({
    id: row.id,
    workspaceAccessId: row.workspace_access_id,
    billingConnectionId: row.billing_connection_id,
    provider: row.provider,
    externalSubscriptionId: row.external_subscription_id,
    externalCustomerId: row.external_customer_id ?? undefined,
    status: row.status,
    planId: row.plan_id ?? undefined,
    externalProductId: row.external_product_id ?? undefined,
    externalPriceId: row.external_price_id ?? undefined,
    currentPeriodStart: iso(row.current_period_start),
    currentPeriodEnd: iso(row.current_period_end),
    cancelAtPeriodEnd: row.cancel_at_period_end,
    canceledAt: iso(row.canceled_at),
    pastDueSince: iso(row.past_due_since),
    sourceUpdatedAt: row.source_updated_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  });
}

export function toPeriodSyncDto(row: PeriodSyncRow, applied: boolean, quotaGranted: boolean): BillingPeriodSyncDto {
  return {
    id: row.id,
    workspaceAccessId: row.workspace_access_id,
    billingConnectionId: row.billing_connection_id,
    externalPeriodId: row.external_period_id,
    planId: row.plan_id,
    periodStart: row.period_start.toISOString(),
    periodEnd: row.period_end.toISOString(),
    status: row.status as BillingPeriodSyncDto['status'],
    cancelAtPeriodEnd: row.cancel_at_period_end,
    sourceUpdatedAt: row.source_updated_at.toISOString(),
    quotaGranted,
    applied,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}
